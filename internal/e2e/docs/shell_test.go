package docs

import (
	"fmt"
	"strings"
)

// segment is one logical line of a shell script: a command line with its
// quoted newlines, backslash continuations and here-documents, or a blank
// or comment line. The segments of a script, joined, are the script.
type segment struct {
	// Text is the segment's text, its final newline included.
	Text string
	// Line is the 0-based script line the segment starts on.
	Line int
	// Words are the words of the segment's first simple command (up to
	// its first operator or redirection), quotes and escapes removed; a
	// word holding a $(...) or `...` keeps that text as it is. Empty for
	// a blank or comment line.
	Words []string
	// Background reports whether the segment ends with a lone & (after
	// which nothing but a comment follows).
	Background bool
}

// splitScript cuts a shell script into segments. It understands what
// the docs' commands use (quotes, escapes, comments, continuations,
// $(...), backquotes, operators, here-documents), not all of bash: it
// only has to find where a command line ends, its first words and a
// trailing &.
func splitScript(s string) ([]segment, error) {
	var segs []segment
	line := 0
	for i := 0; i < len(s); {
		l := lexer{s: s, i: i, line: line}
		seg, err := l.segment()
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", l.line+1, err)
		}
		seg.Line = line
		segs = append(segs, seg)
		i, line = l.i, l.line
	}
	return segs, nil
}

// lexer reads one segment of s from i.
type lexer struct {
	s    string
	i    int
	line int

	words      []string // the first simple command's words
	inFirst    bool     // still in the first simple command
	cur        strings.Builder
	inWord     bool
	lastOp     string
	wordsAfter int // words since the last operator
	heredocs   []heredoc
}

// heredoc is a here-document whose body follows the current line.
type heredoc struct {
	delim     string
	stripTabs bool
}

func (l *lexer) endWord() {
	if !l.inWord {
		return
	}
	if l.inFirst {
		l.words = append(l.words, l.cur.String())
	}
	l.wordsAfter++
	l.cur.Reset()
	l.inWord = false
}

func (l *lexer) op(o string) {
	l.endWord()
	l.inFirst = false
	l.lastOp = o
	l.wordsAfter = 0
	l.i += len(o)
}

