package holguard

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/utcpd/utcpd/internal/shellword"
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

// renderCommand replaces the placeholders of one command with the
// argument values, quoted for their context, which it learns from the
// lexer the cli transport uses. Like the cli transport, it leaves alone
// placeholders escaped with a backslash or inside a comment. A
// placeholder naming a missing argument is an error, as it is for the
// transport.
func renderCommand(cmd string, args map[string]any) (string, error) {
	var out strings.Builder
	lx := shellword.NewLexer(cmd)
	for {
		t, ok := lx.Next()
		if !ok {
			return out.String(), nil
		}
		if t.Kind != shellword.Placeholder {
			out.WriteString(cmd[t.Start:t.End])
			continue
		}
		v, ok := args[t.Name]
		if !ok {
			return "", fmt.Errorf("missing argument %q: the command refers to it as UTCP_ARG_%s_UTCP_END", t.Name, t.Name)
		}
		s, err := argText(v)
		if err != nil {
			return "", fmt.Errorf("argument %q: %w", t.Name, err)
		}
		out.WriteString(quoteIn(lx.Stack(), s))
	}
}

// quoteIn writes s so that, in the quoting context at the top of stack,
// a shell reads it as exactly s.
func quoteIn(stack []shellword.Frame, s string) string {
	var q string
	switch f := stack[len(stack)-1]; {
	case f.Kind == shellword.SingleQuoted:
		// Close the quote, add an escaped quote, reopen.
		q = strings.ReplaceAll(s, "'", `'\''`)
	case f.Kind == shellword.ANSIQuoted:
		q = strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s)
	case f.Kind == shellword.ParamExp && f.InDouble:
		// Inside "${x:-...}" bash still pairs single quotes, so the value
		// goes in a nested double-quoted string, where they are plain.
		q = `"` + dqEscape(s) + `"`
	case f.Kind == shellword.DoubleQuoted:
		q = dqEscape(s)
	default:
		q = shellQuote(s)
	}
	// Inside `...` the shell first removes one level of backslashes
	// before \ and ` (and would end the substitution at a bare `).
	for _, f := range stack {
		if f.Kind == shellword.Backquoted {
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
