package cli

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/utcp"
)

// Command is one step of a cli call template.
type Command struct {
	// Command is a bash command line. It may contain
	// UTCP_ARG_<name>_UTCP_END placeholders and may refer to the output of
	// earlier steps as $CMD_<i>_OUTPUT. It comes from the manual and is
	// trusted as code; argument values never become part of it.
	Command string `json:"command"`
	// AppendToFinalOutput says whether the step's standard output is part
	// of the result. Nil means true for the last step and false for the
	// others.
	AppendToFinalOutput *bool `json:"append_to_final_output,omitempty"`
}

// Template is the cli-specific part of a call template
// (call_template_type "cli").
type Template struct {
	// Commands are the steps, run in order in one bash process. Required,
	// at least one.
	Commands []Command `json:"commands"`
	// EnvVars are set for the process on top of the inherited variables,
	// overriding them.
	EnvVars map[string]string `json:"env_vars,omitempty"`
	// InheritEnvVars selects the daemon's environment variables the
	// process inherits: nil (JSON null or absent) inherits the safe
	// allowlist DefaultInherit, an empty non-nil list inherits nothing,
	// and a list inherits exactly the variables it names.
	InheritEnvVars []string `json:"inherit_env_vars"`
	// WorkingDir is the process's working directory; "" is the daemon's.
	// A relative path is relative to the daemon's working directory.
	WorkingDir string `json:"working_dir,omitempty"`
	// Timeout bounds one run, in milliseconds. 0 means the default:
	// DefaultCallTimeout for calls and DefaultDiscoveryTimeout for
	// discovery. A sooner context deadline wins.
	Timeout float64 `json:"timeout,omitempty"`
	// StdinArguments, a utcpd extension, writes the call's arguments as
	// one JSON object to the process's standard input (and {} during
	// discovery). Use it for large or structured arguments: Linux limits
	// one environment string, and so one placeholder value, to 128 KiB.
	StdinArguments bool `json:"stdin_arguments,omitempty"`
}

// DefaultInherit lists the daemon environment variables a process
// inherits when a template leaves inherit_env_vars null. Names ending in
// "*" are prefixes. Secrets are deliberately absent: name them in
// inherit_env_vars or pass them in env_vars.
var DefaultInherit = []string{
	"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "LC_*",
	"TZ", "TMPDIR", "TERM",
}

// Validate checks t: at least one non-empty command, well-formed
// environment variable names and values, and a non-negative timeout.
func (t *Template) Validate() error {
	if len(t.Commands) == 0 {
		return fmt.Errorf("field commands is required and must list at least one command")
	}
	for i, c := range t.Commands {
		if strings.TrimSpace(c.Command) == "" {
			return fmt.Errorf("field commands[%d].command is required and must not be empty", i)
		}
		if strings.ContainsRune(c.Command, 0) {
			return fmt.Errorf("field commands[%d].command contains a NUL byte", i)
		}
		if err := checkPlaceholders(c.Command); err != nil {
			return fmt.Errorf("field commands[%d].command: %w", i, err)
		}
	}
	for k, v := range t.EnvVars {
		if err := checkEnvName(k); err != nil {
			return fmt.Errorf("field env_vars: %w", err)
		}
		if strings.ContainsRune(v, 0) {
			return fmt.Errorf("field env_vars: the value of %s contains a NUL byte", k)
		}
	}
	for _, k := range t.InheritEnvVars {
		if err := checkEnvName(k); err != nil {
			return fmt.Errorf("field inherit_env_vars: %w", err)
		}
	}
	if strings.ContainsRune(t.WorkingDir, 0) {
		return fmt.Errorf("field working_dir contains a NUL byte")
	}
	if t.Timeout < 0 {
		return fmt.Errorf("field timeout must not be negative (it is in milliseconds), got %v", t.Timeout)
	}
	return nil
}

func checkEnvName(k string) error {
	if k == "" {
		return fmt.Errorf("empty variable name")
	}
	if strings.ContainsAny(k, "=\x00") {
		return fmt.Errorf("variable name %q contains '=' or a NUL byte", k)
	}
	return nil
}

// checkPlaceholders refuses placeholders in arithmetic contexts.
func checkPlaceholders(cmd string) error {
	arith := rewrite(cmd, func(string) string { return "V" }).arith
	if len(arith) == 0 {
		return nil
	}
	return fmt.Errorf("placeholder UTCP_ARG_%s_UTCP_END is in a bash arithmetic context "+
		"($((...)), ((...)), $[...], let, an array subscript or a [[ ]] test with -eq, -lt, ...), "+
		"where bash evaluates the value as an expression and can run commands hidden in it; "+
		"copy it into a variable, check that it is a number, and use the variable instead", arith[0])
}

