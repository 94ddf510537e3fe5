package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/utcpd/utcpd/examples/servers/cli/clifixture"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/utcp"
)

func newTransport(t *testing.T, config string) *Transport {
	t.Helper()
	opts := transports.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if config != "" {
		opts.Config = json.RawMessage(config)
	}
	tr, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = tr.Close() })
	return tr
}

// tmplOf builds and parses a cli template from its fields.
func tmplOf(t *testing.T, fields map[string]any) *utcp.CallTemplate {
	t.Helper()
	m := map[string]any{"name": "test", "call_template_type": "cli"}
	for k, v := range fields {
		m[k] = v
	}
	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := Info.ParseTemplate(raw)
	if err != nil {
		t.Fatalf("ParseTemplate(%s): %v", raw, err)
	}
	return &tmpl
}

// cmds turns command lines into the commands field.
func cmds(lines ...string) []any {
	out := make([]any, len(lines))
	for i, l := range lines {
		out[i] = map[string]any{"command": l}
	}
	return out
}

func callWith(t *testing.T, tr *Transport, tmpl *utcp.CallTemplate, args map[string]any) (*utcp.Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	return tr.CallTool(ctx, &utcp.Call{Tool: "test.tool", Manual: "test", Name: "tool", Template: tmpl, Arguments: args})
}

func mustCall(t *testing.T, tr *Transport, fields map[string]any, args map[string]any) any {
	t.Helper()
	res, err := callWith(t, tr, tmplOf(t, fields), args)
	if err != nil {
		t.Fatalf("CallTool: %v", err)
	}
	return res.Value
}

func TestParseTemplate(t *testing.T) {
	cases := []struct {
		name    string
		raw     string
		wantErr string // "" means valid
	}{
		{"minimal", `{"call_template_type":"cli","commands":[{"command":"true"}]}`, ""},
		{"all fields", `{"call_template_type":"cli","commands":[{"command":"true","append_to_final_output":true}],
			"env_vars":{"A":"1"},"inherit_env_vars":["PATH"],"working_dir":"/","timeout":1500,"stdin_arguments":true}`, ""},
		{"auth null", `{"call_template_type":"cli","commands":[{"command":"true"}],"auth":null}`, ""},
		{"no commands", `{"call_template_type":"cli"}`, "commands"},
		{"empty commands", `{"call_template_type":"cli","commands":[]}`, "commands"},
		{"blank command", `{"call_template_type":"cli","commands":[{"command":"  "}]}`, "commands[0].command"},
		{"commands not a list", `{"call_template_type":"cli","commands":"ls"}`, "commands"},
		{"auth set", `{"call_template_type":"cli","commands":[{"command":"true"}],"auth":{"auth_type":"api_key","api_key":"k"}}`, "auth must be null"},
		{"negative timeout", `{"call_template_type":"cli","commands":[{"command":"true"}],"timeout":-1}`, "timeout"},
		{"bad env name", `{"call_template_type":"cli","commands":[{"command":"true"}],"env_vars":{"A=B":"1"}}`, "env_vars"},
		{"bad inherit name", `{"call_template_type":"cli","commands":[{"command":"true"}],"inherit_env_vars":[""]}`, "inherit_env_vars"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tmpl, err := Info.ParseTemplate(json.RawMessage(c.raw))
			if c.wantErr == "" {
				if err != nil {
					t.Fatalf("ParseTemplate: %v", err)
				}
				if _, ok := tmpl.Spec.(*Template); !ok {
					t.Fatalf("Spec is %T", tmpl.Spec)
				}
				return
			}
			if !errors.Is(err, transports.ErrInvalidTemplate) {
				t.Fatalf("err = %v, want ErrInvalidTemplate", err)
			}
			if !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("error %q does not mention %q", err, c.wantErr)
			}
		})
	}
}

func TestInheritEnvVarsNullVersusEmpty(t *testing.T) {
	spec := func(raw string) *Template {
		tmpl, err := Info.ParseTemplate(json.RawMessage(raw))
		if err != nil {
			t.Fatal(err)
		}
		return tmpl.Spec.(*Template)
	}
	if got := spec(`{"call_template_type":"cli","commands":[{"command":"x"}]}`).InheritEnvVars; got != nil {
		t.Errorf("absent: InheritEnvVars = %#v, want nil", got)
	}
	if got := spec(`{"call_template_type":"cli","commands":[{"command":"x"}],"inherit_env_vars":null}`).InheritEnvVars; got != nil {
		t.Errorf("null: InheritEnvVars = %#v, want nil", got)
	}
	if got := spec(`{"call_template_type":"cli","commands":[{"command":"x"}],"inherit_env_vars":[]}`).InheritEnvVars; got == nil || len(got) != 0 {
		t.Errorf("[]: InheritEnvVars = %#v, want empty non-nil", got)
	}
}

