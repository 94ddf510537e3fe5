package docs

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/utcpd/utcpd/transports/transporttest"
)

const (
	// defaultListenPort is utcpd serve's default port (and the client
	// commands' default daemon).
	defaultListenPort = 8787
	// blockTimeout is how long a block may run without a timeout
	// directive.
	blockTimeout = 60 * time.Second
	// lingerLimit is how long the script may take to stop the commands
	// it left in the background, after a block ended.
	lingerLimit = 30 * time.Second
	// outputShown is how much of a failed block's output a failure shows.
	outputShown = 6000
)

// loopbackAddr is a loopback address with a fixed port, as the docs write
// them.
var loopbackAddr = regexp.MustCompile(`\b(127\.0\.0\.1|localhost):([0-9]{2,5})\b`)

// prelude is the start of every session's script: the status channel
// (fd 9), the error trap, and the helpers the rewritten commands call.
const prelude = `set -eE -o pipefail
exec 9>>"$DOCS_TEST_STATUS"
__dt_block=0
__dt_rc=0
__dt_pid=$BASHPID
# The failing command that makes the script exit (errexit on, in the
# script's own process, functions included) is reported on fd 9.
# In a function, the line reported is the script line that called it.
trap '__dt_err=$? __dt_line=$LINENO
if (( ${#FUNCNAME[@]} > 1 )); then __dt_line=${BASH_LINENO[${#FUNCNAME[@]}-2]}; fi
if [[ $- == *e* && $BASHPID == "$__dt_pid" ]]; then printf "fail %s %s %s\n" "$__dt_block" "$__dt_err" "$__dt_line" >&9; fi' ERR
# At the end (or the first failure) the commands left in the background
# are stopped and waited for, so none outlives the session.
trap '__dt_jobs=$(jobs -p); if [[ -n $__dt_jobs ]]; then kill -TERM $__dt_jobs 2>/dev/null || true; wait || true; fi' EXIT

# curl fails on an HTTP error status, so a doc's request that is refused
# fails its block.
curl() { command curl --fail-with-body "$@"; }

# __dt_wait_port PID HOST PORT: until HOST:PORT accepts a connection,
# failing when PID exits first or after 30 s.
__dt_wait_port() {
  local pid=$1 host=$2 port=$3 i
  for ((i = 0; i < 600; i++)); do
    if (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null; then return 0; fi
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "docs-test: the command exited before $host:$port accepted connections" >&2
      return 1
    fi
    sleep 0.05
  done
  echo "docs-test: nothing listened on $host:$port within 30 s" >&2
  return 1
}

# __dt_ready HOST:PORT: whether GET /readyz answers 200.
__dt_ready() {
  local line
  (
    exec 3<>"/dev/tcp/${1%:*}/${1##*:}" || exit 1
    printf 'GET /readyz HTTP/1.0\r\nHost: %s\r\n\r\n' "$1" >&3
    IFS= read -r -t 5 line <&3 || exit 1
    [[ $line == *" 200 "* ]]
  ) 2>/dev/null
}

# __dt_wait_ready PID HOST:PORT: until utcpd's /readyz at HOST:PORT
# answers 200, failing when PID exits first or after 30 s.
__dt_wait_ready() {
  local pid=$1 addr=$2 i
  for ((i = 0; i < 600; i++)); do
    if __dt_ready "$addr"; then return 0; fi
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "docs-test: utcpd serve exited before http://$addr/readyz answered 200" >&2
      return 1
    fi
    sleep 0.05
  done
  echo "docs-test: http://$addr/readyz did not answer 200 within 30 s" >&2
  return 1
}

# __dt_fg HOST:PORT KIND COMMAND...: a long-running command shown in the
# foreground: start it, wait until it is ready (KIND serve: /readyz;
# port: the port), stop it with SIGTERM; it must exit 0 (a demo server
# may also die of the signal).
__dt_fg() {
  local addr=$1 kind=$2 pid rc=0
  shift 2
  env "$@" &
  pid=$!
  if [[ $kind == serve ]]; then
    __dt_wait_ready "$pid" "$addr" || { kill -KILL "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; return 1; }
  else
    __dt_wait_port "$pid" "${addr%:*}" "${addr##*:}" || { kill -KILL "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; return 1; }
  fi
  kill -TERM "$pid"
  wait "$pid" || rc=$?
  echo "docs-test: ready, stopped with SIGTERM: exit status $rc" >&2
  [[ $rc == 0 || ($kind == port && $rc == 143) ]]
}
`

