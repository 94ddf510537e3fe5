package cli

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/utcp"
)

const ph = "UTCP_ARG_v_UTCP_END"

// parseCmds parses a template of the given commands.
func parseCmds(extra map[string]any, lines ...string) error {
	m := map[string]any{"call_template_type": "cli", "commands": cmds(lines...)}
	for k, v := range extra {
		m[k] = v
	}
	raw, _ := json.Marshal(m)
	_, err := Info.ParseTemplate(raw)
	return err
}

// refusedContexts put the placeholder where bash evaluates its value, or
// reads it as a name or as code. Each entry: the command and a word the
// error must contain.
var refusedContexts = []struct{ cmd, why string }{
	{`declare -i n=` + ph, "declare with options"},
	{`typeset -i n=` + ph, "typeset with options"},
	{`f() { local -i n=` + ph + `; }; f`, "local with options"},
	{`readonly -a a=` + ph, "readonly with options"},
	{`export -n x=` + ph, "export with options"},
	{`declare -- x=` + ph, "declare with options"},
	{`declare ` + ph + `=1`, "variable name given to declare"},
	{`export ` + ph, "variable name given to export"},
	{`declare -i n; n=` + ph, "attributes"},
	{`declare -n r=x; r=` + ph, "attributes"},
	{`local -i n; echo ${n:=` + ph + `}`, "attributes"},
	{`RANDOM=` + ph, "bash's own variables"},
	{`OPTIND=` + ph + ` true`, "bash's own variables"},
	{`PS4=` + ph + `; set -x; :`, "bash's own variables"},
	{`BASH_ENV=` + ph + ` bash x.sh`, "bash's own variables"},
	{`LD_PRELOAD=` + ph + ` ls`, "bash's own variables"},
	{`export PATH=` + ph, "bash's own variables"},
	{`IFS=` + ph, "bash's own variables"},
	{`a[` + ph + `]=1`, "array subscript"},
	{`a[0]=1; a[` + ph + `]+=1`, "array subscript"},
	{`a=(` + ph + `)`, "compound array assignment"},
	{`echo ${a[` + ph + `]}`, "array subscript"},
	{`echo "${a[` + ph + `]}"`, "array subscript"},
	{`s=abc; echo ${s:` + ph + `}`, "substring"},
	{`s=abc; echo "${s:0:` + ph + `}"`, "substring"},
	{`echo ${!` + ph + `}`, "parameter name"},
	{`echo ${x@` + ph + `}`, "transformation"},
	{`echo $((` + ph + ` + 1))`, "arithmetic"},
	{`echo "$(( ` + ph + ` ))"`, "arithmetic"},
	{`echo $(( 1 + $(echo ` + ph + `) ))`, "arithmetic"},
	{`echo $[` + ph + `]`, "arithmetic"},
	{`(( ` + ph + ` > 3 )) && echo big`, "arithmetic"},
	{`for ((i=0; i<` + ph + `; i++)); do :; done`, "arithmetic"},
	{`let x=` + ph, "let"},
	{`let "y = ` + ph + `"`, "let"},
	{`[[ ` + ph + ` -eq 1 ]]`, "arithmetic comparison"},
	{`[[ 1 -lt "` + ph + `" ]]`, "arithmetic comparison"},
	{`[[ $(echo "` + ph + `") -gt 1 ]] && echo yes`, "arithmetic comparison"},
	{`[[ -v ` + ph + ` ]]`, "[[ -v ]]"},
	{`[[ -R "` + ph + `" ]]`, "[[ -R ]]"},
	{`printf -v ` + ph + ` %s x`, "printf -v"},
	{`printf -v"` + ph + `" %s x`, "printf -v"},
	{`read ` + ph + ` <<<x`, "read"},
	{`read -a ` + ph + ` <<<x`, "read"},
	{`read -r -p "` + ph + `" x`, "read"},
	{`test -v ` + ph, "test -v"},
	{`[ -v "` + ph + `" ]`, "[ -v"},
	{`unset ` + ph, "unset"},
	{`eval ` + ph, "eval"},
	{`eval "echo ` + ph + `"`, "eval"},
	{`source ` + ph, "source"},
	{`. ` + ph, "reads a file of code"},
	{`mapfile ` + ph + ` <<<x`, "mapfile"},
	{`readarray -t ` + ph + ` <<<x`, "readarray"},
	{`getopts ab ` + ph, "getopts"},
	{`trap ` + ph + ` EXIT`, "trap"},
	{`alias x=` + ph, "alias"},
	{`compgen -W ` + ph, "compgen"},
	{`shopt -s ` + ph, "shopt"},
	{`hash -p /bin/ls ` + ph, "hash"},
	{`wait -p ` + ph + ` 1`, "wait -p"},
	{`for ` + ph + ` in a b; do :; done`, "for or select loop"},
	{`select ` + ph + ` in a; do break; done`, "for or select loop"},
	{`cat <<` + ph + "\nx\n" + ph + "\n", "here-document delimiter"},
	{"cat <<EOF\n" + ph + "\nEOF", "here-document"},
	{"cat <<'EOF'\n\"" + ph + "\"\nEOF", "here-document"},
	{"cat <<-EOF\n\t" + ph + "\n\tEOF", "here-document"},
	{`case x in ` + ph + `) echo y;; esac`, "case pattern"},
	{`case x in a|"` + ph + `") echo y;; esac`, "case pattern"},
	{ph + ` x`, "command name"},
	{`"` + ph + `" x`, "command name"},
	{`$(echo ` + ph + `) x`, "command name"},
	{`command ` + ph, "command name"},
	{`builtin ` + ph + ` x`, "command name"},
	{`exec ` + ph, "command name"},
	{`builtin declare -i n=` + ph, "declare with options"},
	{`command declare -i n=` + ph, "declare with options"},
	{`builtin eval ` + ph, "eval"},
	{`$cmd ` + ph, "named by an expansion"},
	{`"$@" ` + ph, "named by an expansion"},
	{`f() { :; }; ` + ph + `() { :; }`, "command name"},
	{`function ` + ph + ` { :; }`, "function name"},
	{`bash -c ` + ph, "-c, which is code"},
	{`sh -ec "echo ` + ph + `"`, "-c, which is code"},
	{`/bin/bash -c "` + ph + `" x`, "-c, which is code"},
	{`echo x 2>&` + ph, "file descriptor"},
	{`echo x >&` + ph, "file descriptor"},
	{`declare -i n=$(echo ` + ph + `)`, "declare with options"},
	{`x=1 && { declare -i n; n=` + ph + `; }`, "attributes"},
	{`echo "$(declare -i n=` + ph + `)"`, "declare with options"},
	{"echo `eval " + ph + "`", "eval"},
	{`echo $(read ` + ph + `)`, "read"},
	{`cat <(eval ` + ph + `)`, "eval"},
	{`if true; then let ` + ph + `; fi`, "let"},
	{`while read x; do unset ` + ph + `; done </dev/null`, "unset"},
	{`x=$(( ` + ph + ` ))`, "arithmetic"},
	{`echo ${x:=$((` + ph + `))}`, "arithmetic"},
}

