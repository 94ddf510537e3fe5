package cli

import (
	"bytes"
	"context"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// FuzzTemplateCommand feeds command lines to the template parser. It must
// never panic, and whenever it accepts a command every placeholder use it
// accepted must be classified as data. For accepted commands with
// placeholders it also runs the compiled script in a restricted bash
// (bash -r: no output redirection, no cd, no exec, no commands with a
// slash, an empty PATH, dangerous builtins disabled, a scratch directory,
// a 2 s limit and its process group killed) with every argument set to
// a[$(: MARK)], under set -x: a trace line "++ : MARK" would mean bash
// ran the command hidden in a value, i.e. the parser accepted an
// evaluating context.
func FuzzTemplateCommand(f *testing.F) {
	for _, c := range refusedContexts {
		f.Add(c.cmd)
	}
	for _, c := range acceptedContexts {
		f.Add(c)
	}
	for _, s := range []string{
		`echo "${x:-'UTCP_ARG_a_UTCP_END'}" ${x%%\}}`,
		"echo \"`cat \"UTCP_ARG_q_UTCP_END\"`\"",
		`case $x in (a|b) echo UTCP_ARG_v_UTCP_END ;; esac`,
		`x=1 y=UTCP_ARG_v_UTCP_END env | grep y`,
		`f() ( echo UTCP_ARG_v_UTCP_END ); f`,
		`echo $(( $(echo 1) )) UTCP_ARG_v_UTCP_END`,
		`[[ ( UTCP_ARG_v_UTCP_END == a ) || -z x ]]`,
		`coproc cat; echo UTCP_ARG_v_UTCP_END >&"${COPROC[1]}"`,
		`echo "$xUTCP_ARG_v_UTCP_END" ${#x} ${!x*}`,
	} {
		f.Add(s)
	}
	bash, _ := exec.LookPath("bash")
	f.Fuzz(func(t *testing.T, cmd string) {
		if strings.ContainsRune(cmd, 0) || strings.TrimSpace(cmd) == "" {
			return
		}
		r := rewrite(cmd, func(n string) string { return "V_" + n })
		if len(r.uses) != len(r.names) {
			t.Fatalf("%q: %d uses for %d names", cmd, len(r.uses), len(r.names))
		}
		tmpl := &Template{Commands: []Command{{Command: cmd}}}
		if err := tmpl.Validate(); err != nil {
			return
		}
		for _, u := range r.uses {
			if !u.allowed() {
				t.Fatalf("%q accepted with placeholder %s in %s", cmd, u.name, u.describe())
			}
			if u.kind == useArg && u.cmd == "" {
				t.Fatalf("%q accepted with placeholder %s as an argument of no command", cmd, u.name)
			}
		}
		if bash == "" || len(r.uses) == 0 {
			return
		}
		if ran := runRestricted(t, bash, tmpl); ran != "" {
			t.Fatalf("%q accepted, yet bash ran the command in a value:\n%s", cmd, ran)
		}
	})
}

// runRestricted runs tmpl's script in a restricted bash with hostile
// values and returns the trace lines showing that the command hidden in
// a value ran, "" if none.
func runRestricted(t *testing.T, bash string, tmpl *Template) string {
	mark := "UTCPFUZZ" + newNonce()
	sc := compile(tmpl, "f")
	if sc.captures {
		return ""
	}
	env := []string{"PATH=/nonexistent-utcpd-fuzz", "HOME=/nonexistent-utcpd-fuzz"}
	for _, name := range sc.args.order {
		env = append(env, sc.args.vars[name]+"=a[$(: "+mark+")]")
	}
	script := "enable -n kill fc history ulimit exec trap suspend enable\nset -x\n" + sc.text
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bash, "--noprofile", "--norc", "-r", "-c", script, "fuzz")
	cmd.Env = env
	cmd.Dir = t.TempDir()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	var trace limitedBuffer
	cmd.Stdout, cmd.Stderr = &trace, &trace
	_ = cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	re := regexp.MustCompile(`(?m)^\++ : ` + mark + `$`)
	if loc := re.FindIndex(trace.b.Bytes()); loc != nil {
		return trace.b.String()
	}
	return ""
}

// limitedBuffer keeps the first 1 MiB written to it.
type limitedBuffer struct{ b bytes.Buffer }

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := 1<<20 - l.b.Len(); room > 0 {
		l.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// TestRestrictedOracleSeesInjection shows that the fuzz oracle detects a
// value that bash evaluates, so its silence means something.
func TestRestrictedOracleSeesInjection(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatal("bash is required")
	}
	for _, c := range []string{`declare -i n=` + ph, `s=abc; echo ${s:` + ph + `}`, `printf -v ` + ph + ` x`, `[[ ` + ph + ` -eq 1 ]]`} {
		if ran := runRestricted(t, bash, &Template{Commands: []Command{{Command: c}}}); ran == "" {
			t.Errorf("%q: the oracle did not see the injection", c)
		}
	}
	if ran := runRestricted(t, bash, &Template{Commands: []Command{{Command: `echo ` + ph}}}); ran != "" {
		t.Errorf("echo: the oracle reports an injection:\n%s", ran)
	}
}