func TestRewrite(t *testing.T) {
	ref := func(name string) string { return "V_" + name }
	cases := []struct {
		in, want string
		names    []string
	}{
		{`cat UTCP_ARG_f_UTCP_END`, `cat "$V_f"`, []string{"f"}},
		{`echo "x UTCP_ARG_a_UTCP_END y"`, `echo "x ${V_a} y"`, []string{"a"}},
		{`echo 'x UTCP_ARG_a_UTCP_END y'`, `echo 'x '"$V_a"' y'`, []string{"a"}},
		{`echo $'x\tUTCP_ARG_a_UTCP_END'`, `echo $'x\t'"$V_a"$''`, []string{"a"}},
		{`echo "$(cat UTCP_ARG_a_UTCP_END)"`, `echo "$(cat "$V_a")"`, []string{"a"}},
		{"echo \"`cat UTCP_ARG_a_UTCP_END`\"", "echo \"`cat \"$V_a\"`\"", []string{"a"}},
		{`diff <(sort UTCP_ARG_a_UTCP_END) "UTCP_ARG_b_UTCP_END"`, `diff <(sort "$V_a") "${V_b}"`, []string{"a", "b"}},
		{`echo "it's UTCP_ARG_a_UTCP_END"`, `echo "it's ${V_a}"`, []string{"a"}},
		{`echo 'say "hi"' UTCP_ARG_a_UTCP_END`, `echo 'say "hi"' "$V_a"`, []string{"a"}},
		{`echo \'UTCP_ARG_a_UTCP_END`, `echo \'"$V_a"`, []string{"a"}},
		{`echo \UTCP_ARG_a_UTCP_END`, `echo \UTCP_ARG_a_UTCP_END`, nil},
		{`echo "\UTCP_ARG_a_UTCP_END"`, `echo "\\${V_a}"`, []string{"a"}},
		{`echo "\\UTCP_ARG_a_UTCP_END"`, `echo "\\${V_a}"`, []string{"a"}},
		{`echo "\\\UTCP_ARG_a_UTCP_END"`, `echo "\\\\${V_a}"`, []string{"a"}},
		{"echo UTCP_ARG_a_UTCP_END # don't UTCP_ARG_b_UTCP_END\necho 'UTCP_ARG_c_UTCP_END'", "echo \"$V_a\" # don't UTCP_ARG_b_UTCP_END\necho ''\"$V_c\"''", []string{"a", "c"}},
		{`echo a#UTCP_ARG_a_UTCP_END`, `echo a#"$V_a"`, []string{"a"}},
		{`echo $(( 1 + $(echo UTCP_ARG_n_UTCP_END) ))`, `echo $(( 1 + $(echo "$V_n") ))`, []string{"n"}},
		{`f --x=UTCP_ARG_x.y-z_UTCP_END.txt`, `f --x="$V_x.y-z".txt`, []string{"x.y-z"}},
		{`echo UTCP_ARG_a_UTCP_ENDUTCP_ARG_b_UTCP_END`, `echo "$V_a""$V_b"`, []string{"a", "b"}},
		{`echo UTCP_ARG__UTCP_END UTCP_ARG_ spaced_UTCP_END`, `echo UTCP_ARG__UTCP_END UTCP_ARG_ spaced_UTCP_END`, nil},
		{`echo ${x:-UTCP_ARG_a_UTCP_END} "${x:-UTCP_ARG_a_UTCP_END}"`, `echo ${x:-"$V_a"} "${x:-${V_a}}"`, []string{"a", "a"}},
		{`echo ${x:-'UTCP_ARG_a_UTCP_END'} "${#x}" ${x%%\}}`, `echo ${x:-''"$V_a"''} "${#x}" ${x%%\}}`, []string{"a"}},
		{`[[ UTCP_ARG_a_UTCP_END == "UTCP_ARG_b_UTCP_END" ]]`, `[[ "$V_a" == "${V_b}" ]]`, []string{"a", "b"}},
	}
	for _, c := range cases {
		r := rewrite(c.in, ref)
		got, names := r.text, r.names
		if got != c.want {
			t.Errorf("rewrite(%q)\n got %q\nwant %q", c.in, got, c.want)
		}
		if !slices.Equal(names, c.names) {
			t.Errorf("rewrite(%q) names = %q, want %q", c.in, names, c.names)
		}
	}
}