// Placeholders returns the argument names the template's commands refer
// to with UTCP_ARG_<name>_UTCP_END, in order of first appearance.
// Placeholders in comments or escaped with a backslash do not count.
func (t *Template) Placeholders() []string {
	var names []string
	seen := map[string]bool{}
	for _, c := range t.Commands {
		for _, n := range rewrite(c.Command, func(string) string { return "V" }).names {
			if !seen[n] {
				seen[n] = true
				names = append(names, n)
			}
		}
	}
	return names
}

func parseTemplate(raw json.RawMessage) (utcp.CallTemplate, error) {
	tmpl, err := transports.DecodeTemplate(raw, &Template{})
	if err != nil {
		return tmpl, err
	}
	if tmpl.Auth != nil {
		return tmpl, &utcp.Error{
			Code:    utcp.CodeInvalidTemplate,
			Message: "cli: field auth must be null: a cli template carries no credentials (pass secrets through env_vars)",
			Err:     transports.ErrInvalidTemplate,
		}
	}
	return tmpl, nil
}

// placeholderRE matches one argument placeholder. Names are restricted to
// characters that cannot change the shell's quoting state, so a
// placeholder never spans a quote.
var placeholderRE = regexp.MustCompile(`^UTCP_ARG_([A-Za-z0-9_.\-]+?)_UTCP_END`)

const placeholderPrefix = "UTCP_ARG_"

// Contexts of the bash lexer in rewrite.
type quoteCtx int

const (
	ctxBare     quoteCtx = iota // unquoted, at the top level
	ctxSingle                   // '...'
	ctxDouble                   // "..." (and $"...")
	ctxANSI                     // $'...'
	ctxSubst                    // $( ... ), <( ... ), >( ... ): unquoted again
	ctxBacktick                 // ` ... `: unquoted again
	ctxArith                    // $(( )), (( )), $[ ], let ..., ${a[ ]}: arithmetic
	ctxTest                     // [[ ... ]]
	ctxParam                    // ${ ... }
)

type frame struct {
	ctx   quoteCtx
	depth int    // open ( in ctxSubst and ctxArith "))", [ in ctxArith "]", { in ctxParam
	close string // ctxArith: "))", "]", or ";" for let (ends before a separator)
	// arith: the frame is, or is nested in, an arithmetic context, where
	// bash evaluates expanded values as expressions (and runs the command
	// substitutions in array subscripts they contain).
	arith bool
	// dq: a ctxParam or ctxArith frame opened inside double quotes.
	dq bool
	// subscript: in ctxParam, the index of the [ of ${name[...]}, else -1.
	subscript int
	// ctxTest: an arithmetic operator (-eq, -lt, ...) was seen, and the
	// placeholders seen inside the test, nested ones included.
	arithOp bool
	inTest  []string
}

// rewritten is the result of rewrite.
type rewritten struct {
	text  string
	names []string // the placeholders replaced, in order, with repeats
	// arith lists the placeholders in arithmetic contexts: $((...)),
	// ((...)), $[...], let, array subscripts and [[ ]] tests with -eq, -lt
	// and the like. Bash evaluates a value there as an expression, and an
	// expression such as a[$(cmd)] runs cmd, so Validate refuses them.
	arith []string
}