func (l *lexer) segment() (segment, error) {
	start := l.i
	l.inFirst = true
	s := l.s
	for l.i < len(s) {
		c := s[l.i]
		next := byte(0)
		if l.i+1 < len(s) {
			next = s[l.i+1]
		}
		switch {
		case c == '\n':
			l.endWord()
			l.i++
			l.line++
			if err := l.heredocBodies(); err != nil {
				return segment{}, err
			}
			return l.done(start), nil
		case c == ' ' || c == '\t':
			l.endWord()
			l.i++
		case c == '#' && !l.inWord:
			for l.i < len(s) && s[l.i] != '\n' {
				l.i++
			}
		case c == '\\':
			if next == '\n' {
				l.i += 2
				l.line++
				continue
			}
			if next != 0 {
				l.cur.WriteByte(next)
			}
			l.inWord = true
			l.i += 2
		case c == '\'':
			end := strings.IndexByte(s[l.i+1:], '\'')
			if end < 0 {
				return segment{}, fmt.Errorf("unterminated single quote")
			}
			inner := s[l.i+1 : l.i+1+end]
			l.cur.WriteString(inner)
			l.line += strings.Count(inner, "\n")
			l.inWord = true
			l.i += end + 2
		case c == '"':
			if err := l.doubleQuoted(); err != nil {
				return segment{}, err
			}
		case c == '$' && next == '(':
			raw, err := l.balanced(l.i+1, '(', ')')
			if err != nil {
				return segment{}, err
			}
			l.cur.WriteString("$" + raw)
			l.inWord = true
		case c == '`':
			end := strings.IndexByte(s[l.i+1:], '`')
			if end < 0 {
				return segment{}, fmt.Errorf("unterminated backquote")
			}
			raw := s[l.i : l.i+end+2]
			l.cur.WriteString(raw)
			l.line += strings.Count(raw, "\n")
			l.inWord = true
			l.i += end + 2
		case c == '<' && next == '<':
			if l.i+2 < len(s) && s[l.i+2] == '<' {
				l.op("<<<")
				continue
			}
			l.op("<<")
			h := heredoc{}
			if l.i < len(s) && s[l.i] == '-' {
				h.stripTabs = true
				l.i++
			}
			for l.i < len(s) && (s[l.i] == ' ' || s[l.i] == '\t') {
				l.i++
			}
			j := l.i
			for j < len(s) && !strings.ContainsRune(" \t\n;&|<>()", rune(s[j])) {
				j++
			}
			h.delim = strings.NewReplacer(`'`, "", `"`, "", `\`, "").Replace(s[l.i:j])
			if h.delim == "" {
				return segment{}, fmt.Errorf("a here-document without a delimiter")
			}
			l.heredocs = append(l.heredocs, h)
			l.i = j
		case c == '&' || c == '|' || c == ';':
			if next == c {
				l.op(string([]byte{c, c}))
			} else {
				l.op(string(c))
			}
		case c == '>' || c == '<' || c == '(' || c == ')':
			l.op(string(c))
		default:
			l.cur.WriteByte(c)
			l.inWord = true
			l.i++
		}
	}
	l.endWord()
	if len(l.heredocs) > 0 {
		return segment{}, fmt.Errorf("a here-document without its body")
	}
	return l.done(start), nil
}

// done returns the segment from start to the lexer's position.
func (l *lexer) done(start int) segment {
	return segment{
		Text:       l.s[start:l.i],
		Words:      l.words,
		Background: l.lastOp == "&" && l.wordsAfter == 0,
	}
}

// doubleQuoted reads a "..." string into the current word.
func (l *lexer) doubleQuoted() error {
	s := l.s
	l.i++
	for l.i < len(s) {
		c := s[l.i]
		switch {
		case c == '"':
			l.i++
			l.inWord = true
			return nil
		case c == '\\' && l.i+1 < len(s):
			n := s[l.i+1]
			switch n {
			case '"', '\\', '$', '`':
				l.cur.WriteByte(n)
			case '\n':
				l.line++
			default:
				l.cur.WriteByte('\\')
				l.cur.WriteByte(n)
			}
			l.i += 2
		case c == '$' && l.i+1 < len(s) && s[l.i+1] == '(':
			raw, err := l.balanced(l.i+1, '(', ')')
			if err != nil {
				return err
			}
			l.cur.WriteString("$" + raw)
		default:
			if c == '\n' {
				l.line++
			}
			l.cur.WriteByte(c)
			l.i++
		}
	}
	return fmt.Errorf("unterminated double quote")
}

// balanced returns s[from:] up to and including the close that matches
// the open at from (quotes inside are skipped), and moves past it.
func (l *lexer) balanced(from int, open, close byte) (string, error) {
	s := l.s
	depth := 0
	for j := from; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case '\'':
			end := strings.IndexByte(s[j+1:], '\'')
			if end < 0 {
				return "", fmt.Errorf("unterminated single quote")
			}
			j += end + 1
		case '"':
			for j++; j < len(s) && s[j] != '"'; j++ {
				if s[j] == '\\' {
					j++
				}
			}
		case open:
			depth++
		case close:
			depth--
			if depth == 0 {
				raw := s[from : j+1]
				l.line += strings.Count(raw, "\n")
				l.i = j + 1
				return raw, nil
			}
		}
	}
	return "", fmt.Errorf("unterminated $(")
}

// heredocBodies skips the bodies of the here-documents the line just
// ended opened.
func (l *lexer) heredocBodies() error {
	for _, h := range l.heredocs {
		for {
			if l.i >= len(l.s) {
				return fmt.Errorf("the here-document ending with %q is not closed", h.delim)
			}
			end := strings.IndexByte(l.s[l.i:], '\n')
			var text string
			if end < 0 {
				text = l.s[l.i:]
				l.i = len(l.s)
			} else {
				text = l.s[l.i : l.i+end]
				l.i += end + 1
			}
			l.line++
			if h.stripTabs {
				text = strings.TrimLeft(text, "\t")
			}
			if text == h.delim {
				break
			}
		}
	}
	l.heredocs = nil
	return nil
}

// assignments returns how many leading words are NAME=VALUE assignments.
func assignments(words []string) int {
	n := 0
	for _, w := range words {
		name, _, ok := strings.Cut(w, "=")
		if !ok || name == "" || !isName(name) {
			break
		}
		n++
	}
	return n
}

// isName reports whether s is a shell variable name.
func isName(s string) bool {
	for i, c := range s {
		if c != '_' && (c < 'A' || c > 'Z') && (c < 'a' || c > 'z') && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return s != ""
}
