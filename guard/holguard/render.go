package holguard

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// The command line of a cli tool, as HOL Guard sees it.
//
// The cli transport never pastes argument values into its commands: it
// passes each UTCP_ARG_<name>_UTCP_END placeholder as one shell word
// through an environment variable, quoted for the context the placeholder
// sits in. The rendered command line shows the same thing with the
// values in place, quoted so that a shell would read each back as exactly
// the argument's text: 'value' unquoted, with the quotes escaped inside
// '...', $'...' and "...". It is for inspection only; nothing here runs
// it.

// placeholderRE matches one placeholder, as the cli transport does.
var placeholderRE = regexp.MustCompile(`^UTCP_ARG_([A-Za-z0-9_.\-]+?)_UTCP_END`)

const placeholderPrefix = "UTCP_ARG_"

// cliTemplate is the part of a cli call template the guard reads. It is
// decoded leniently: the gateway has already validated the template.
type cliTemplate struct {
	Commands []struct {
		Command string `json:"command"`
	} `json:"commands"`
	// CommandName is the legacy (v0.1) single command, normally already
	// rewritten to commands by the manual loader.
	CommandName string `json:"command_name"`
}

// renderCLI renders the command line of a cli call template with the
// call's arguments: the template's commands, each with its placeholders
// replaced, joined by newlines (the transport runs them as one bash
// script, in order).
func renderCLI(raw json.RawMessage, args map[string]any) (string, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return "", fmt.Errorf("the tool's call template is not available")
	}
	var t cliTemplate
	if err := json.Unmarshal(raw, &t); err != nil {
		return "", fmt.Errorf("the cli call template does not parse: %w", err)
	}
	var cmds []string
	for _, c := range t.Commands {
		cmds = append(cmds, c.Command)
	}
	if len(cmds) == 0 && t.CommandName != "" {
		cmds = []string{t.CommandName}
	}
	if len(cmds) == 0 {
		return "", fmt.Errorf("the cli call template has no commands")
	}
	out := make([]string, len(cmds))
	for i, c := range cmds {
		r, err := renderCommand(c, args)
		if err != nil {
			return "", err
		}
		out[i] = r
	}
	return strings.Join(out, "\n"), nil
}

// Quoting contexts of the small bash lexer in renderCommand.
type qctx uint8

const (
	qBare     qctx = iota // unquoted, top level
	qSingle               // '...'
	qDouble               // "..." and $"..."
	qANSI                 // $'...'
	qSubst                // $(...), <(...), >(...): unquoted again
	qBacktick             // `...`: unquoted again
	qParam                // ${...}
)

type qframe struct {
	ctx   qctx
	depth int  // nested ( in qSubst, { in qParam
	dq    bool // a qParam opened inside double quotes
}