// rewrite replaces every argument placeholder in cmd with a reference to
// the shell variable ref(name), written for the quote context the
// placeholder sits in, so that the variable's value always expands to
// exactly the argument's text, one word, and is never parsed as code:
//
//	unquoted, in $(...) or `...`:   "$V"
//	inside "...":                   ${V}
//	inside '...':                   '"$V"'   (close, quoted expansion, reopen)
//	inside $'...':                  '"$V"$'
//
// It tracks quotes, backslash escapes, command, process, parameter and
// arithmetic expansion, [[ ]] tests and comments with a small lexer; a
// placeholder escaped by a backslash or inside a comment is left as it
// is. Here-documents are not recognised.
func rewrite(cmd string, ref func(name string) string) rewritten {
	var out strings.Builder
	var res rewritten
	stack := []frame{{ctx: ctxBare, subscript: -1}}
	top := func() *frame { return &stack[len(stack)-1] }
	push := func(c quoteCtx, close string) {
		parent := top()
		f := frame{ctx: c, close: close, subscript: -1, arith: parent.arith || c == ctxArith}
		if c == ctxArith || c == ctxParam {
			f.dq = parent.ctx == ctxDouble || (parent.dq && (parent.ctx == ctxArith || parent.ctx == ctxParam))
		}
		stack = append(stack, f)
	}
	pop := func() {
		f := top()
		if f.ctx == ctxTest && f.arithOp {
			res.arith = append(res.arith, f.inTest...)
		}
		if len(stack) > 1 {
			stack = stack[:len(stack)-1]
		}
	}
	// copyEscaped copies the backslash at i and the byte after it; a
	// placeholder right after the backslash is copied whole, unreplaced.
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
	wordStart := func(i int) bool {
		return i == 0 || strings.IndexByte(" \t\n;&|()<>", cmd[i-1]) >= 0
	}
	// commandStart reports whether the word at i is in command position.
	commandStart := func(i int) bool {
		j := i - 1
		for j >= 0 && (cmd[j] == ' ' || cmd[j] == '\t') {
			j--
		}
		return j < 0 || strings.IndexByte(";&|(\n{!", cmd[j]) >= 0
	}
	at := func(i int, s string) bool { return strings.HasPrefix(cmd[i:], s) }
	blankAfter := func(i int) bool { return i >= len(cmd) || cmd[i] == ' ' || cmd[i] == '\t' || cmd[i] == '\n' }

	for i := 0; i < len(cmd); {
		f := top()
		if at(i, placeholderPrefix) {
			if m := placeholderRE.FindStringSubmatchIndex(cmd[i:]); m != nil {
				name := cmd[i+m[2] : i+m[3]]
				res.names = append(res.names, name)
				v := ref(name)
				switch {
				case f.ctx == ctxDouble || f.dq:
					out.WriteString("${" + v + "}")
				case f.ctx == ctxSingle:
					out.WriteString(`'"$` + v + `"'`)
				case f.ctx == ctxANSI:
					out.WriteString(`'"$` + v + `"$'`)
				default:
					out.WriteString(`"$` + v + `"`)
				}
				if f.arith {
					res.arith = append(res.arith, name)
				}
				for k := range stack {
					if stack[k].ctx == ctxTest {
						stack[k].inTest = append(stack[k].inTest, name)
					}
				}
				i += m[1]
				continue
			}
		}
		c := cmd[i]
		switch f.ctx {
		case ctxSingle:
			if c == '\'' {
				pop()
			}
			out.WriteByte(c)
			i++
			continue
		case ctxANSI:
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
		n := 0
		switch f.ctx {
		case ctxDouble:
			if c == '"' {
				n = 1
			}
		case ctxSubst:
			if c == ')' && f.depth == 0 {
				n = 1
			}
		case ctxBacktick:
			if c == '`' {
				n = 1
			}
		case ctxParam:
			if c == '}' && f.depth == 0 {
				n = 1
			}
		case ctxTest:
			if at(i, "]]") && wordStart(i) {
				n = 2
			}
		case ctxArith:
			switch f.close {
			case "))":
				if at(i, "))") && f.depth == 0 {
					n = 2
				}
			case "]":
				if c == ']' && f.depth == 0 {
					n = 1
				}
			case ";":
				if strings.IndexByte(";&|\n)`", c) >= 0 {
					pop() // let ends here; the parent handles c
					continue
				}
			}
		}
		if n > 0 {
			out.WriteString(cmd[i : i+n])
			pop()
			i += n
			continue
		}

		if c == '\\' {
			i = copyEscaped(i)
			continue
		}
		// Expansions, both unquoted and inside double quotes.
		switch {
		case at(i, "$(("):
			out.WriteString("$((")
			push(ctxArith, "))")
			i += 3
			continue
		case at(i, "$("):
			out.WriteString("$(")
			push(ctxSubst, "")
			i += 2
			continue
		case at(i, "$["):
			out.WriteString("$[")
			push(ctxArith, "]")
			i += 2
			continue
		case at(i, "${"):
			out.WriteString("${")
			push(ctxParam, "")
			j := i + 2
			if j < len(cmd) && (cmd[j] == '#' || cmd[j] == '!') {
				j++
			}
			for j < len(cmd) && isShellName(cmd[j:j+1]) {
				j++
			}
			if j < len(cmd) && cmd[j] == '[' {
				top().subscript = j
			}
			i += 2
			continue
		case c == '`':
			out.WriteByte(c)
			push(ctxBacktick, "")
			i++
			continue
		}
		if f.ctx == ctxDouble || (f.dq && c == '\'') {
			out.WriteByte(c)
			i++
			continue
		}

		// Unquoted contexts.
		unquotedCmd := f.ctx == ctxBare || f.ctx == ctxSubst || f.ctx == ctxBacktick
		switch {
		case c == '\'':
			push(ctxSingle, "")
		case c == '"':
			push(ctxDouble, "")
		case at(i, "$'"):
			out.WriteString("$'")
			push(ctxANSI, "")
			i += 2
			continue
		case at(i, `$"`):
			out.WriteString(`$"`)
			push(ctxDouble, "")
			i += 2
			continue
		case unquotedCmd && c == '#' && wordStart(i):
			// A comment runs to the end of the line, uninterpreted.
			end := strings.IndexByte(cmd[i:], '\n')
			if end < 0 {
				end = len(cmd) - i
			}
			out.WriteString(cmd[i : i+end])
			i += end
			continue
		case unquotedCmd && at(i, "((") && wordStart(i):
			out.WriteString("((")
			push(ctxArith, "))")
			i += 2
			continue
		case unquotedCmd && at(i, "[[") && wordStart(i) && blankAfter(i+2):
			out.WriteString("[[")
			push(ctxTest, "")
			i += 2
			continue
		case unquotedCmd && at(i, "let") && wordStart(i) && commandStart(i) && blankAfter(i+3):
			out.WriteString("let")
			push(ctxArith, ";")
			i += 3
			continue
		case unquotedCmd && (at(i, "<(") || at(i, ">(")):
			out.WriteString(cmd[i : i+2])
			push(ctxSubst, "")
			i += 2
			continue
		case f.ctx == ctxTest && c == '-' && wordStart(i) && blankAfter(i+3) &&
			(at(i, "-eq") || at(i, "-ne") || at(i, "-lt") || at(i, "-le") || at(i, "-gt") || at(i, "-ge")):
			f.arithOp = true
		case f.ctx == ctxParam && i == f.subscript:
			out.WriteByte(c)
			push(ctxArith, "]")
			i++
			continue
		case c == '(' && (f.ctx == ctxSubst || f.ctx == ctxArith && f.close == "))"):
			f.depth++
		case c == ')' && (f.ctx == ctxSubst || f.ctx == ctxArith && f.close == "))") && f.depth > 0:
			f.depth--
		case c == '[' && f.ctx == ctxArith && f.close == "]":
			f.depth++
		case c == ']' && f.ctx == ctxArith && f.close == "]" && f.depth > 0:
			f.depth--
		case c == '{' && f.ctx == ctxParam:
			f.depth++
		case c == '}' && f.ctx == ctxParam && f.depth > 0:
			f.depth--
		}
		out.WriteByte(c)
		i++
	}
	for len(stack) > 1 {
		pop() // a [[ left open at the end still counts
	}
	res.text = out.String()
	return res
}

// argVars names the environment variables that carry a call's arguments:
// __UTCP_ARG_<nonce>_<name> for names valid in shell variable names, and
// __UTCP_ARGX_<nonce>_<n> for the others (numbered, under a different
// prefix, so the two kinds never collide).
type argVars struct {
	nonce string
	vars  map[string]string // argument name -> variable name
	order []string          // argument names in order of first use
}

// ref returns the variable for argument name, allocating it on first use.
func (a *argVars) ref(name string) string {
	if v, ok := a.vars[name]; ok {
		return v
	}
	var v string
	if isShellName(name) {
		v = "__UTCP_ARG_" + a.nonce + "_" + name
	} else {
		v = fmt.Sprintf("__UTCP_ARGX_%s_%d", a.nonce, len(a.vars))
	}
	a.vars[name] = v
	a.order = append(a.order, name)
	return v
}

func isShellName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '_' && (c < '0' || c > '9') && (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') {
			return false
		}
	}
	return s != ""
}

