package docs

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// shellLangs are the fence info strings whose blocks are commands.
var shellLangs = map[string]bool{"sh": true, "bash": true, "shell": true, "console": true}

// directivePrefix starts a one-line HTML comment that tells the docs test
// about the next shell block: <!-- docs-test: KEYWORD ARGUMENT -->.
const directivePrefix = "docs-test:"

// block is one fenced shell block of a markdown file.
type block struct {
	// File is the markdown file's path relative to the repository root;
	// Line the 1-based line of the opening fence.
	File string
	Line int
	// Lang is the fence's info string (sh, bash, shell or console).
	Lang string
	// Script is the shell text the block runs: the block's content with
	// the fence's indentation removed, or for a console block its $-lines
	// without the prompt.
	Script string
	// ScriptLine[i] is the markdown line of Script's line i.
	ScriptLine []int
	// Expect are texts the block's output must contain (ignoring
	// whitespace): the expect directives, and a console block's output
	// lines.
	Expect []string
	// Exit is the exit status the block's last command must have (the
	// exit directive; 0 without one). Every other command must succeed.
	Exit int
	// Skip is the reason the block is not run (the skip directive); ""
	// runs it.
	Skip string
	// Timeout is the timeout directive's duration text ("" for the
	// default).
	Timeout string
}

// Where names the block for messages: file:line.
func (b block) Where() string { return fmt.Sprintf("%s:%d", b.File, b.Line) }

// fence is an opening code fence.
type fence struct {
	indent int    // columns before the fence characters
	char   byte   // '`' or '~'
	n      int    // how many
	info   string // the first word of the info string
}

// openFence reports whether line opens a fenced code block.
func openFence(line string) (fence, bool) {
	// Any indentation: a fence in a list item is indented by the item.
	trimmed := strings.TrimLeft(line, " ")
	indent := len(line) - len(trimmed)
	for _, c := range []byte{'`', '~'} {
		n := 0
		for n < len(trimmed) && trimmed[n] == c {
			n++
		}
		if n >= 3 {
			info := strings.TrimSpace(trimmed[n:])
			if c == '`' && strings.Contains(info, "`") {
				return fence{}, false
			}
			if f := strings.Fields(info); len(f) > 0 {
				info = f[0]
			}
			return fence{indent: indent, char: c, n: n, info: info}, true
		}
	}
	return fence{}, false
}

// closes reports whether line closes the block f opened.
func (f fence) closes(line string) bool {
	trimmed := strings.TrimSpace(line)
	if len(trimmed) < f.n {
		return false
	}
	for i := 0; i < len(trimmed); i++ {
		if trimmed[i] != f.char {
			return false
		}
	}
	return true
}

// dedent removes up to n leading spaces of line (the fence's
// indentation, as CommonMark does for the content of an indented fence).
func dedent(line string, n int) string {
	i := 0
	for i < n && i < len(line) && line[i] == ' ' {
		i++
	}
	return line[i:]
}