func TestRefusedContexts(t *testing.T) {
	for _, c := range refusedContexts {
		err := parseCmds(nil, c.cmd)
		if !errors.Is(err, transports.ErrInvalidTemplate) || utcp.CodeOf(err) != utcp.CodeInvalidTemplate {
			t.Errorf("%q: err = %v, want invalid_template", c.cmd, err)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, c.why) || !strings.Contains(msg, "commands[0].command") || !strings.Contains(msg, "UTCP_ARG_v_UTCP_END") {
			t.Errorf("%q: error %q does not name the command, the placeholder and %q", c.cmd, msg, c.why)
		}
	}
	// The step is named.
	err := parseCmds(nil, "echo ok", "let "+ph)
	if err == nil || !strings.Contains(err.Error(), "commands[1].command") {
		t.Errorf("second step: %v", err)
	}
	// Attributes given in one step count in the others.
	if err := parseCmds(nil, "declare -gi n", "n="+ph); err == nil || !strings.Contains(err.Error(), "attributes") {
		t.Errorf("attribute in an earlier step: %v", err)
	}
}

// acceptedContexts are the positions where the value is data.
var acceptedContexts = []string{
	`echo ` + ph,
	`printf '%s\n' "` + ph + `"`,
	`printf '%s' 'pre ` + ph + ` post'`,
	`printf '%s' $'x\t` + ph + `'`,
	`printf %d ` + ph,
	`printf -v out %s ` + ph + `; echo "$out"`,
	`cat -- ` + ph,
	`ls ./` + ph,
	`grep --regexp=` + ph + ` /dev/null`,
	`/usr/bin/env printf %s ` + ph,
	`"$HOME/bin/tool" ` + ph,
	`x=` + ph + `; echo "$x"`,
	`x+=` + ph,
	`export x=` + ph,
	`local_x=` + ph + ` env`,
	`declare x=` + ph,
	`f() { local x=` + ph + `; echo "$x"; }; f`,
	`readonly x=` + ph,
	`unset x; echo ${x:-` + ph + `} "${x:-` + ph + `}" ${x+` + ph + `} ${x:?` + ph + `}`,
	`x=abc; echo ${x#` + ph + `} ${x%%` + ph + `} ${x/` + ph + `/` + ph + `} ${x//a/` + ph + `}`,
	`echo ${y:=` + ph + `}`,
	`cat < ` + ph,
	`echo x > ` + ph,
	`echo x >> "` + ph + `"`,
	`cat <<< ` + ph,
	`echo x 2>` + ph,
	`echo x &> ` + ph,
	`[[ ` + ph + ` == x ]] && echo same`,
	`[[ -f ` + ph + ` ]]`,
	`[[ ` + ph + ` =~ ^[a-z]+$ ]]`,
	`[[ -n ` + ph + ` && ` + ph + ` != x ]]`,
	`[ ` + ph + ` -eq 1 ]`,
	`test -f ` + ph,
	`case ` + ph + ` in a) echo a;; *) echo other;; esac`,
	`case x in a) echo ` + ph + `;; esac`,
	`for f in ` + ph + ` b; do echo "$f"; done`,
	`for f in a; do echo ` + ph + `; done`,
	`echo "$(cat ` + ph + `)"`,
	"echo `cat " + ph + "`",
	`diff <(sort ` + ph + `) /dev/null`,
	`if [ -n "` + ph + `" ]; then echo yes; else echo no; fi`,
	`while false; do echo ` + ph + `; done`,
	`{ echo ` + ph + `; } | cat`,
	`( cd /tmp && ls ` + ph + ` )`,
	`f() { echo "$1"; }; f ` + ph,
	`function g { echo "$1"; }; g ` + ph,
	`command -v ` + ph,
	`command printf %s ` + ph,
	`builtin echo ` + ph,
	`exec printf %s ` + ph,
	`bash -c 'echo "$1"' _ ` + ph,
	`bash script.sh ` + ph,
	`echo '$((` + ph + `))' "let ` + ph + `"`,
	`echo ` + ph + ` # let ` + ph,
	`echo \` + ph,
	"cat <<EOF\nliteral\nEOF\necho " + ph,
	"cat <<'EOF'\n$(( x ))\nEOF\necho " + ph,
	`n=` + ph + `; [[ $n =~ ^[0-9]+$ ]] || exit 2; echo $((n + 1))`,
	`time echo ` + ph,
	`! echo ` + ph,
	`echo ` + ph + ` && echo ` + ph + ` || echo ` + ph + `; echo ` + ph + ` & wait`,
	`echo ` + ph + ` |& cat`,
	`echo a{b,c}` + ph,
	`cd ` + ph,
	`exit 0 ` + ph,
	`kill -0 $$ ` + ph,
}

func TestAcceptedContexts(t *testing.T) {
	for _, c := range acceptedContexts {
		if err := parseCmds(nil, c); err != nil {
			t.Errorf("%q: %v", c, err)
		}
	}
}

func TestAllowDashArgumentsField(t *testing.T) {
	if err := parseCmds(map[string]any{"allow_dash_arguments": []string{"v"}}, "sort "+ph); err != nil {
		t.Errorf("valid allow_dash_arguments: %v", err)
	}
	err := parseCmds(map[string]any{"allow_dash_arguments": []string{"nosuch"}}, "sort "+ph)
	if !errors.Is(err, transports.ErrInvalidTemplate) || !strings.Contains(err.Error(), "allow_dash_arguments") {
		t.Errorf("unknown name: err = %v, want invalid_template about allow_dash_arguments", err)
	}
	if fields := transports.KnownFields(Info.Template); !slices.Contains(fields, "allow_dash_arguments") {
		t.Errorf("allow_dash_arguments is not a known field: %v", fields)
	}
}

// TestLeadingDashRefused: a value starting with - is refused where its
// placeholder begins an argument word, and passes where it cannot be an
// option or where the template allows it.
func TestLeadingDashRefused(t *testing.T) {
	tr := newTransport(t, "")
	dir := t.TempDir()
	input := filepath.Join(dir, "in.txt")
	if err := os.WriteFile(input, []byte("b\na\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.txt")

	sortTmpl := tmplOf(t, map[string]any{"commands": cmds("sort UTCP_ARG_file_UTCP_END")})
	res, err := callWith(t, tr, sortTmpl, map[string]any{"file": input})
	if err != nil || res.Value != "a\nb" {
		t.Fatalf("sort %s: %v, %v", input, res, err)
	}
	for _, v := range []any{"--output=" + out, "-o" + out, "-", "--", json.Number("-1")} {
		_, err := callWith(t, tr, sortTmpl, map[string]any{"file": v})
		if utcp.CodeOf(err) != utcp.CodeInvalidArguments || !strings.Contains(err.Error(), "sort") || !strings.Contains(err.Error(), "allow_dash_arguments") {
			t.Errorf("value %v: err = %v, want invalid_arguments naming sort and allow_dash_arguments", v, err)
		}
	}
	if _, err := os.Stat(out); err == nil {
		t.Fatalf("sort wrote %s", out)
	}

	cases := []struct {
		name   string
		fields map[string]any
		value  string
		want   string // "" means invalid_arguments
	}{
		{"inside a word", map[string]any{"commands": cmds(`printf '<%s>' x` + ph)}, "-n", "<x-n>"},
		{"after an option prefix", map[string]any{"commands": cmds(`printf '<%s>' --v=` + ph)}, "-n", "<--v=-n>"},
		{"quoted prefix", map[string]any{"commands": cmds(`printf '<%s>' "pre ` + ph + `"`)}, "-n", "<pre -n>"},
		{"assignment", map[string]any{"commands": cmds(`x=` + ph + `; printf '<%s>' "$x"`)}, "-n", "<-n>"},
		{"string test", map[string]any{"commands": cmds(`[[ ` + ph + ` == -n ]] && echo same`)}, "-n", "same"},
		{"redirection", map[string]any{"commands": cmds(`cd "$TMPDIR" && echo hi > ` + ph + ` && cat -- ./-n && rm -- ./-n`), "env_vars": map[string]string{"TMPDIR": dir}}, "-n", "hi"},
		{"bare", map[string]any{"commands": cmds(`printf '<%s>' ` + ph)}, "-n", ""},
		{"quoted", map[string]any{"commands": cmds(`printf '<%s>' "` + ph + `"`)}, "-n", ""},
		{"single quoted", map[string]any{"commands": cmds(`printf '<%s>' '` + ph + `'`)}, "-n", ""},
		{"after an empty expansion", map[string]any{"commands": cmds(`printf '<%s>' "$nothing"` + ph)}, "-n", ""},
		{"after an unquoted expansion", map[string]any{"commands": cmds(`printf '<%s>' x$IFS` + ph)}, "-n", ""},
		{"brace expansion", map[string]any{"commands": cmds(`printf '<%s>' {a,` + ph + `}`)}, "-n", ""},
		{"parameter default", map[string]any{"commands": cmds(`printf '<%s>' ${nothing:-` + ph + `}`)}, "-n", ""},
		{"command substitution", map[string]any{"commands": cmds(`printf '<%s>' "$(echo ` + ph + `)"`)}, "-n", ""},
		{"test operand", map[string]any{"commands": cmds(`[ ` + ph + ` ] && echo set`)}, "-n", ""},
		{"test operand, allowed", map[string]any{"commands": cmds(`[ ` + ph + ` ] && echo set`), "allow_dash_arguments": []string{"v"}}, "-n", ""},
		{"allowed", map[string]any{"commands": cmds(`printf '<%s>' ` + ph), "allow_dash_arguments": []string{"v"}}, "-n", "<-n>"},
		{"allowed, set --", map[string]any{"commands": cmds(`set -- ` + ph + `; printf '<%s>' "$1"`), "allow_dash_arguments": []string{"v"}}, "--output=x", "<--output=x>"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := callWith(t, tr, tmplOf(t, c.fields), map[string]any{"v": c.value})
			if c.want == "" {
				if utcp.CodeOf(err) != utcp.CodeInvalidArguments {
					t.Errorf("err = %v (result %v), want invalid_arguments", err, res)
				}
				return
			}
			if err != nil || res.Value != c.want {
				t.Errorf("got %v, %v; want %q", res, err, c.want)
			}
		})
	}
}

// TestHostileValueThroughAcceptedTemplates runs every accepted template
// with the value a[$(touch marker)] (and the marker path in every other
// argument a template needs) and checks the command never ran.
func TestHostileValueThroughAcceptedTemplates(t *testing.T) {
	tr := newTransport(t, "")
	dir := t.TempDir()
	marker := filepath.Join(dir, "pwned")
	values := []string{
		"a[$(touch " + marker + ")]",
		"$(touch " + marker + ")",
		"x[`touch " + marker + "`]",
		"a[$(touch " + marker + ")]+1",
	}
	for _, cmd := range acceptedContexts {
		// Run in a scratch directory so that redirections land there.
		work := t.TempDir()
		tmpl := tmplOf(t, map[string]any{"commands": cmds(cmd), "working_dir": work, "timeout": 5000})
		for _, v := range values {
			_, _ = callWith(t, tr, tmpl, map[string]any{"v": v})
			if _, err := os.Stat(marker); err == nil {
				t.Fatalf("template %q with value %q ran the command in the value", cmd, v)
			}
		}
	}
	// The same values do run a command through the constructs the parser
	// refuses, which shows the check above could fail.
	tmp := t.TempDir()
	for _, cmd := range []string{`declare -i n="$V"`, `s=abc; echo "${s:$V}"`, `a=(); a[$V]=1`, `printf -v "$V" x`} {
		script := "V='a[$(touch " + marker + ")]'; " + cmd
		_, _ = runBash(tmp, script)
		if _, err := os.Stat(marker); err != nil {
			t.Errorf("%s: the hostile value did not run (the test would not see an injection)", cmd)
		}
		os.Remove(marker)
	}
}

func runBash(dir, script string) (string, error) {
	cmd := exec.Command("bash", "--noprofile", "--norc", "-c", script)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestEveryBuiltinClassified: each builtin of the installed bash is known
// to the parser as a data builtin, a declaration builtin, a refused one
// or a wrapper, so a builtin that evaluates its arguments is never taken
// for a program.
func TestEveryBuiltinClassified(t *testing.T) {
	out, err := exec.Command("bash", "--noprofile", "--norc", "-c", "compgen -b").Output()
	if err != nil {
		t.Fatal(err)
	}
	names := strings.Fields(string(out))
	if len(names) < 50 {
		t.Fatalf("compgen -b listed %d builtins: %q", len(names), names)
	}
	for _, n := range names {
		_, refused := refusedBuiltins[n]
		known := 0
		for _, in := range []bool{dataBuiltins[n], declBuiltins[n], refused, n == "command" || n == "builtin" || n == "exec"} {
			if in {
				known++
			}
		}
		if known != 1 {
			t.Errorf("builtin %q is in %d classes, want exactly 1", n, known)
		}
	}
}