// script is a template's commands compiled into one bash script for one
// run.
type script struct {
	text     string
	args     *argVars
	stepVar  string // the variable naming the step output file, "" if unused
	captures bool   // some step's output is captured through the step file
}

// compile builds the bash script for t. Every step runs in the same shell,
// so cd, exported variables and functions carry over. A step whose output
// is needed (any step but an appended last one) writes its standard
// output to the step file, which the script reads back into CMD_<i>_OUTPUT
// (trailing newlines removed, as $(...) does) and prints when the step is
// appended. A step that exits non-zero ends the script with its status.
// The last step, when appended, writes straight to the script's standard
// output, so its output streams.
func compile(t *Template, nonce string) *script {
	s := &script{args: &argVars{nonce: nonce, vars: map[string]string{}}, stepVar: "__UTCP_STEP_" + nonce}
	var b strings.Builder
	last := len(t.Commands) - 1
	for i, c := range t.Commands {
		body := rewrite(c.Command, s.args.ref).text
		appendOut := i == last
		if c.AppendToFinalOutput != nil {
			appendOut = *c.AppendToFinalOutput
		}
		if i == last && appendOut {
			fmt.Fprintf(&b, "{ %s\n}\n", body)
			continue
		}
		s.captures = true
		fmt.Fprintf(&b, "{ %s\n} >\"${%s}\"\n", body, s.stepVar)
		b.WriteString("__utcp_rc=$?; if [ \"$__utcp_rc\" -ne 0 ]; then exit \"$__utcp_rc\"; fi\n")
		fmt.Fprintf(&b, "CMD_%d_OUTPUT=$(<\"${%s}\")\n", i, s.stepVar)
		if appendOut {
			fmt.Fprintf(&b, "printf '%%s\\n' \"$CMD_%d_OUTPUT\"\n", i)
		}
	}
	s.text = b.String()
	if !s.captures {
		s.stepVar = ""
	}
	return s
}