// session is one markdown file's run.
type session struct {
	t      *testing.T
	root   string
	bins   string         // the built binaries
	work   string         // the sandbox working directory
	home   string         // its HOME
	out    string         // the blocks' output files
	ports  map[int]int    // doc port -> free port
	npm    bool           // UTCPD_NPM_PEERS=1
	peer   string         // the docs' npm peer folder
	notRun map[int]string // block index -> commands not run, and why
	runs   map[int]bool   // block index -> a command of it runs
	lines  []lineRef      // script line (0-based) -> its origin
	// problems are what is wrong with the docs, one message each.
	problems []string
}

// problem records what is wrong with the docs.
func (s *session) problem(format string, args ...any) {
	s.problems = append(s.problems, fmt.Sprintf(format, args...))
}

// lineRef is where a script line comes from: a block's markdown line, or
// the prelude (block -1).
type lineRef struct {
	block int
	line  int
}

// runDoc runs one markdown file's blocks as one session and returns what
// is wrong with them. A failure of the harness itself fails t.
func runDoc(t *testing.T, root string, blocks []block) []string {
	s := &session{
		t: t, root: root, bins: binaries(t, root),
		npm:    os.Getenv(transporttest.PeerEnv) == "1",
		peer:   filepath.Join(root, "internal", "e2e", "docs", "testdata", "peer"),
		notRun: map[int]string{},
		runs:   map[int]bool{},
	}
	tmp := t.TempDir()
	s.work, s.home, s.out = filepath.Join(tmp, "work"), filepath.Join(tmp, "home"), filepath.Join(tmp, "out")
	for _, d := range []string{s.work, s.home, s.out} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	s.allocatePorts(blocks)
	s.sandbox()
	script, expects, err := s.script(blocks)
	if err != nil {
		return append(s.problems, err.Error())
	}
	scriptPath := filepath.Join(tmp, "docs.sh")
	if err := os.WriteFile(scriptPath, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	s.run(blocks, scriptPath, expects)
	return s.problems
}

// allocatePorts maps every fixed loopback port of the blocks and the
// examples (and the default 8787) to a free port.
func (s *session) allocatePorts(blocks []block) {
	want := map[int]bool{defaultListenPort: true}
	note := func(text string) {
		for _, m := range loopbackAddr.FindAllStringSubmatch(text, -1) {
			if p, err := strconv.Atoi(m[2]); err == nil && p > 0 && p < 65536 {
				want[p] = true
			}
		}
	}
	for _, b := range blocks {
		note(b.Script)
		for _, e := range b.Expect {
			note(e)
		}
	}
	_ = filepath.WalkDir(filepath.Join(s.root, "examples"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !strings.HasSuffix(p, ".go") {
			if data, err := os.ReadFile(p); err == nil {
				note(string(data))
			}
		}
		return nil
	})
	s.ports = map[int]int{}
	var lns []net.Listener
	for p := range want {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			s.t.Fatal(err)
		}
		lns = append(lns, ln)
		s.ports[p] = ln.Addr().(*net.TCPAddr).Port
	}
	for _, ln := range lns {
		_ = ln.Close()
	}
}

// moved rewrites the fixed loopback ports of text to the session's.
func (s *session) moved(text string) string {
	return loopbackAddr.ReplaceAllStringFunc(text, func(m string) string {
		host, port, _ := strings.Cut(m, ":")
		p, _ := strconv.Atoi(port)
		if q, ok := s.ports[p]; ok {
			return host + ":" + strconv.Itoa(q)
		}
		return m
	})
}

// defaultAddr is the session's stand-in for 127.0.0.1:8787.
func (s *session) defaultAddr() string {
	return "127.0.0.1:" + strconv.Itoa(s.ports[defaultListenPort])
}