// renderCommand replaces the placeholders of one command with the
// argument values, quoted for their context. Like the cli transport, it
// leaves alone placeholders escaped with a backslash or inside a comment.
// A placeholder naming a missing argument is an error, as it is for the
// transport.
func renderCommand(cmd string, args map[string]any) (string, error) {
	var out strings.Builder
	stack := []qframe{{ctx: qBare}}
	top := func() *qframe { return &stack[len(stack)-1] }
	push := func(c qctx) {
		f := qframe{ctx: c}
		if c == qParam {
			p := top()
			f.dq = p.ctx == qDouble || p.ctx == qParam && p.dq
		}
		stack = append(stack, f)
	}
	pop := func() {
		if len(stack) > 1 {
			stack = stack[:len(stack)-1]
		}
	}
	at := func(i int, s string) bool { return strings.HasPrefix(cmd[i:], s) }
	// copyEscaped copies a backslash and what it escapes: one byte, or a
	// whole placeholder, which then stays unreplaced.
	copyEscaped := func(i int) int {
		if i+1 >= len(cmd) {
			out.WriteByte('\\')
			return i + 1
		}
		if m := placeholderRE.FindStringIndex(cmd[i+1:]); m != nil {
			out.WriteString(cmd[i : i+1+m[1]])
			return i + 1 + m[1]
		}
		out.WriteString(cmd[i : i+2])
		return i + 2
	}
	wordStart := func(i int) bool { return i == 0 || strings.IndexByte(" \t\n;&|()<>", cmd[i-1]) >= 0 }

	for i := 0; i < len(cmd); {
		f := top()
		if at(i, placeholderPrefix) {
			if m := placeholderRE.FindStringSubmatchIndex(cmd[i:]); m != nil {
				name := cmd[i+m[2] : i+m[3]]
				v, ok := args[name]
				if !ok {
					return "", fmt.Errorf("missing argument %q: the command refers to it as UTCP_ARG_%s_UTCP_END", name, name)
				}
				s, err := argText(v)
				if err != nil {
					return "", fmt.Errorf("argument %q: %w", name, err)
				}
				out.WriteString(quoteIn(stack, s))
				i += m[1]
				continue
			}
		}
		c := cmd[i]
		switch f.ctx {
		case qSingle:
			if c == '\'' {
				pop()
			}
			out.WriteByte(c)
			i++
			continue
		case qANSI:
			if c == '\\' {
				i = copyEscaped(i)
				continue
			}
			if c == '\'' {
				pop()
			}
			out.WriteByte(c)
			i++
			continue
		}
		// The end of the current frame.
		if f.ctx == qDouble && c == '"' || f.ctx == qBacktick && c == '`' ||
			f.ctx == qSubst && c == ')' && f.depth == 0 || f.ctx == qParam && c == '}' && f.depth == 0 {
			pop()
			out.WriteByte(c)
			i++
			continue
		}
		if c == '\\' {
			i = copyEscaped(i)
			continue
		}
		// Expansions, unquoted and inside double quotes.
		switch {
		case at(i, "$("):
			push(qSubst)
			out.WriteString("$(")
			i += 2
			continue
		case at(i, "${"):
			push(qParam)
			out.WriteString("${")
			i += 2
			continue
		case c == '`':
			push(qBacktick)
			out.WriteByte(c)
			i++
			continue
		}
		if f.ctx == qDouble || f.dq && c == '\'' {
			out.WriteByte(c)
			i++
			continue
		}
		// Unquoted.
		switch {
		case c == '\'':
			push(qSingle)
		case c == '"':
			push(qDouble)
		case at(i, "$'"):
			push(qANSI)
			out.WriteString("$'")
			i += 2
			continue
		case at(i, `$"`):
			push(qDouble)
			out.WriteString(`$"`)
			i += 2
			continue
		case at(i, "<(") || at(i, ">("):
			push(qSubst)
			out.WriteString(cmd[i : i+2])
			i += 2
			continue
		case c == '#' && f.ctx != qParam && wordStart(i):
			// A comment, to the end of the line, copied as it is.
			end := strings.IndexByte(cmd[i:], '\n')
			if end < 0 {
				end = len(cmd) - i
			}
			out.WriteString(cmd[i : i+end])
			i += end
			continue
		case c == '(' && f.ctx == qSubst:
			f.depth++
		case c == ')' && f.ctx == qSubst:
			f.depth--
		case c == '{' && f.ctx == qParam:
			f.depth++
		case c == '}' && f.ctx == qParam:
			f.depth--
		}
		out.WriteByte(c)
		i++
	}
	return out.String(), nil
}

