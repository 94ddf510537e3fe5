package holguard

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

func TestRenderCommand(t *testing.T) {
	args := map[string]any{
		"p":     `a b'c`,
		"q":     `x"$(id)` + "`id`" + `\`,
		"n":     3.0,
		"num":   json.Number("12"),
		"b":     true,
		"o":     map[string]any{"k": "<v>"},
		"empty": "",
		"a.b-c": "dotted",
	}
	tests := []struct {
		name, cmd, want string
	}{
		{"plain", "ls -la", "ls -la"},
		{"bare", "ls UTCP_ARG_p_UTCP_END", `ls 'a b'\''c'`},
		{"bare empty", "echo UTCP_ARG_empty_UTCP_END|x", `echo ''|x`},
		{"double", `echo "v=UTCP_ARG_q_UTCP_END!"`, `echo "v=x\"\$(id)\` + "`id\\`" + `\\!"`},
		{"single", `echo 'v=UTCP_ARG_p_UTCP_END'`, `echo 'v=a b'\''c'`},
		{"ansi", `echo $'v=UTCP_ARG_p_UTCP_END\n'`, `echo $'v=a b\'c\n'`},
		{"subst", `echo $(cat UTCP_ARG_p_UTCP_END)`, `echo $(cat 'a b'\''c')`},
		{"subst nested parens", `echo $(f (x) UTCP_ARG_n_UTCP_END) UTCP_ARG_n_UTCP_END`, `echo $(f (x) '3') '3'`},
		{"subst in double", `echo "$(cat UTCP_ARG_p_UTCP_END)"`, `echo "$(cat 'a b'\''c')"`},
		{"backtick", "echo `cat UTCP_ARG_p_UTCP_END`", "echo `cat 'a b'\\\\''c'`"},
		{"backtick double", "echo \"`cat \"UTCP_ARG_q_UTCP_END\"`\"", "echo \"`cat \"x\\\\\"\\\\$(id)\\\\\\`id\\\\\\`\\\\\\\\\"`\""},
		{"param", `echo ${X:-UTCP_ARG_p_UTCP_END}`, `echo ${X:-'a b'\''c'}`},
		{"param in double", `echo "${X:-UTCP_ARG_p_UTCP_END}"`, `echo "${X:-"a b'c"}"`},
		{"process subst", `diff <(cat UTCP_ARG_p_UTCP_END) x`, `diff <(cat 'a b'\''c') x`},
		{"json values", `f UTCP_ARG_n_UTCP_END UTCP_ARG_num_UTCP_END UTCP_ARG_b_UTCP_END UTCP_ARG_o_UTCP_END`,
			`f '3' '12' 'true' '{"k":"<v>"}'`},
		{"dotted name", `echo UTCP_ARG_a.b-c_UTCP_END`, `echo 'dotted'`},
		{"escaped", `echo \UTCP_ARG_missing_UTCP_END`, `echo \UTCP_ARG_missing_UTCP_END`},
		{"comment", "ls # UTCP_ARG_missing_UTCP_END\nls UTCP_ARG_p_UTCP_END", "ls # UTCP_ARG_missing_UTCP_END\nls 'a b'\\''c'"},
		{"hash in word", `echo a#UTCP_ARG_n_UTCP_END`, `echo a#'3'`},
		{"previous output", `echo $CMD_0_OUTPUT UTCP_ARG_n_UTCP_END`, `echo $CMD_0_OUTPUT '3'`},
		{"not a placeholder", `echo UTCP_ARG__UTCP_END UTCP_ARG_x`, `echo UTCP_ARG__UTCP_END UTCP_ARG_x`},
		{"dollar single in double", `echo "$'UTCP_ARG_p_UTCP_END'"`, `echo "$'a b'c'"`},
		// As for the cli transport, $UTCP_ARG_… is a variable, not a placeholder.
		{"variable named like a placeholder", `echo $UTCP_ARG_missing_UTCP_END "$UTCP_ARG_missing_UTCP_END"`, `echo $UTCP_ARG_missing_UTCP_END "$UTCP_ARG_missing_UTCP_END"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := renderCommand(tc.cmd, args)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("renderCommand(%q)\n got %s\nwant %s", tc.cmd, got, tc.want)
			}
		})
	}
	if _, err := renderCommand("ls UTCP_ARG_nope_UTCP_END", args); err == nil || !strings.Contains(err.Error(), `missing argument "nope"`) {
		t.Errorf("missing argument: %v", err)
	}
	if _, err := renderCommand("ls UTCP_ARG_c_UTCP_END", map[string]any{"c": make(chan int)}); err == nil {
		t.Error("an argument with no JSON form rendered")
	}
}

func TestRenderCLI(t *testing.T) {
	args := map[string]any{"dir": "/tmp/x y", "pat": "*.go"}
	tests := []struct {
		name, tmpl, want, err string
	}{
		{"steps", `{"call_template_type":"cli","commands":[{"command":"cd UTCP_ARG_dir_UTCP_END"},{"command":"grep -r UTCP_ARG_pat_UTCP_END .","append_to_final_output":true}]}`,
			"cd '/tmp/x y'\ngrep -r '*.go' .", ""},
		{"legacy", `{"call_template_type":"cli","command_name":"ls UTCP_ARG_dir_UTCP_END"}`, `ls '/tmp/x y'`, ""},
		{"none", `{"call_template_type":"cli","commands":[]}`, "", "no commands"},
		{"empty", ``, "", "not available"},
		{"bad", `{"commands":"ls"}`, "", "does not parse"},
		{"missing", `{"commands":[{"command":"ls UTCP_ARG_x_UTCP_END"}]}`, "", `missing argument "x"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := renderCLI(json.RawMessage(tc.tmpl), args)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// quotingContexts wrap a placeholder in each quoting context; bash must
// print exactly the value for each.
var quotingContexts = []string{
	`printf %s UTCP_ARG_v_UTCP_END`,
	`printf %s "UTCP_ARG_v_UTCP_END"`,
	`printf %s "<UTCP_ARG_v_UTCP_END>"`,
	`printf %s '<UTCP_ARG_v_UTCP_END>'`,
	`printf %s $'<UTCP_ARG_v_UTCP_END>'`,
	`printf %s "$(printf %s UTCP_ARG_v_UTCP_END)"`,
	`printf %s "$(printf %s "<UTCP_ARG_v_UTCP_END>")"`,
	"printf %s \"`printf %s UTCP_ARG_v_UTCP_END`\"",
	`printf %s "${UNSET_VAR_X:-UTCP_ARG_v_UTCP_END}"`,
	`printf %s ${UNSET_VAR_X:-"<UTCP_ARG_v_UTCP_END>"}`,
	"printf %s \"`printf %s \"<UTCP_ARG_v_UTCP_END>\"`\"",
	"printf %s \"`printf %s '<UTCP_ARG_v_UTCP_END>'`\"",
	`printf %s <(:) >/dev/null; printf %s UTCP_ARG_v_UTCP_END`,
}

var hostileValues = []string{
	"", "plain", "a b", "it's", `"q"`, `$HOME`, `$(echo pwned)`, "`echo pwned`", `\`, `\\n`, `a\'b`,
	`'; echo pwned; '`, `"; echo pwned; "`, "!x", "*", "~", "}", ")", "${HOME}", "tab\there", "line\nbreak",
	"ünïcödé 🚀", `\"`, `$'x'`, "--json", "-h", `%s`,
}

// TestRenderQuotingWithBash checks the quoting by asking bash to read
// the rendered text back: for every context and hostile value, bash must
// print exactly the value, so HOL Guard sees what the cli transport would
// pass and nothing a value could smuggle in. (Only the test runs bash;
// the guard never runs what it renders.)
func TestRenderQuotingWithBash(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash is not installed")
	}
	for _, ctx := range quotingContexts {
		for _, v := range hostileValues {
			checkWithBash(t, bash, ctx, v)
		}
	}
}

func checkWithBash(t *testing.T, bash, ctx, v string) {
	t.Helper()
	rendered, err := renderCommand(ctx, map[string]any{"v": v})
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(t.Context(), bash, "--noprofile", "--norc", "-c", rendered).Output()
	if err != nil {
		t.Errorf("context %q, value %q: bash failed on %q: %v", ctx, v, rendered, err)
		return
	}
	want := v
	if strings.Contains(ctx, "<UTCP") {
		want = "<" + v + ">"
	}
	if strings.Contains(ctx, "$(") || strings.Contains(ctx, "`") {
		want = strings.TrimRight(want, "\n") // command substitution drops trailing newlines
	}
	if string(out) != want {
		t.Errorf("context %q, value %q: rendered %q, bash printed %q", ctx, v, rendered, out)
	}
}

func FuzzRenderQuoting(f *testing.F) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		f.Skip("bash is not installed")
	}
	for _, v := range hostileValues {
		f.Add(v, uint8(0))
	}
	f.Fuzz(func(t *testing.T, v string, which uint8) {
		if strings.ContainsRune(v, 0) || !utf8Valid(v) {
			t.Skip("bash arguments carry neither NUL nor invalid UTF-8 reliably")
		}
		checkWithBash(t, bash, quotingContexts[int(which)%len(quotingContexts)], v)
	})
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }

func TestParseMapping(t *testing.T) {
	m, err := parseMapping("x.*", "{cmd} --flag {{literal}} {a.b}")
	if err != nil {
		t.Fatal(err)
	}
	got, err := m.render(map[string]any{"cmd": "ls", "a.b": []any{"x y", 1.0, true, nil}})
	if err != nil {
		t.Fatal(err)
	}
	if want := `ls --flag {literal} 'x y' 1 true null`; got != want {
		t.Errorf("render = %q, want %q", got, want)
	}
	m, _ = parseMapping("x.*", "command")
	if got, err := m.render(map[string]any{"command": map[string]any{"a": "b"}}); err != nil || got != `{"a":"b"}` {
		t.Errorf("object argument: %q, %v", got, err)
	}
	if _, err := m.render(map[string]any{"command": nil}); err == nil {
		t.Error("a null command rendered")
	}
}