// sandbox builds the working directory: the repository's top-level
// entries linked (dot files left out, so a developer's .env or
// utcpd.json does not leak in), examples/ copied with the ports moved,
// bin/utcpd the built binary, and with the npm peers the docs' peer
// package (so npx finds the pinned packages offline).
func (s *session) sandbox() {
	t := s.t
	entries, err := os.ReadDir(s.root)
	if err != nil {
		t.Fatal(err)
	}
	skip := map[string]bool{"examples": true, "bin": true, "node_modules": true, "package.json": true, "package-lock.json": true, "utcpd.json": true}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") || skip[e.Name()] {
			continue
		}
		if err := os.Symlink(filepath.Join(s.root, e.Name()), filepath.Join(s.work, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	src := filepath.Join(s.root, "examples")
	err = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		dst := filepath.Join(s.work, "examples", rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if !strings.HasSuffix(p, ".go") {
			data = []byte(s.moved(string(data)))
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		return os.WriteFile(dst, data, info.Mode().Perm())
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(s.work, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(s.bins, "utcpd"), filepath.Join(s.work, "bin", "utcpd")); err != nil {
		t.Fatal(err)
	}
	if s.npm {
		for _, f := range []string{"node_modules", "package.json"} {
			if err := os.Symlink(filepath.Join(s.peer, f), filepath.Join(s.work, f)); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// env is the session's environment: the test's without UTCPD_*, HOME,
// XDG_* and npm settings, with a fresh HOME (but the Go caches of the
// test's), the sandbox's bin first on PATH, $UTCPD_SERVER at the moved
// default port, and the harness's own variables.
func (s *session) env() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "UTCPD_") || strings.HasPrefix(name, "XDG_") || strings.HasPrefix(strings.ToLower(name), "npm_config_") ||
			name == "HOME" || name == "PATH" || name == "GORACE" || name == "NODE_OPTIONS" || name == "NODE_PATH" ||
			name == "GOCACHE" || name == "GOMODCACHE" || name == "GOPATH" {
			continue
		}
		env = append(env, kv)
	}
	env = append(env, built.goEnv...)
	return append(env,
		"HOME="+s.home,
		"PATH="+filepath.Join(s.work, "bin")+string(os.PathListSeparator)+os.Getenv("PATH"),
		"UTCPD_SERVER=http://"+s.defaultAddr(),
		"NO_COLOR=1",
		"npm_config_offline=true", "npm_config_update_notifier=false", "npm_config_fund=false", "npm_config_audit=false",
		"DOCS_TEST_SERVERS="+s.bins,
		"DOCS_TEST_STATUS="+filepath.Join(s.out, "status"),
		"DOCS_TEST_OUT="+s.out,
	)
}

// goRun matches `go run [flags] ./PKG` at the start of a command.
var goRun = regexp.MustCompile(`go\s+run\s+(?:-\S+\s+)*\./(cmd/utcpd|examples/servers/[A-Za-z0-9_]+)/?`)

// script builds the session's script and returns it with each block's
// expected texts (ports moved).
func (s *session) script(blocks []block) (string, map[int][]string, error) {
	var sb strings.Builder
	expects := map[int][]string{}
	add := func(text string, ref lineRef) {
		sb.WriteString(text)
		for range strings.Count(text, "\n") {
			s.lines = append(s.lines, ref)
		}
	}
	add(prelude, lineRef{block: -1})
	for bi, b := range blocks {
		if b.Skip != "" {
			continue
		}
		for _, e := range b.Expect {
			expects[bi] = append(expects[bi], s.moved(e))
		}
		segs, err := splitScript(s.moved(b.Script))
		if err != nil {
			return "", nil, fmt.Errorf("%s: %w", b.Where(), err)
		}
		last := -1
		for i, seg := range segs {
			if len(seg.Words) > 0 {
				last = i
			}
		}
		ref := func(line int) lineRef {
			if line >= len(b.ScriptLine) {
				line = len(b.ScriptLine) - 1
			}
			return lineRef{block: bi, line: b.ScriptLine[line]}
		}
		add(fmt.Sprintf("__dt_block=%d; __dt_rc=0; printf 'begin %d\\n' >&9\n{\n", bi, bi), ref(0))
		for i, seg := range segs {
			text, after, err := s.rewrite(bi, b, seg)
			if err != nil {
				return "", nil, fmt.Errorf("%s (line %d): %w", b.Where(), ref(seg.Line).line, err)
			}
			if i == last && b.Exit != 0 {
				add("set +e\n", ref(seg.Line))
			}
			add(text, ref(seg.Line))
			if !strings.HasSuffix(text, "\n") {
				add("\n", ref(seg.Line))
			}
			if i == last && b.Exit != 0 {
				add("__dt_rc=$?; set -e\n", ref(seg.Line))
			}
			add(after, ref(seg.Line))
		}
		add(fmt.Sprintf("} >\"$DOCS_TEST_OUT/%d.out\" 2>&1\nprintf 'end %d %%s\\n' \"$__dt_rc\" >&9\n", bi, bi), ref(len(b.ScriptLine)-1))
	}
	return sb.String(), expects, nil
}

// rewrite returns the text a segment runs as and the lines to run after
// it (the wait for a background command).
func (s *session) rewrite(bi int, b block, seg segment) (text, after string, err error) {
	text = seg.Text
	a := assignments(seg.Words)
	w := seg.Words[a:]
	if len(w) == 0 {
		return text, "", nil
	}
	if !checked(w) && (w[0] != "npx" || s.npm) {
		s.runs[bi] = true
	}
	if len(w) >= 3 && w[0] == "go" && w[1] == "run" {
		if m := goRun.FindStringSubmatchIndex(text); m != nil {
			pkg := text[m[2]:m[3]]
			var bin string
			if pkg == "cmd/utcpd" {
				bin = "utcpd"
			} else if name := strings.TrimPrefix(pkg, "examples/servers/"); fileExists(filepath.Join(s.bins, name)) {
				bin = `"$DOCS_TEST_SERVERS"/` + name
			}
			if bin != "" {
				text = text[:m[0]] + bin + text[m[1]:]
				for i := 2; i < len(w); i++ {
					if strings.TrimSuffix(w[i], "/") == "./"+pkg {
						w = append([]string{bin}, w[i+1:]...)
						break
					}
				}
			}
		}
	}
	blank := ":" + strings.Repeat("\n", strings.Count(text, "\n"))
	switch {
	case checked(w):
		if err := check(s.root, w); err != nil {
			s.problem("%s: %v", b.Where(), err)
		}
		return blank, "", nil
	case w[0] == "npx":
		pkg, err := checkNPX(s.peer, w)
		if err != nil {
			return "", "", err
		}
		if s.npm && !fileExists(filepath.Join(s.peer, "node_modules", filepath.FromSlash(pkg), "package.json")) {
			return "", "", fmt.Errorf("%s=1 but %s is not installed; install it with: npm ci --prefix internal/e2e/docs/testdata/peer --no-audit --no-fund", transporttest.PeerEnv, pkg)
		}
		if !s.npm {
			s.notRun[bi] += fmt.Sprintf("\n  %s (npx: set %s=1 and install %s)", strings.TrimSpace(text), transporttest.PeerEnv, "internal/e2e/docs/testdata/peer")
			return blank, "", nil
		}
		return text, "", nil
	case filepath.Base(w[0]) == "utcpd" && len(w) > 1 && w[1] == "serve" && !hasHelp(w):
		addr, isDefault := s.serveAddr(seg.Words[:a], w)
		prefix := ""
		if isDefault {
			prefix = "UTCPD_LISTEN=" + addr + " "
		}
		if seg.Background {
			return insertPrefix(text, prefix), "__dt_wait_ready $! " + addr + "\n", nil
		}
		return insertPrefix(text, "__dt_fg "+addr+" serve "+prefix), "", nil
	case strings.HasPrefix(w[0], `"$DOCS_TEST_SERVERS"/`) || strings.HasPrefix(w[0], "$DOCS_TEST_SERVERS/"):
		addr := flagValue(w, "listen")
		if addr == "" {
			return "", "", fmt.Errorf("a demo server must be given its -listen address, so the test can wait for it")
		}
		if seg.Background {
			host, port, _ := strings.Cut(addr, ":")
			return text, fmt.Sprintf("__dt_wait_port $! %s %s\n", host, port), nil
		}
		return insertPrefix(text, "__dt_fg "+addr+" port "), "", nil
	case seg.Background:
		m := loopbackAddr.FindStringSubmatch(text)
		if m == nil {
			return "", "", fmt.Errorf("the harness cannot tell when this background command is ready: start utcpd serve or a demo server, or name the 127.0.0.1:PORT it listens on")
		}
		return text, fmt.Sprintf("__dt_wait_port $! %s %s\n", m[1], m[2]), nil
	}
	return text, "", nil
}

// serveAddr is where a utcpd serve command listens: its --listen, its
// UTCPD_LISTEN assignment, its configuration file's gateway.listen, else
// the moved default (isDefault).
func (s *session) serveAddr(assigns, w []string) (addr string, isDefault bool) {
	if v := flagValue(w, "listen"); v != "" {
		return v, false
	}
	for _, kv := range assigns {
		if v, ok := strings.CutPrefix(kv, "UTCPD_LISTEN="); ok {
			return v, false
		}
	}
	cfg := flagValue(w, "config")
	if cfg == "" {
		cfg = flagValue(w, "c")
	}
	if cfg != "" {
		if !filepath.IsAbs(cfg) {
			cfg = filepath.Join(s.work, cfg)
		}
		if data, err := os.ReadFile(cfg); err == nil {
			var c struct {
				Gateway struct {
					Listen string `json:"listen"`
				} `json:"gateway"`
			}
			if json.Unmarshal(data, &c) == nil && c.Gateway.Listen != "" {
				return c.Gateway.Listen, false
			}
		}
	}
	return s.defaultAddr(), true
}

// flagValue returns the value of -name/--name (as "-name v" or
// "-name=v") among words, "" when absent.
func flagValue(w []string, name string) string {
	for i, a := range w {
		for _, p := range []string{"-" + name, "--" + name} {
			if a == p && i+1 < len(w) {
				return w[i+1]
			}
			if v, ok := strings.CutPrefix(a, p+"="); ok {
				return v
			}
		}
	}
	return ""
}

// hasHelp reports whether the words ask for help (which prints and exits).
func hasHelp(w []string) bool {
	for _, a := range w {
		if a == "-h" || a == "--help" {
			return true
		}
	}
	return false
}

// insertPrefix puts p after the leading blanks of text.
func insertPrefix(text, p string) string {
	i := len(text) - len(strings.TrimLeft(text, " \t"))
	return text[:i] + p + text[i:]
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// status is what the script reported about one block.
type status struct {
	begun, ended bool
	rc           int // end's status, or the failing command's
	failLine     int // the script line of the failing command (1-based), 0 if none
}

// run runs the script, enforcing each block's timeout, stops whatever it
// left running, and checks every block.
func (s *session) run(blocks []block, scriptPath string, expects map[int][]string) {
	t := s.t
	defer s.keep(blocks[0].File)
	logf, err := os.Create(filepath.Join(s.out, "script.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command("bash", scriptPath)
	cmd.Dir = s.work
	cmd.Env = s.env()
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	defer stopGroup(pgid)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var (
		waitErr   error
		timedOut  = -1    // the block that ran out of time
		lingered  = false // every block ended, the script did not
		current   = -1
		endedSeen = false
		since     = time.Now()
		tick      = time.NewTicker(100 * time.Millisecond)
	)
	defer tick.Stop()
loop:
	for {
		select {
		case waitErr = <-done:
			break loop
		case <-tick.C:
			st := s.statuses(len(blocks))
			for i := len(blocks) - 1; i >= 0; i-- {
				if st[i].begun {
					if i != current {
						current, since, endedSeen = i, time.Now(), false
					}
					break
				}
			}
			if current < 0 {
				continue
			}
			if st[current].ended && !endedSeen {
				endedSeen, since = true, time.Now()
			}
			limit := s.timeout(blocks[current])
			if endedSeen {
				limit = lingerLimit
			}
			if time.Since(since) > limit {
				if endedSeen {
					lingered = true
				} else {
					timedOut = current
				}
				stopGroup(pgid)
				waitErr = <-done
				break loop
			}
		}
	}
	if lingered {
		s.problem("the script did not end within %s of its last block's end: a background command did not stop on SIGTERM\n%s", lingerLimit, tail(s.output(-1)))
	}
	stopGroup(pgid)
	st := s.statuses(len(blocks))
	var ran, skipped, checkedOnly int
	for i, b := range blocks {
		if b.Skip != "" {
			skipped++
			t.Logf("%s: skipped: %s", b.Where(), b.Skip)
			continue
		}
		if note := s.notRun[i]; note != "" {
			t.Logf("%s: not run:%s", b.Where(), note)
		}
		out := s.output(i)
		switch {
		case i == timedOut:
			s.problem("%s: still running after %s\n%s", b.Where(), s.timeout(b), s.report(b, out))
			return
		case !st[i].begun:
			s.problem("%s: not reached (the script stopped: %v)\n%s", b.Where(), waitErr, tail(s.output(-1)))
			return
		case !st[i].ended:
			where := ""
			if st[i].failLine > 0 && st[i].failLine-1 < len(s.lines) {
				where = fmt.Sprintf(" (the command at %s:%d)", b.File, s.lines[st[i].failLine-1].line)
			}
			s.problem("%s: failed with exit status %d%s\n%s", b.Where(), st[i].rc, where, s.report(b, out))
			return
		case st[i].rc != b.Exit:
			s.problem("%s: the last command exited %d, the docs say %d\n%s", b.Where(), st[i].rc, b.Exit, s.report(b, out))
		}
		squeezed := squeeze(out)
		for _, e := range expects[i] {
			switch {
			case strings.Contains(squeezed, squeeze(e)):
			case s.notRun[i] != "":
				// The command that prints it may be one not run.
				t.Logf("%s: output not checked for %q: not every command ran", b.Where(), e)
			default:
				s.problem("%s: the output does not contain %q\n%s", b.Where(), e, s.report(b, out))
			}
		}
		if strings.Contains(out, "panic: ") || strings.Contains(out, "WARNING: DATA RACE") {
			s.problem("%s: a process panicked or raced\n%s", b.Where(), s.report(b, out))
		}
		if s.runs[i] {
			ran++
		} else {
			checkedOnly++
		}
	}
	t.Logf("shell blocks: %d run, %d only checked, %d skipped", ran, checkedOnly, skipped)
}

// keep copies the session into $DOCS_TEST_KEEP, when set.
func (s *session) keep(file string) {
	d := os.Getenv("DOCS_TEST_KEEP")
	if d == "" {
		return
	}
	dst := filepath.Join(d, strings.ReplaceAll(file, "/", "_"))
	if out, err := exec.Command("cp", "-r", filepath.Dir(s.out), dst).CombinedOutput(); err != nil {
		s.t.Logf("DOCS_TEST_KEEP: %v: %s", err, out)
	}
}

// timeout is a block's time limit.
func (s *session) timeout(b block) time.Duration {
	if b.Timeout != "" {
		if d, err := time.ParseDuration(b.Timeout); err == nil {
			return d
		}
		s.problem("%s: the timeout directive %q is not a Go duration", b.Where(), b.Timeout)
	}
	return blockTimeout
}

// statuses reads the status channel: the status of each of n blocks.
func (s *session) statuses(n int) []status {
	st := make([]status, n)
	f, err := os.Open(filepath.Join(s.out, "status"))
	if err != nil {
		return st
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		i, err := strconv.Atoi(fields[1])
		if err != nil || i < 0 || i >= n {
			continue
		}
		x := &st[i]
		switch fields[0] {
		case "begin":
			x.begun = true
		case "end":
			x.ended = true
			if len(fields) > 2 {
				x.rc, _ = strconv.Atoi(fields[2])
			}
		case "fail":
			if len(fields) > 3 {
				x.rc, _ = strconv.Atoi(fields[2])
				x.failLine, _ = strconv.Atoi(fields[3])
			}
		}
	}
	return st
}

// output is block i's output (-1: the script's own).
func (s *session) output(i int) string {
	name := "script.log"
	if i >= 0 {
		name = strconv.Itoa(i) + ".out"
	}
	data, _ := os.ReadFile(filepath.Join(s.out, name))
	return string(data)
}

// report shows a failed block: what ran and what it printed.
func (s *session) report(b block, out string) string {
	return fmt.Sprintf("--- the block (ports moved: %v):\n%s--- its output:\n%s\n--- the script's own output:\n%s", s.ports, s.moved(b.Script), tail(out), tail(s.output(-1)))
}

// tail is the end of long text.
func tail(s string) string {
	if len(s) > outputShown {
		return "...\n" + s[len(s)-outputShown:]
	}
	return s
}

// squeeze removes all white space.
func squeeze(s string) string {
	return strings.Join(strings.Fields(s), "")
}

// stopGroup stops the process group: SIGTERM, then SIGKILL to what is
// left after 10 s.
func stopGroup(pgid int) {
	if err := syscall.Kill(-pgid, syscall.SIGTERM); errors.Is(err, syscall.ESRCH) {
		return
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}
