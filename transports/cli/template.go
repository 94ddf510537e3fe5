package cli

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/utcpd/utcpd/internal/shellword"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/utcp"
)

// Type is the call_template_type this package implements.
const Type = "cli"

// Command is one step of a cli call template.
type Command struct {
	// Command is a bash command line. It may contain
	// UTCP_ARG_<name>_UTCP_END placeholders and may refer to the output of
	// earlier steps as $CMD_<i>_OUTPUT. It comes from the manual and is
	// trusted as code; argument values never become part of it.
	Command string `json:"command" jsonschema:"required"`
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
	Commands []Command `json:"commands" jsonschema:"required"`
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
	// AllowDashArguments, a utcpd extension, names the arguments whose
	// values may start with "-" where their placeholder begins a command
	// argument word. Elsewhere such a value is refused (invalid_arguments),
	// so that a caller cannot turn an operand into an option (sort
	// --output=/path). List an argument only when the command treats the
	// word as an operand whatever it holds (after --, say) or when any
	// option is harmless. Each name must be a placeholder of the commands.
	AllowDashArguments []string `json:"allow_dash_arguments,omitempty"`
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
	}
	if err := t.checkPlaceholders(); err != nil {
		return err
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

// checkPlaceholders refuses a template with a placeholder in a position
// where bash evaluates its value rather than passing it on as data (see
// shellparse.go for the positions accepted), and allow_dash_arguments
// entries that name no placeholder.
func (t *Template) checkPlaceholders() error {
	parsed := make([]rewritten, len(t.Commands))
	attributed := map[string]bool{}
	for i, c := range t.Commands {
		parsed[i] = rewrite(c.Command, func(string) string { return "V" })
		for n := range parsed[i].attributed {
			attributed[n] = true
		}
	}
	used := map[string]bool{}
	for i, r := range parsed {
		for _, u := range r.uses {
			used[u.name] = true
			if u.allowed() && u.assign != "" && (specialVar(u.assign) || attributed[u.assign]) {
				what := "one of bash's own variables, which bash or the programs it starts may evaluate"
				if attributed[u.assign] {
					what = "a variable the template gives attributes (declare -i and the like), so bash may evaluate the value"
				}
				u.kind, u.why = useRefused, "the value assigned to "+u.assign+", "+what
			}
			if !u.allowed() {
				return fmt.Errorf("field commands[%d].command: placeholder UTCP_ARG_%s_UTCP_END stands in %s, "+
					"where bash does not treat its value as plain data (it may evaluate it as arithmetic, a variable name or code); "+
					"a placeholder may only be (part of) an argument of a command, a plain assignment value x=…, "+
					"a redirection target or a string test operand; copy it into a variable, check the value, "+
					"and use the variable instead", i, u.name, u.describe())
			}
		}
	}
	for _, n := range t.AllowDashArguments {
		if !used[n] {
			return fmt.Errorf("field allow_dash_arguments: %q is not the name of a placeholder UTCP_ARG_%s_UTCP_END of the commands", n, n)
		}
	}
	return nil
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

// ParseTemplate decodes a cli call template: the base fields and the
// Template fields (unknown ones warn with a did-you-mean, see
// transports.DecodeTemplate). A template with auth is invalid_template.
func ParseTemplate(raw json.RawMessage) (utcp.CallTemplate, error) {
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

// rewritten is the result of rewrite.
type rewritten struct {
	text  string
	names []string // the placeholders replaced, in order, with repeats
	// uses says where each placeholder occurrence stands (parallel to
	// names, except for placeholders in here-documents, listed last).
	uses []use
	// attributed lists the variables a declaration builtin gives options
	// (declare -i n, local -n r, ...): assigning a placeholder to them is
	// refused, as bash may evaluate the value.
	attributed map[string]bool
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
// It also records, for each placeholder, the syntactic position it
// stands in (see shellparse.go); Validate refuses the positions where
// bash would evaluate the value. A placeholder escaped by a backslash or
// inside a comment is left as it is.
func rewrite(cmd string, ref func(name string) string) rewritten {
	return parseCommand(cmd, ref)
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
	if shellword.IsName(name) {
		v = "__UTCP_ARG_" + a.nonce + "_" + name
	} else {
		v = fmt.Sprintf("__UTCP_ARGX_%s_%d", a.nonce, len(a.vars))
	}
	a.vars[name] = v
	a.order = append(a.order, name)
	return v
}

// script is a template's commands compiled into one bash script for one
// run.
type script struct {
	text     string
	args     *argVars
	stepVar  string // the variable naming the step output file, "" if unused
	captures bool   // some step's output is captured through the step file
	// leading maps each argument whose placeholder begins an argument
	// word somewhere to the command that reads it: a value starting with
	// "-" would be an option there.
	leading map[string]dashUse
}

// dashUse is where a placeholder begins an argument word.
type dashUse struct {
	cmd    string // the command
	always bool   // a leading "-" is refused even if allowed (test, [)
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
	s := &script{args: &argVars{nonce: nonce, vars: map[string]string{}}, stepVar: "__UTCP_STEP_" + nonce, leading: map[string]dashUse{}}
	var b strings.Builder
	last := len(t.Commands) - 1
	for i, c := range t.Commands {
		r := rewrite(c.Command, s.args.ref)
		body := r.text
		for _, u := range r.uses {
			if u.kind == useArg && u.lead {
				if d, ok := s.leading[u.name]; !ok || u.noDash && !d.always {
					s.leading[u.name] = dashUse{cmd: u.cmd, always: u.noDash}
				}
			}
		}
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