// parseMarkdown returns the shell blocks of a markdown file, in order,
// with their directives applied. A directive that does not precede a
// shell block (only blank lines and other directives may come between),
// an unknown directive and a skip without a reason are errors.
func parseMarkdown(file string, data []byte) ([]block, error) {
	var (
		blocks  []block
		pending []string // directives waiting for their block
		pendAt  int
		cur     *fence
		curLang bool
		b       block
		body    []string
		bodyAt  []int
	)
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSuffix(sc.Text(), "\r")
		if cur != nil {
			if !cur.closes(line) {
				if curLang {
					body = append(body, dedent(line, cur.indent))
					bodyAt = append(bodyAt, n)
				}
				continue
			}
			if curLang {
				if err := b.setBody(body, bodyAt); err != nil {
					return nil, fmt.Errorf("%s: %w", b.Where(), err)
				}
				blocks = append(blocks, b)
			}
			cur = nil
			continue
		}
		if f, ok := openFence(line); ok {
			cur = &f
			curLang = shellLangs[f.info]
			if len(pending) > 0 && !curLang {
				return nil, fmt.Errorf("%s:%d: a docs-test directive precedes a %q block; directives apply to sh, bash, shell and console blocks only", file, pendAt, f.info)
			}
			b = block{File: file, Line: n, Lang: f.info}
			body, bodyAt = nil, nil
			for _, d := range pending {
				if err := b.apply(d); err != nil {
					return nil, fmt.Errorf("%s:%d: %w", file, pendAt, err)
				}
			}
			pending = nil
			continue
		}
		trimmed := strings.TrimSpace(line)
		if d, ok := directive(trimmed); ok {
			if len(pending) == 0 {
				pendAt = n
			}
			pending = append(pending, d)
			continue
		}
		if strings.Contains(trimmed, "<!--") && strings.Contains(trimmed, directivePrefix) {
			return nil, fmt.Errorf("%s:%d: a docs-test directive must be alone on its line as <!-- docs-test: ... -->", file, n)
		}
		if trimmed != "" && len(pending) > 0 {
			return nil, fmt.Errorf("%s:%d: a docs-test directive is not followed by a shell block (only blank lines may come between)", file, pendAt)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if cur != nil {
		return nil, fmt.Errorf("%s:%d: the code block is not closed", file, b.Line)
	}
	if len(pending) > 0 {
		return nil, fmt.Errorf("%s:%d: a docs-test directive is not followed by a shell block", file, pendAt)
	}
	return blocks, nil
}

// directive returns the text after "docs-test:" of a line that is one
// docs-test HTML comment.
func directive(line string) (string, bool) {
	inner, ok := strings.CutPrefix(line, "<!--")
	if !ok {
		return "", false
	}
	inner, ok = strings.CutSuffix(inner, "-->")
	if !ok {
		return "", false
	}
	inner, ok = strings.CutPrefix(strings.TrimSpace(inner), directivePrefix)
	if !ok {
		return "", false
	}
	return strings.TrimSpace(inner), true
}

// apply sets the field a directive names. The directives:
//
//	skip (REASON)   do not run the block; the reason is required
//	expect TEXT     the block's output contains TEXT, ignoring whitespace
//	exit N          the block's last command exits with status N
//	timeout DUR     the block may run for DUR (a Go duration) instead of
//	                the default
func (b *block) apply(d string) error {
	key, arg, _ := strings.Cut(d, " ")
	arg = strings.TrimSpace(arg)
	switch key {
	case "skip":
		reason := strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(arg, "("), ")"))
		if reason == "" {
			return fmt.Errorf("docs-test: skip needs a reason: <!-- docs-test: skip (why it cannot run in the test) -->")
		}
		b.Skip = reason
	case "expect":
		if arg == "" {
			return fmt.Errorf("docs-test: expect needs the text the output must contain")
		}
		b.Expect = append(b.Expect, arg)
	case "exit":
		n, err := strconv.Atoi(arg)
		if err != nil || n < 0 || n > 255 {
			return fmt.Errorf("docs-test: exit needs a status 0-255, not %q", arg)
		}
		b.Exit = n
	case "timeout":
		if arg == "" {
			return fmt.Errorf("docs-test: timeout needs a duration")
		}
		b.Timeout = arg
	default:
		return fmt.Errorf("docs-test: unknown directive %q (known: skip, expect, exit, timeout)", key)
	}
	return nil
}

// setBody sets Script from the block's lines: as they are, or for a
// console block the commands after "$ " (with their continuation lines),
// the other lines becoming expected output.
func (b *block) setBody(lines []string, at []int) error {
	if b.Lang != "console" {
		b.Script = strings.Join(lines, "\n") + "\n"
		b.ScriptLine = at
		return nil
	}
	var script []string
	cont := false
	for i, l := range lines {
		if cont {
			script = append(script, l)
			b.ScriptLine = append(b.ScriptLine, at[i])
			cont = strings.HasSuffix(l, `\`)
			continue
		}
		if cmd, ok := strings.CutPrefix(l, "$ "); ok {
			script = append(script, cmd)
			b.ScriptLine = append(b.ScriptLine, at[i])
			cont = strings.HasSuffix(cmd, `\`)
			continue
		}
		if out := strings.TrimSpace(l); out != "" && out != "..." && out != "…" {
			if len(script) == 0 {
				return fmt.Errorf("a console block's output line comes before any $ command")
			}
			b.Expect = append(b.Expect, out)
		}
	}
	if len(script) == 0 {
		return fmt.Errorf("a console block without a $ command")
	}
	b.Script = strings.Join(script, "\n") + "\n"
	return nil
}