// quoteIn writes s so that, in the quoting context at the top of stack,
// a shell reads it as exactly s.
func quoteIn(stack []qframe, s string) string {
	var q string
	switch f := stack[len(stack)-1]; {
	case f.ctx == qSingle:
		// Close the quote, add an escaped quote, reopen.
		q = strings.ReplaceAll(s, "'", `'\''`)
	case f.ctx == qANSI:
		q = strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s)
	case f.ctx == qParam && f.dq:
		// Inside "${x:-...}" bash still pairs single quotes, so the value
		// goes in a nested double-quoted string, where they are plain.
		q = `"` + dqEscape(s) + `"`
	case f.ctx == qDouble:
		q = dqEscape(s)
	default:
		q = shellQuote(s)
	}
	// Inside `...` the shell first removes one level of backslashes
	// before \ and ` (and would end the substitution at a bare `).
	for _, f := range stack {
		if f.ctx == qBacktick {
			q = strings.NewReplacer(`\`, `\\`, "`", "\\`").Replace(q)
		}
	}
	return q
}

// dqEscape escapes s for the inside of a double-quoted string.
func dqEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, `$`, `\$`, "`", "\\`").Replace(s)
}

// shellQuote single-quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// shellWord returns s as it is when a shell reads it as one plain word,
// and single-quoted otherwise.
func shellWord(s string) string {
	if s == "" {
		return "''"
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("_@%+=:,./-", c) >= 0) {
			return shellQuote(s)
		}
	}
	return s
}

// argText renders an argument value as the cli transport passes it:
// strings as they are, anything else as compact JSON.
func argText(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case json.Number:
		return x.String(), nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimSuffix(buf.String(), "\n"), nil
}

// mapping is one command_from entry: the tools it applies to and how
// their command is built from the arguments.
type mapping struct {
	tools string // the glob, for messages
	// arg names the argument that holds the whole command; "" when the
	// command is built from pieces.
	arg    string
	pieces []piece
}

// piece is a literal run or, when arg is set, a placeholder.
type piece struct {
	lit string
	arg string
}

// parseMapping parses one command_from value: a template when it
// contains a brace ("{cmd} {flags}", with {{ and }} for literal braces),
// otherwise the name of one argument.
func parseMapping(tools, spec string) (mapping, error) {
	m := mapping{tools: tools}
	if !strings.ContainsAny(spec, "{}") {
		if strings.TrimSpace(spec) == "" {
			return m, fmt.Errorf("the argument name is empty")
		}
		if strings.ContainsAny(spec, " \t\n") {
			return m, fmt.Errorf("argument name %q contains white space (a template names its arguments in braces: \"{cmd} {args}\")", spec)
		}
		m.arg = spec
		return m, nil
	}
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			m.pieces = append(m.pieces, piece{lit: lit.String()})
			lit.Reset()
		}
	}
	refs := 0
	for i := 0; i < len(spec); {
		switch {
		case strings.HasPrefix(spec[i:], "{{"):
			lit.WriteByte('{')
			i += 2
		case strings.HasPrefix(spec[i:], "}}"):
			lit.WriteByte('}')
			i += 2
		case spec[i] == '{':
			end := strings.IndexByte(spec[i:], '}')
			if end < 0 {
				return m, fmt.Errorf("template %q: unclosed {", spec)
			}
			name := spec[i+1 : i+end]
			if strings.TrimSpace(name) == "" || strings.ContainsAny(name, "{ \t\n") {
				return m, fmt.Errorf("template %q: invalid placeholder {%s}", spec, name)
			}
			flush()
			m.pieces = append(m.pieces, piece{arg: name})
			refs++
			i += end + 1
		case spec[i] == '}':
			return m, fmt.Errorf("template %q: unmatched } (write }} for a literal brace)", spec)
		default:
			lit.WriteByte(spec[i])
			i++
		}
	}
	flush()
	if refs == 0 {
		return m, fmt.Errorf("template %q refers to no argument", spec)
	}
	return m, nil
}

// render builds the command of a call: an argument's value as it is (an
// array as its elements, each a shell word, joined by spaces; any other
// non-string as JSON), and a template with each placeholder replaced the
// same way (a missing argument is empty). The single argument of the
// non-template form must be present.
func (m *mapping) render(args map[string]any) (string, error) {
	if m.arg != "" {
		v, ok := args[m.arg]
		if !ok || v == nil {
			return "", fmt.Errorf("argument %q, which holds the command (command_from %q), is missing", m.arg, m.tools)
		}
		return valueText(v)
	}
	var b strings.Builder
	for _, p := range m.pieces {
		if p.arg == "" {
			b.WriteString(p.lit)
			continue
		}
		v, ok := args[p.arg]
		if !ok || v == nil {
			continue
		}
		s, err := valueText(v)
		if err != nil {
			return "", err
		}
		b.WriteString(s)
	}
	return b.String(), nil
}

// valueText renders one argument for a command_from command.
func valueText(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case []string:
		words := make([]string, len(x))
		for i, s := range x {
			words[i] = shellWord(s)
		}
		return strings.Join(words, " "), nil
	case []any:
		words := make([]string, len(x))
		for i, e := range x {
			s, err := argText(e)
			if err != nil {
				return "", err
			}
			words[i] = shellWord(s)
		}
		return strings.Join(words, " "), nil
	}
	return argText(v)
}