func TestArithmeticPlaceholdersRefused(t *testing.T) {
	refused := []string{
		`echo $((UTCP_ARG_n_UTCP_END + 1))`,
		`echo "$(( UTCP_ARG_n_UTCP_END ))"`,
		`echo $(( 1 + $(echo UTCP_ARG_n_UTCP_END) ))`,
		`(( UTCP_ARG_n_UTCP_END > 3 )) && echo big`,
		`for ((i=0; i<UTCP_ARG_n_UTCP_END; i++)); do :; done`,
		`echo $[UTCP_ARG_n_UTCP_END]`,
		`let x=UTCP_ARG_n_UTCP_END`,
		`x=1; let "y = UTCP_ARG_n_UTCP_END"`,
		`echo ${a[UTCP_ARG_i_UTCP_END]}`,
		`echo "${a[UTCP_ARG_i_UTCP_END]}"`,
		`[[ UTCP_ARG_n_UTCP_END -eq 1 ]]`,
		`[[ $(echo "UTCP_ARG_n_UTCP_END") -gt 1 ]] && echo yes`,
	}
	for _, cmd := range refused {
		raw, _ := json.Marshal(map[string]any{"call_template_type": "cli", "commands": cmds(cmd)})
		_, err := Info.ParseTemplate(raw)
		if !errors.Is(err, transports.ErrInvalidTemplate) || !strings.Contains(err.Error(), "arithmetic") {
			t.Errorf("%s: err = %v, want invalid_template about arithmetic", cmd, err)
		}
	}
	allowed := []string{
		`[[ UTCP_ARG_a_UTCP_END == x ]] && echo same`,
		`[[ -f UTCP_ARG_p_UTCP_END ]]`,
		`[ UTCP_ARG_n_UTCP_END -eq 1 ]`,
		`echo ${x:-UTCP_ARG_a_UTCP_END} "${x:-UTCP_ARG_a_UTCP_END}"`,
		`echo let UTCP_ARG_a_UTCP_END "let UTCP_ARG_a_UTCP_END"`,
		`echo '$((UTCP_ARG_a_UTCP_END))'`,
		`n=UTCP_ARG_n_UTCP_END; [[ $n =~ ^[0-9]+$ ]] || exit 2; echo $((n + 1))`,
	}
	for _, cmd := range allowed {
		raw, _ := json.Marshal(map[string]any{"call_template_type": "cli", "commands": cmds(cmd)})
		if _, err := Info.ParseTemplate(raw); err != nil {
			t.Errorf("%s: %v", cmd, err)
		}
	}
	// The recommended pattern works and stays safe.
	tr := newTransport(t, "")
	marker := filepath.Join(t.TempDir(), "pwned")
	tmpl := tmplOf(t, map[string]any{"commands": cmds(allowed[len(allowed)-1])})
	res, err := callWith(t, tr, tmpl, map[string]any{"n": json.Number("41")})
	if err != nil || res.Value != "42" {
		t.Errorf("n=41: %v, %v; want 42", res, err)
	}
	_, err = callWith(t, tr, tmpl, map[string]any{"n": "a[$(touch " + marker + ")]"})
	var te *utcp.ToolError
	if !errors.As(err, &te) || te.Status != 2 {
		t.Errorf("hostile n: err = %v, want exit 2", err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("the hostile value ran a command")
	}
}

func TestPlaceholders(t *testing.T) {
	tmpl := tmplOf(t, map[string]any{"commands": cmds(`cp UTCP_ARG_src_UTCP_END "UTCP_ARG_dst_UTCP_END"`, `ls 'UTCP_ARG_src_UTCP_END'`)})
	if got := tmpl.Spec.(*Template).Placeholders(); !slices.Equal(got, []string{"src", "dst"}) {
		t.Errorf("Placeholders = %q", got)
	}
}

// hostileValues try to break out of every quote context.
func hostileValues(marker string) []string {
	touch := "touch " + marker
	return []string{
		"$(" + touch + ")",
		"`" + touch + "`",
		"'; " + touch + "; '",
		`"; ` + touch + `; "`,
		`'"$(` + touch + `)"'`,
		"a\nb; " + touch,
		"; rm -rf " + marker + "-dir; " + touch,
		"${IFS}$(" + touch + ")",
		"\\'; " + touch + " #",
		"$'\\x27'; " + touch,
		"* ? [a-z] ~ {a,b} !! -n -e",
		"  leading and trailing  ",
		"",
		"ünïcödé ✓ \u2028",
	}
}

func TestPlaceholderInjection(t *testing.T) {
	tr := newTransport(t, "")
	marker := filepath.Join(t.TempDir(), "pwned")
	contexts := []struct {
		name, command, prefix, suffix string
	}{
		{"bare", `printf '<%s>' UTCP_ARG_v_UTCP_END`, "<", ">"},
		{"double", `printf '<%s>' "pre UTCP_ARG_v_UTCP_END post"`, "<pre ", " post>"},
		{"single", `printf '<%s>' 'pre UTCP_ARG_v_UTCP_END post'`, "<pre ", " post>"},
		{"ansi", `printf '<%s>' $'pre\tUTCP_ARG_v_UTCP_END'`, "<pre\t", ">"},
		{"subst", `printf '<%s>' "$(printf '%s' UTCP_ARG_v_UTCP_END)"`, "<", ">"},
		{"backtick", "printf '<%s>' \"`printf '%s' UTCP_ARG_v_UTCP_END`\"", "<", ">"},
		{"twice", `printf '<%s|%s>' UTCP_ARG_v_UTCP_END 'UTCP_ARG_v_UTCP_END'`, "", ""},
		{"parameter default", `unset x; printf '<%s>' ${x:-UTCP_ARG_v_UTCP_END}`, "<", ">"},
		{"backslash in double quotes", `printf '<%s>' "\UTCP_ARG_v_UTCP_END"`, "<\\", ">"},
		{"escaped backslash in double quotes", `printf '<%s>' "\\UTCP_ARG_v_UTCP_END"`, "<\\", ">"},
		{"parameter default in double quotes", `unset x; printf '<%s>' "${x:-pre UTCP_ARG_v_UTCP_END}"`, "<pre ", ">"},
		{"string test", `[[ UTCP_ARG_v_UTCP_END == "UTCP_ARG_v_UTCP_END" ]] && printf '<%s>' same`, "", ""},
	}
	for _, c := range contexts {
		t.Run(c.name, func(t *testing.T) {
			tmpl := tmplOf(t, map[string]any{"commands": cmds(c.command)})
			for _, v := range hostileValues(marker) {
				res, err := callWith(t, tr, tmpl, map[string]any{"v": v})
				if err != nil {
					t.Fatalf("value %q: %v", v, err)
				}
				want := c.prefix + v + c.suffix
				switch c.name {
				case "twice":
					want = "<" + v + "|" + v + ">"
				case "string test":
					want = "<same>"
				}
				if (c.name == "subst" || c.name == "backtick") && strings.HasSuffix(v, "\n") {
					want = c.prefix + strings.TrimRight(v, "\n") + c.suffix
				}
				if got := res.Value; got != want {
					t.Errorf("value %q: got %q, want %q", v, got, want)
				}
				if _, err := os.Stat(marker); err == nil {
					t.Fatalf("value %q: the injected command ran (%s exists)", v, marker)
				}
			}
		})
	}
}

// TestScriptNeverContainsValues reads the script bash actually ran
// ($BASH_EXECUTION_STRING) and checks that argument values are not in it.
func TestScriptNeverContainsValues(t *testing.T) {
	tr := newTransport(t, "")
	tmpl := tmplOf(t, map[string]any{"commands": cmds(`: UTCP_ARG_v_UTCP_END "UTCP_ARG_v_UTCP_END" 'UTCP_ARG_v_UTCP_END'; printf '%s' "$BASH_EXECUTION_STRING"`)})
	const secret = "$(echo s3cr3t-value)"
	res, err := callWith(t, tr, tmpl, map[string]any{"v": secret})
	if err != nil {
		t.Fatal(err)
	}
	script := res.Value.(string)
	if strings.Contains(script, "s3cr3t-value") {
		t.Errorf("the script contains the argument value:\n%s", script)
	}
	if !strings.Contains(script, "__UTCP_ARG_") {
		t.Errorf("the script does not refer to the argument variable:\n%s", script)
	}
}

func TestArgumentEncoding(t *testing.T) {
	tr := newTransport(t, "")
	fields := map[string]any{"commands": cmds(`printf '%s|%s|%s|%s|%s|%s' UTCP_ARG_s_UTCP_END UTCP_ARG_n_UTCP_END UTCP_ARG_b_UTCP_END UTCP_ARG_o_UTCP_END UTCP_ARG_z_UTCP_END UTCP_ARG_f_UTCP_END`)}
	got := mustCall(t, tr, fields, map[string]any{
		"s": "text", "n": json.Number("12.50"), "b": true,
		"o": map[string]any{"k": []any{1.0, "<&>"}}, "z": nil, "f": 2.5,
	})
	want := `text|12.50|true|{"k":[1,"<&>"]}|null|2.5`
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestArgumentErrors(t *testing.T) {
	tr := newTransport(t, "")
	tmpl := tmplOf(t, map[string]any{"commands": cmds(`printf '%s' UTCP_ARG_v_UTCP_END`)})
	cases := []struct {
		name string
		args map[string]any
		want string
	}{
		{"missing", map[string]any{"other": "x"}, `missing argument "v"`},
		{"nul byte", map[string]any{"v": "a\x00b"}, "NUL"},
		{"too large for the environment", map[string]any{"v": strings.Repeat("x", 200<<10)}, "stdin_arguments"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := callWith(t, tr, tmpl, c.args)
			if code := utcp.CodeOf(err); code != utcp.CodeInvalidArguments {
				t.Fatalf("err = %v (code %s), want invalid_arguments", err, code)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not mention %q", err, c.want)
			}
		})
	}
}

func TestStdinArguments(t *testing.T) {
	tr := newTransport(t, "")
	big := strings.Repeat("β", 1<<20)
	args := map[string]any{"big": big, "nested": map[string]any{"a": []any{json.Number("1"), nil, true}}}
	got := mustCall(t, tr, map[string]any{"commands": cmds("cat"), "stdin_arguments": true}, args)
	if diff := cmp.Diff(map[string]any{"big": big, "nested": map[string]any{"a": []any{json.Number("1"), nil, true}}}, got); diff != "" {
		t.Errorf("stdin arguments (-want +got):\n%.2000s", diff)
	}
	// Without stdin_arguments, standard input is empty.
	if got := mustCall(t, tr, map[string]any{"commands": cmds("wc -c")}, args); strings.TrimSpace(fmt.Sprint(got)) != "0" {
		t.Errorf("stdin without stdin_arguments: wc -c = %v, want 0", got)
	}
}

func TestEnvironment(t *testing.T) {
	t.Setenv("UTCPD_TEST_SECRET", "s3cret")
	t.Setenv("LC_UTCPD_TEST", "lc")
	envPath, err := exec.LookPath("env")
	if err != nil {
		t.Skip("no env executable")
	}
	tr := newTransport(t, "")
	// bash itself exports these.
	bashOwn := []string{"PWD", "SHLVL", "_", "OLDPWD"}
	envOf := func(t *testing.T, fields map[string]any) map[string]string {
		t.Helper()
		fields["commands"] = cmds(clifixture.ShellQuote(envPath))
		out := fmt.Sprint(mustCall(t, tr, fields, nil))
		m := map[string]string{}
		for line := range strings.SplitSeq(out, "\n") {
			if k, v, ok := strings.Cut(line, "="); ok && !slices.Contains(bashOwn, k) {
				m[k] = v
			}
		}
		return m
	}
	t.Run("null inherits the allowlist", func(t *testing.T) {
		env := envOf(t, map[string]any{})
		if env["PATH"] != os.Getenv("PATH") {
			t.Errorf("PATH = %q, want the daemon's", env["PATH"])
		}
		if env["LC_UTCPD_TEST"] != "lc" {
			t.Errorf("LC_* prefix not inherited: %v", env)
		}
		if _, ok := env["UTCPD_TEST_SECRET"]; ok {
			t.Errorf("a variable outside the allowlist was inherited")
		}
	})
	t.Run("empty list inherits nothing", func(t *testing.T) {
		env := envOf(t, map[string]any{"inherit_env_vars": []string{}, "env_vars": map[string]string{"ONLY": "me"}})
		if diff := cmp.Diff(map[string]string{"ONLY": "me"}, env); diff != "" {
			t.Errorf("environment (-want +got):\n%s", diff)
		}
	})
	t.Run("list inherits exactly those", func(t *testing.T) {
		env := envOf(t, map[string]any{"inherit_env_vars": []string{"UTCPD_TEST_SECRET", "NOT_SET_ANYWHERE"}})
		if diff := cmp.Diff(map[string]string{"UTCPD_TEST_SECRET": "s3cret"}, env); diff != "" {
			t.Errorf("environment (-want +got):\n%s", diff)
		}
	})
	t.Run("env_vars override inherited values", func(t *testing.T) {
		env := envOf(t, map[string]any{"inherit_env_vars": []string{"UTCPD_TEST_SECRET"}, "env_vars": map[string]string{"UTCPD_TEST_SECRET": "override"}})
		if env["UTCPD_TEST_SECRET"] != "override" {
			t.Errorf("UTCPD_TEST_SECRET = %q, want override", env["UTCPD_TEST_SECRET"])
		}
	})
	t.Run("placeholder variables are nonce-named", func(t *testing.T) {
		fields := map[string]any{"inherit_env_vars": []string{}, "commands": cmds(": UTCP_ARG_a_UTCP_END UTCP_ARG_b-c_UTCP_END; " + clifixture.ShellQuote(envPath))}
		out := fmt.Sprint(mustCall(t, tr, fields, map[string]any{"a": "1", "b-c": "2"}))
		var names []string
		for line := range strings.SplitSeq(out, "\n") {
			if k, _, ok := strings.Cut(line, "="); ok && strings.HasPrefix(k, "__UTCP_") {
				names = append(names, k)
			}
		}
		slices.Sort(names)
		if len(names) != 2 || !strings.HasPrefix(names[0], "__UTCP_ARGX_") || !strings.HasPrefix(names[1], "__UTCP_ARG_") || !strings.HasSuffix(names[1], "_a") {
			t.Errorf("argument variables = %q", names)
		}
	})
}

func TestWorkingDir(t *testing.T) {
	tr := newTransport(t, "")
	dir := t.TempDir()
	got := mustCall(t, tr, map[string]any{"commands": cmds("pwd -P"), "working_dir": dir}, nil)
	want, _ := filepath.EvalSymlinks(dir)
	if got != want {
		t.Errorf("pwd = %q, want %q", got, want)
	}
	_, err := callWith(t, tr, tmplOf(t, map[string]any{"commands": cmds("pwd"), "working_dir": filepath.Join(dir, "missing")}), nil)
	var te *utcp.TransportError
	if !errors.As(err, &te) {
		t.Errorf("missing working_dir: err = %v, want *utcp.TransportError", err)
	}
}

func TestSteps(t *testing.T) {
	tr := newTransport(t, "")
	dir := t.TempDir()
	sub := filepath.Join(dir, "sub dir")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	f := false
	tru := true
	step := func(cmd string, appendOut *bool) map[string]any {
		m := map[string]any{"command": cmd}
		if appendOut != nil {
			m["append_to_final_output"] = *appendOut
		}
		return m
	}
	cases := []struct {
		name  string
		steps []any
		args  map[string]any
		want  any
	}{
		{"state and outputs carry over", []any{
			step("cd UTCP_ARG_dir_UTCP_END", &f),
			step("printf 'hello\\n\\n'", nil),
			step(`printf '%s-%s' "$CMD_1_OUTPUT" "$(basename "$PWD")"`, nil),
		}, map[string]any{"dir": sub}, "hello-sub dir"},
		{"only the last step by default", []any{step("echo one", nil), step("echo two", nil)}, nil, "two"},
		{"appended steps in order", []any{step("echo one", &tru), step("echo skipped", nil), step("echo three", nil)}, nil, "one\nthree"},
		{"last step removed", []any{step("echo one", &tru), step("echo two", &f)}, nil, "one"},
		{"json from a captured step", []any{step(`echo '{"a": [1, 2]}'`, &tru), step("true", &f)}, nil, map[string]any{"a": []any{json.Number("1"), json.Number("2")}}},
		{"variables and functions persist", []any{step("X=41; f() { echo $((X+1)); }", nil), step("f", nil)}, nil, "42"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := mustCall(t, tr, map[string]any{"commands": c.steps}, c.args)
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("a failing step stops the script", func(t *testing.T) {
		marker := filepath.Join(dir, "ran")
		_, err := callWith(t, tr, tmplOf(t, map[string]any{"commands": cmds("echo partial; exit 7", "touch "+clifixture.ShellQuote(marker))}), nil)
		var te *utcp.ToolError
		if !errors.As(err, &te) || te.Status != 7 {
			t.Fatalf("err = %v, want ToolError with status 7", err)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Errorf("the step after the failing one ran")
		}
	})
}

func TestOutputSelection(t *testing.T) {
	tr := newTransport(t, "")
	cases := []struct {
		name, cmd string
		want      any
	}{
		{"stdout trimmed", `printf '  hi \n\n'`, "hi"},
		{"stderr when stdout is blank", `printf ' \n'; echo "from stderr" >&2`, "from stderr"},
		{"stdout wins over stderr", `echo out; echo err >&2`, "out"},
		{"json object", `echo '{"a":1,"b":"x"}'`, map[string]any{"a": json.Number("1"), "b": "x"}},
		{"json array", `echo '[1, "two"]'`, []any{json.Number("1"), "two"}},
		{"invalid json stays text", `echo '{not json'`, "{not json"},
		{"json scalar stays text", `echo 42`, "42"},
		{"two json values stay text", `echo '{}'; echo '{}'`, "{}\n{}"},
		{"no output", `true`, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := mustCall(t, tr, map[string]any{"commands": cmds(c.cmd)}, nil)
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNonZeroExit(t *testing.T) {
	tr := newTransport(t, "")
	cmd := `echo '{"partial": true}'; for i in $(seq 1 500); do echo "noise line $i" >&2; done; echo "the real reason" >&2; exit 3`
	_, err := callWith(t, tr, tmplOf(t, map[string]any{"commands": cmds(cmd)}), nil)
	var te *utcp.ToolError
	if !errors.As(err, &te) {
		t.Fatalf("err = %v (%T), want *utcp.ToolError", err, err)
	}
	if te.Status != 3 {
		t.Errorf("Status = %d, want 3", te.Status)
	}
	if !strings.Contains(te.Message, "the real reason") {
		t.Errorf("message does not end with the stderr tail: %q", te.Message)
	}
	if strings.Contains(te.Message, "noise line 1\n") || len(te.Message) > StderrTailBytes+200 {
		t.Errorf("message carries more than the tail (%d bytes)", len(te.Message))
	}
	if diff := cmp.Diff(map[string]any{"partial": true}, te.Value); diff != "" {
		t.Errorf("Value (-want +got):\n%s", diff)
	}
	if utcp.CodeOf(err) != utcp.CodeToolError {
		t.Errorf("CodeOf = %s", utcp.CodeOf(err))
	}

	_, err = callWith(t, tr, tmplOf(t, map[string]any{"commands": cmds(`kill -TERM $$`)}), nil)
	if !errors.As(err, &te) || te.Status != 128+int(syscall.SIGTERM) {
		t.Errorf("killed by SIGTERM: err = %v, want ToolError with status %d", err, 128+int(syscall.SIGTERM))
	}
}

func TestUnknownFixtureToolIsToolError(t *testing.T) {
	tr := newTransport(t, "")
	tmpl := tmplOf(t, map[string]any{
		"commands": cmds(clifixture.ShellQuote(testExecutable(t)) + " call no_such_tool"),
		"env_vars": map[string]string{clifixture.EnvVar: "1"},
	})
	_, err := callWith(t, tr, tmpl, nil)
	var te *utcp.ToolError
	if !errors.As(err, &te) || te.Status != clifixture.ExitUnknownTool {
		t.Fatalf("err = %v, want ToolError with status %d", err, clifixture.ExitUnknownTool)
	}
	if errors.Is(err, &utcp.Error{Code: utcp.CodeToolNotFound}) {
		t.Errorf("an exit status was mapped to tool_not_found")
	}
}

func testExecutable(t testing.TB) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// alive reports whether pid is a live (not zombie) process.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

func waitDead(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Errorf("process %d still runs", pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func readPID(t *testing.T, file string) int {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("pid file: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("pid file: %v", err)
	}
	return pid
}

func TestProcessGroupKilled(t *testing.T) {
	tr := newTransport(t, "")
	t.Run("a descendant that escaped the group does not block the call", func(t *testing.T) {
		if _, err := exec.LookPath("setsid"); err != nil {
			t.Skip("no setsid")
		}
		start := time.Now()
		got := mustCall(t, tr, map[string]any{"commands": cmds("setsid sleep 30 & sleep 0.2; echo $!")}, nil)
		pid, err := strconv.Atoi(fmt.Sprint(got))
		if err != nil {
			t.Fatalf("output %q: %v", got, err)
		}
		if !alive(pid) {
			t.Errorf("the setsid descendant %d did not survive: the test did not exercise an escape", pid)
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("the call waited %v for the escaped descendant", took)
		}
	})
	t.Run("background child after a normal exit", func(t *testing.T) {
		start := time.Now()
		got := mustCall(t, tr, map[string]any{"commands": cmds("sleep 100 & echo $!")}, nil)
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("the call waited %v for the background child", took)
		}
		pid, err := strconv.Atoi(fmt.Sprint(got))
		if err != nil {
			t.Fatalf("output %q: %v", got, err)
		}
		waitDead(t, pid)
	})
	t.Run("cancel kills the whole group", func(t *testing.T) {
		pidFile := filepath.Join(t.TempDir(), "pid")
		tmpl := tmplOf(t, map[string]any{"commands": cmds("(sleep 100; echo late) & echo $! > " + clifixture.ShellQuote(pidFile) + "; sleep 100")})
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := tr.CallTool(ctx, &utcp.Call{Tool: "test.tool", Template: tmpl})
		if took := time.Since(start); took > 1300*time.Millisecond {
			t.Errorf("cancelled call returned after %v", took)
		}
		if code := utcp.CodeOf(err); code != utcp.CodeTimeout {
			t.Errorf("err = %v (code %s), want timeout", err, code)
		}
		waitDead(t, readPID(t, pidFile))
	})
	t.Run("template timeout", func(t *testing.T) {
		tmpl := tmplOf(t, map[string]any{"commands": cmds("sleep 10"), "timeout": 150})
		start := time.Now()
		_, err := callWith(t, tr, tmpl, nil)
		if took := time.Since(start); took > time.Second {
			t.Errorf("timed-out call returned after %v", took)
		}
		if code := utcp.CodeOf(err); code != utcp.CodeTimeout || !strings.Contains(err.Error(), "timed out after 150ms") {
			t.Errorf("err = %v (code %s), want the template's timeout", err, code)
		}
	})
	t.Run("caller cancellation", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(100*time.Millisecond, cancel)
		_, err := tr.CallTool(ctx, &utcp.Call{Tool: "test.tool", Template: tmplOf(t, map[string]any{"commands": cmds("sleep 10")})})
		if code := utcp.CodeOf(err); code != utcp.CodeCanceled || !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v (code %s), want canceled", err, code)
		}
	})
}

// allocDuring returns how many bytes the Go heap allocated while fn ran.
func allocDuring(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func TestOutputCap(t *testing.T) {
	const gib = 1 << 30
	// The bounds are far below what the output would take unbounded (1 GiB
	// or endless) but leave room for the allocations of the rest of the
	// process (TotalAlloc is process-wide) on a busy machine.
	cases := []struct {
		name   string
		config string
		steps  []any
		stream bool
		bound  uint64
	}{
		{"1 GiB on stdout, default cap", "", cmds(fmt.Sprintf("head -c %d /dev/zero", gib)), false, 256 << 20},
		{"endless yes, small cap", `{"max_output_bytes": 1048576}`, cmds("yes"), false, 64 << 20},
		{"1 GiB in a captured step", `{"max_output_bytes": 1048576}`, cmds(fmt.Sprintf("head -c %d /dev/zero", gib), "echo never"), false, 64 << 20},
		{"1 GiB on stderr is dropped, not kept", `{"max_output_bytes": 1048576}`, cmds(fmt.Sprintf("head -c %d /dev/zero >&2; echo fine", 64<<20)), false, 64 << 20},
		{"one endless streamed line", `{"max_output_bytes": 1048576}`, cmds("yes | tr -d '\\n'"), true, 64 << 20},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr := newTransport(t, c.config)
			tmpl := tmplOf(t, map[string]any{"commands": c.steps})
			var err error
			var res *utcp.Result
			start := time.Now()
			alloc := allocDuring(func() {
				if c.stream {
					st, serr := tr.CallToolStream(t.Context(), &utcp.Call{Tool: "test.tool", Template: tmpl})
					if serr != nil {
						t.Fatal(serr)
					}
					for err == nil {
						_, err = st.Recv()
					}
					st.Close()
					return
				}
				res, err = callWith(t, tr, tmpl, nil)
			})
			took := time.Since(start)
			if strings.Contains(c.name, "stderr") {
				if err != nil || res.Value != "fine" {
					t.Fatalf("result = %v, %v; want fine", res, err)
				}
			} else {
				if code := utcp.CodeOf(err); code != utcp.CodePayloadTooLarge || !errors.Is(err, transports.ErrTooLarge) {
					t.Fatalf("err = %v (code %s), want payload_too_large", err, code)
				}
			}
			if alloc > c.bound {
				t.Errorf("allocated %d MiB, want at most %d MiB", alloc>>20, c.bound>>20)
			}
			t.Logf("took %v, allocated %d KiB", took, alloc>>10)
		})
	}
}

func TestStream(t *testing.T) {
	tr := newTransport(t, "")
	recvAll := func(t *testing.T, st transports.Stream) ([]any, error) {
		t.Helper()
		var got []any
		for {
			ev, err := st.Recv()
			if err != nil {
				return got, err
			}
			got = append(got, ev.Data)
		}
	}
	t.Run("lines as they come", func(t *testing.T) {
		tmpl := tmplOf(t, map[string]any{"commands": cmds(`echo '{"i":1}'; sleep 2; echo 2; echo; echo "  plain text"`)})
		st, err := tr.CallToolStream(t.Context(), &utcp.Call{Tool: "test.tool", Template: tmpl})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		start := time.Now()
		ev, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took > time.Second {
			t.Errorf("the first line arrived after %v: not streamed", took)
		}
		rest, err := recvAll(t, st)
		if !errors.Is(err, io.EOF) {
			t.Fatalf("end of stream: %v", err)
		}
		want := []any{map[string]any{"i": json.Number("1")}, json.Number("2"), "  plain text"}
		if diff := cmp.Diff(want, append([]any{ev.Data}, rest...)); diff != "" {
			t.Errorf("events (-want +got):\n%s", diff)
		}
	})
	t.Run("non-zero exit ends with a tool error", func(t *testing.T) {
		tmpl := tmplOf(t, map[string]any{"commands": cmds(`echo one; echo bad >&2; exit 4`)})
		st, err := tr.CallToolStream(t.Context(), &utcp.Call{Tool: "test.tool", Template: tmpl})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		got, err := recvAll(t, st)
		var te *utcp.ToolError
		if !errors.As(err, &te) || te.Status != 4 || !strings.Contains(te.Message, "bad") {
			t.Errorf("end = %v, want ToolError status 4 with stderr", err)
		}
		if diff := cmp.Diff([]any{"one"}, got); diff != "" {
			t.Errorf("events (-want +got):\n%s", diff)
		}
	})
	t.Run("a slow reader gets every line", func(t *testing.T) {
		tmpl := tmplOf(t, map[string]any{"commands": cmds(`seq 1 200`)})
		st, err := tr.CallToolStream(t.Context(), &utcp.Call{Tool: "test.tool", Template: tmpl})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		time.Sleep(3 * pipeGrace) // the process is long gone
		got, err := recvAll(t, st)
		if !errors.Is(err, io.EOF) || len(got) != 200 {
			t.Errorf("got %d events, end %v; want 200 and EOF", len(got), err)
		}
	})
	t.Run("close kills a silent process", func(t *testing.T) {
		pidFile := filepath.Join(t.TempDir(), "pid")
		tmpl := tmplOf(t, map[string]any{"commands": cmds("sleep 100 & echo $! > " + clifixture.ShellQuote(pidFile) + "; echo started; wait")})
		st, err := tr.CallToolStream(t.Context(), &utcp.Call{Tool: "test.tool", Template: tmpl})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Recv(); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		st.Close()
		if took := time.Since(start); took > time.Second {
			t.Errorf("Close took %v", took)
		}
		if _, err := st.Recv(); err == nil || errors.Is(err, io.EOF) {
			t.Errorf("Recv after Close = %v, want an error", err)
		}
		waitDead(t, readPID(t, pidFile))
	})
}

func TestCloseKillsRunningCalls(t *testing.T) {
	tr := newTransport(t, "")
	tmpl := tmplOf(t, map[string]any{"commands": cmds("sleep 100")})
	errc := make(chan error, 1)
	go func() {
		_, err := callWith(t, tr, tmpl, nil)
		errc <- err
	}()
	// A stream nobody reads, its event buffer full.
	st, err := tr.CallToolStream(t.Context(), &utcp.Call{Tool: "test.tool", Template: tmplOf(t, map[string]any{"commands": cmds("while :; do echo x; sleep 0.001; done")})})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("Close took %v", took)
	}
	if err := <-errc; utcp.CodeOf(err) != utcp.CodeUnavailable {
		t.Errorf("running call: err = %v, want unavailable", err)
	}
	for err == nil {
		_, err = st.Recv()
	}
	if utcp.CodeOf(err) != utcp.CodeUnavailable {
		t.Errorf("unread stream: ended with %v, want unavailable", err)
	}
	st.Close()
	if err := tr.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := callWith(t, tr, tmpl, nil); utcp.CodeOf(err) != utcp.CodeUnavailable {
		t.Errorf("call after Close: err = %v, want unavailable", err)
	}
}

func TestDiscovery(t *testing.T) {
	tr := newTransport(t, "")
	v11 := `{"utcp_version":"1.1.0","manual_version":"2.0.0","tools":[
		{"name":"a","description":"tool a","inputs":{"type":"object"},"tool_call_template":{"call_template_type":"cli","commands":[{"command":"echo a"}]}},
		{"name":"b","description":"tool b"}]}`
	legacy := `{"version":"0.1.0","tools":[{"name":"a","description":"tool a","tool_provider":{"provider_type":"cli","command_name":"echo a"}}]}`
	toolA := `{"name":"a","description":"tool a","tool_call_template":{"call_template_type":"cli","commands":[{"command":"echo a"}]}}`
	toolB := `{"name":"b","description":"tool b"}`
	cases := []struct {
		name      string
		doc       string
		want      []string // tool names; nil means an error is expected
		wantErr   string
		templates map[string]bool // tool name -> has a tool_call_template
	}{
		{name: "v1.1 manual", doc: v11, want: []string{"a", "b"}, templates: map[string]bool{"a": true, "b": false}},
		{name: "v1.1 manual in YAML-free pretty JSON", doc: "\n\n" + v11 + "\n", want: []string{"a", "b"}},
		{name: "legacy manual", doc: legacy, want: []string{"a"}, templates: map[string]bool{"a": true}},
		{name: "list of tools", doc: "[" + toolA + "," + toolB + "]", want: []string{"a", "b"}, templates: map[string]bool{"a": true, "b": false}},
		{name: "single tool", doc: toolA, want: []string{"a"}},
		{name: "ndjson tools", doc: "starting up...\n" + toolA + "\nnot json {\n" + toolB + "\n", want: []string{"a", "b"}},
		{name: "ndjson manual line", doc: "log line\n" + strings.ReplaceAll(v11, "\n", "") + "\n", want: []string{"a", "b"}},
		{name: "garbage", doc: "hello world", wantErr: "not a UTCP manual"},
		{name: "empty", doc: "", wantErr: "printed nothing"},
		{name: "json without tools", doc: `{"hello": "world"}`, wantErr: "neither a UTCP manual"},
		{name: "json scalar", doc: `"just a string"`, wantErr: "not a UTCP manual"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tmpl := tmplOf(t, map[string]any{
				"name":     "disc",
				"commands": cmds(`printf '%s' "$DOC"`),
				"env_vars": map[string]string{"DOC": c.doc},
			})
			m, err := tr.RegisterManual(t.Context(), tmpl)
			if c.want == nil {
				if utcp.CodeOf(err) != utcp.CodeDiscoveryFailed || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err = %v, want discovery_failed mentioning %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("RegisterManual: %v", err)
			}
			var names []string
			for _, tool := range m.Tools {
				names = append(names, tool.Name)
				if want, ok := c.templates[tool.Name]; ok && want != (tool.ToolCallTemplate != nil) {
					t.Errorf("tool %s: has template = %v, want %v", tool.Name, tool.ToolCallTemplate != nil, want)
				}
			}
			if !slices.Equal(names, c.want) {
				t.Errorf("tools = %q, want %q", names, c.want)
			}
		})
	}
	t.Run("non-zero exit", func(t *testing.T) {
		tmpl := tmplOf(t, map[string]any{"commands": cmds(`echo "cannot list tools" >&2; exit 5`)})
		_, err := tr.RegisterManual(t.Context(), tmpl)
		if utcp.CodeOf(err) != utcp.CodeDiscoveryFailed || !strings.Contains(err.Error(), "cannot list tools") || !strings.Contains(err.Error(), "status 5") {
			t.Errorf("err = %v, want discovery_failed with the status and stderr", err)
		}
	})
	t.Run("placeholder in discovery", func(t *testing.T) {
		tmpl := tmplOf(t, map[string]any{"commands": cmds(`echo UTCP_ARG_x_UTCP_END`)})
		_, err := tr.RegisterManual(t.Context(), tmpl)
		if utcp.CodeOf(err) != utcp.CodeDiscoveryFailed || !strings.Contains(err.Error(), `"x"`) {
			t.Errorf("err = %v, want discovery_failed naming the argument", err)
		}
	})
	t.Run("stdin_arguments gets {}", func(t *testing.T) {
		tmpl := tmplOf(t, map[string]any{"stdin_arguments": true, "commands": cmds(`read -r args; printf '[{"name":"t","description":"%s"}]' "$args"`)})
		m, err := tr.RegisterManual(t.Context(), tmpl)
		if err != nil {
			t.Fatal(err)
		}
		if m.Tools[0].Description != "{}" {
			t.Errorf("stdin during discovery = %q, want {}", m.Tools[0].Description)
		}
	})
	t.Run("fixture program", func(t *testing.T) {
		raw := clifixture.ManualTemplate(testExecutable(t), map[string]string{clifixture.EnvVar: "1"})
		tmpl, err := Info.ParseTemplate(raw)
		if err != nil {
			t.Fatal(err)
		}
		m, err := tr.RegisterManual(t.Context(), &tmpl)
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Tools) != 5 {
			t.Fatalf("fixture manual has %d tools", len(m.Tools))
		}
		for _, tool := range m.Tools {
			if tool.ToolCallTemplate == nil || tool.ToolCallTemplate.Type != "cli" {
				t.Errorf("tool %s: template %v", tool.Name, tool.ToolCallTemplate)
			}
		}
	})
}

func TestReleaseIsNoop(t *testing.T) {
	tr := newTransport(t, "")
	tmpl := tmplOf(t, map[string]any{"commands": cmds("echo hi")})
	if err := tr.Release(t.Context(), tmpl); err != nil {
		t.Fatal(err)
	}
	if got := mustCall(t, tr, map[string]any{"commands": cmds("echo hi")}, nil); got != "hi" {
		t.Errorf("call after Release = %v", got)
	}
}

func TestConfig(t *testing.T) {
	if _, err := New(transports.Options{Config: json.RawMessage(`{"max_output_bytes": -1}`)}); utcp.CodeOf(err) != utcp.CodeInvalidConfig {
		t.Errorf("negative cap: err = %v", err)
	}
	tr, err := New(transports.Options{Config: json.RawMessage(`{"bash": "/nonexistent/bash"}`)})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	_, err = callWith(t, tr, tmplOf(t, map[string]any{"commands": cmds("true")}), nil)
	var te *utcp.TransportError
	if !errors.As(err, &te) {
		t.Errorf("missing bash: err = %v, want TransportError", err)
	}
}
