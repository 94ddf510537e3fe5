package cli

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/utcpd/utcpd/internal/jsonx"
	"github.com/utcpd/utcpd/manuals"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/transports/internal/procenv"
	"github.com/utcpd/utcpd/utcp"
)

// Info describes the cli transport to a transports.Registry.
var Info = transports.Info{
	Type:          Type,
	ParseTemplate: ParseTemplate,
	New:           transports.Constructor(New),
	Template:      new(Template),
}

func init() { transports.MustRegister(Info) }

// Defaults of the cli transport.
const (
	// DefaultCallTimeout bounds a tool call whose template sets no timeout.
	DefaultCallTimeout = 120 * time.Second
	// DefaultDiscoveryTimeout bounds discovery whose template sets no
	// timeout.
	DefaultDiscoveryTimeout = 60 * time.Second
	// DefaultMaxOutputBytes caps what one run may print on standard output
	// (and, separately, on standard error), and the length of one streamed
	// line.
	DefaultMaxOutputBytes = 16 << 20
	// StderrTailBytes is how much of the end of standard error a
	// *utcp.ToolError message carries.
	StderrTailBytes = 2 << 10
	// MaxArgumentBytes is the largest placeholder value (with its
	// variable name) the process environment can carry: Linux refuses
	// any single environment string over 128 KiB (MAX_ARG_STRLEN). Use
	// stdin_arguments for larger arguments.
	MaxArgumentBytes = 128 << 10
)

// pipeGrace bounds how long one read of a process's output waits once
// the process and its group are gone: a descendant that left the group
// (setsid) may still hold the pipe open without writing.
const pipeGrace = 250 * time.Millisecond

// stepPoll is how often the size of the step output file is checked
// against the output cap while a multi-step script runs.
const stepPoll = 20 * time.Millisecond

// Config is the cli section of the daemon configuration
// (transports.Options.Config). Every field is optional.
type Config struct {
	// MaxOutputBytes caps standard output and standard error of one run
	// and one streamed line; 0 means DefaultMaxOutputBytes. A run that
	// prints more is killed and fails with payload_too_large.
	MaxOutputBytes int64 `json:"max_output_bytes,omitempty"`
	// Bash is the path of the bash executable; "" looks "bash" up in the
	// daemon's PATH when the transport is created.
	Bash string `json:"bash,omitempty"`
}

// Transport runs cli tools. It keeps no per-manual state; it tracks the
// processes it started so that Close can kill them. It is safe for
// concurrent use.
type Transport struct {
	log     *slog.Logger
	maxOut  int64
	bash    string
	bashErr error

	ctx    context.Context // cancelled by Close; kills every running process
	cancel context.CancelFunc

	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup // one per running process
}

// Interface guards.
var (
	_ transports.Transport = (*Transport)(nil)
	_ transports.Streamer  = (*Transport)(nil)
)

// New creates a cli Transport. Options.Config, when set, is a Config.
// A missing bash executable is not an error here; calls then fail with a
// transport error.
func New(opts transports.Options) (*Transport, error) {
	var cfg Config
	log, err := transports.DecodeConfig(opts, "cli", &cfg)
	if err != nil {
		return nil, utcp.Errorf(utcp.CodeInvalidConfig, "cli: transport configuration: %w", err)
	}
	if cfg.MaxOutputBytes < 0 {
		return nil, utcp.NewError(utcp.CodeInvalidConfig, "cli: max_output_bytes must not be negative")
	}
	if cfg.MaxOutputBytes == 0 {
		cfg.MaxOutputBytes = DefaultMaxOutputBytes
	}
	t := &Transport{log: log, maxOut: cfg.MaxOutputBytes, bash: cfg.Bash}
	if t.bash == "" {
		t.bash, t.bashErr = exec.LookPath("bash")
	}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	return t, nil
}

// RegisterManual runs the template's commands with no arguments and reads
// the manual from their standard output: a UTCP manual (v1.1 or legacy,
// through manuals.ParseManual), else a JSON list of tools or a single
// tool, else newline-delimited JSON tools. Discovered tools without a
// tool_call_template keep none. Every failure is a discovery_failed
// error.
func (t *Transport) RegisterManual(ctx context.Context, tmpl *utcp.CallTemplate) (*utcp.Manual, error) {
	spec, _, err := transports.SpecOf[Template](tmpl, Type, ParseTemplate)
	if err != nil {
		return nil, err
	}
	what := "discovery of manual " + tmpl.Name
	r, err := t.start(ctx, spec, map[string]any{}, timeoutOf(spec, DefaultDiscoveryTimeout), what)
	if err != nil {
		return nil, discoveryError(what, err)
	}
	out := r.readAll()
	r.finish()
	if err := r.failure(); err != nil {
		return nil, discoveryError(what, err)
	}
	if code, desc := r.exit(); code != 0 {
		return nil, discoveryError(what, &utcp.ToolError{Status: code, Message: fmt.Sprintf("exited %s%s", desc, r.stderrTail())})
	}
	if err := transports.PrecheckManual(ctx, out); err != nil {
		return nil, err
	}
	m, warns, err := parseDiscovery(out)
	if err != nil {
		return nil, discoveryError(what, err)
	}
	for _, w := range warns {
		t.log.Warn("cli: discovered manual", "manual", tmpl.Name, "warning", w)
	}
	return m, nil
}

// CallTool runs the tool's commands once and returns their output: the
// standard output if it is not blank, else the standard error, trimmed,
// decoded as JSON when it starts with { or [ and parses, else as a string.
// A non-zero exit is a *utcp.ToolError whose Status is the exit status
// (128+n for a signal n) and whose message ends with the tail of standard
// error. A run over its timeout or whose context ends is killed with its
// whole process group; output over the cap kills it too and fails with
// payload_too_large.
func (t *Transport) CallTool(ctx context.Context, call *utcp.Call) (*utcp.Result, error) {
	spec, _, err := transports.SpecOf[Template](call.Template, Type, ParseTemplate)
	if err != nil {
		return nil, err
	}
	what := "tool " + call.Tool
	r, err := t.start(ctx, spec, call.Arguments, timeoutOf(spec, DefaultCallTimeout), what)
	if err != nil {
		return nil, err
	}
	out := r.readAll()
	r.finish()
	if err := r.failure(); err != nil {
		return nil, err
	}
	value, err := r.result(out)
	if code, desc := r.exit(); code != 0 {
		if err != nil {
			value = nil
		}
		return nil, &utcp.ToolError{
			Status:  code,
			Value:   value,
			Message: fmt.Sprintf("cli: %s exited %s%s", what, desc, r.stderrTail()),
		}
	}
	if err != nil {
		return nil, err
	}
	return &utcp.Result{Value: value}, nil
}

// CallToolStream runs the tool's commands once and yields each line of
// standard output as one event as soon as it is printed: the line decoded
// as JSON when it parses, else the line as a string (blank lines are
// skipped). The stream ends with io.EOF on exit status 0 and with a
// *utcp.ToolError otherwise. One line over the output cap kills the run
// (payload_too_large); a stream has no cap on its total size. Closing the
// stream kills the process group.
func (t *Transport) CallToolStream(ctx context.Context, call *utcp.Call) (transports.Stream, error) {
	spec, _, err := transports.SpecOf[Template](call.Template, Type, ParseTemplate)
	if err != nil {
		return nil, err
	}
	what := "tool " + call.Tool
	r, err := t.start(ctx, spec, call.Arguments, timeoutOf(spec, DefaultCallTimeout), what)
	if err != nil {
		return nil, err
	}
	s := &stream{
		r:      r,
		what:   what,
		events: make(chan *utcp.Event, 16),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	go s.pump()
	return s, nil
}

// Release does nothing: the cli transport keeps no per-manual state.
func (t *Transport) Release(ctx context.Context, tmpl *utcp.CallTemplate) error {
	return nil
}

// Close kills every process the transport still runs, waits until they
// are reaped, and refuses new calls. It is idempotent.
func (t *Transport) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	t.mu.Unlock()
	t.cancel()
	t.wg.Wait()
	return nil
}

func discoveryError(what string, err error) error {
	return &utcp.Error{Code: utcp.CodeDiscoveryFailed, Message: fmt.Sprintf("cli: %s: %v", what, err), Err: err}
}

// errClosed ends runs when the transport closes, and refuses new ones.
var errClosed = utcp.NewError(utcp.CodeUnavailable, "cli: transport closed")

func timeoutOf(spec *Template, def time.Duration) time.Duration {
	if spec.Timeout > 0 {
		return time.Duration(spec.Timeout * float64(time.Millisecond))
	}
	return def
}

// run is one bash process and the goroutines that serve it.
type run struct {
	t        *Transport
	what     string
	max      int64
	ctx      context.Context // the call's context with the run's timeout
	cancel   context.CancelFunc
	cmd      *exec.Cmd
	stdout   *os.File // read ends; read them through pipeReader
	stderr   *os.File
	stdin    *os.File // write end, nil without stdin_arguments
	stepFile string

	mu   sync.Mutex
	pgid int // set once started

	reason  atomic.Pointer[error] // why the run was killed, if it was
	exited  chan struct{}         // closed once the process is reaped
	helpers sync.WaitGroup
	errBuf  capBuffer // standard error, written by one helper
}

// start launches one run of spec. The caller must read stdout (readAll or
// a stream) and then call finish.
func (t *Transport) start(ctx context.Context, spec *Template, args map[string]any, timeout time.Duration, what string) (*run, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("cli: %s: %w", what, err)
	}
	// ParseTemplate validated spec; a Template built in Go may not be.
	if err := spec.Validate(); err != nil {
		return nil, utcp.Errorf(utcp.CodeInvalidTemplate, "cli: %s: %v: %w", what, err, transports.ErrInvalidTemplate)
	}
	if t.bashErr != nil {
		return nil, &utcp.TransportError{Err: fmt.Errorf("cli: bash not found: %w", t.bashErr)}
	}
	if spec.WorkingDir != "" {
		fi, err := os.Stat(spec.WorkingDir)
		if err != nil {
			return nil, &utcp.TransportError{Err: fmt.Errorf("cli: working_dir: %w", err)}
		}
		if !fi.IsDir() {
			return nil, &utcp.TransportError{Err: fmt.Errorf("cli: working_dir %s is not a directory", spec.WorkingDir)}
		}
	}
	nonce := newNonce()
	sc := compile(spec, nonce)
	env, err := environment(spec, sc, args)
	if err != nil {
		return nil, err
	}
	var stdinData []byte
	if spec.StdinArguments {
		if args == nil {
			args = map[string]any{}
		}
		stdinData, err = jsonx.Marshal(args)
		if err != nil {
			return nil, utcp.Errorf(utcp.CodeInvalidArguments, "cli: %s: arguments are not JSON-encodable: %w", what, err)
		}
	}

	r := &run{t: t, what: what, max: t.maxOut, exited: make(chan struct{})}
	var childEnds []*os.File
	closeAll := func() {
		for _, f := range append(childEnds, r.stdout, r.stderr, r.stdin) {
			if f != nil {
				f.Close()
			}
		}
		if r.stepFile != "" {
			os.Remove(r.stepFile)
		}
	}
	var wOut, wErr, rIn *os.File
	if r.stdout, wOut, err = os.Pipe(); err == nil {
		childEnds = append(childEnds, wOut)
		if r.stderr, wErr, err = os.Pipe(); err == nil {
			childEnds = append(childEnds, wErr)
			if spec.StdinArguments {
				if rIn, r.stdin, err = os.Pipe(); err == nil {
					childEnds = append(childEnds, rIn)
				}
			}
		}
	}
	if err == nil && sc.captures {
		var f *os.File
		if f, err = os.CreateTemp("", "utcpd-cli-step-*"); err == nil {
			r.stepFile = f.Name()
			f.Close()
			env = append(env, sc.stepVar+"="+r.stepFile)
		}
	}
	if err != nil {
		closeAll()
		return nil, &utcp.TransportError{Err: fmt.Errorf("cli: %s: %w", what, err)}
	}

	r.cmd = &exec.Cmd{
		Path:        t.bash,
		Args:        []string{t.bash, "--noprofile", "--norc", "-c", sc.text, "utcpd-cli"},
		Env:         env,
		Dir:         spec.WorkingDir,
		Stdout:      wOut,
		Stderr:      wErr,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	if rIn != nil {
		r.cmd.Stdin = rIn
	}

	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		closeAll()
		return nil, errClosed
	}
	t.wg.Add(1)
	t.mu.Unlock()

	if err := r.cmd.Start(); err != nil {
		closeAll()
		t.wg.Done()
		if errors.Is(err, syscall.E2BIG) {
			return nil, utcp.Errorf(utcp.CodeInvalidArguments,
				"cli: %s: the arguments are too large for a process environment (%w); set stdin_arguments in the template and read them from standard input", what, err)
		}
		return nil, &utcp.TransportError{Err: fmt.Errorf("cli: %s: %w", what, err)}
	}
	for _, f := range childEnds {
		f.Close()
	}
	r.mu.Lock()
	r.pgid = r.cmd.Process.Pid
	r.mu.Unlock()

	cause := utcp.NewError(utcp.CodeTimeout, "cli: %s timed out after %v", what, timeout)
	cause.Err = context.DeadlineExceeded
	r.ctx, r.cancel = context.WithTimeoutCause(ctx, timeout, cause)

	// wait is not counted in helpers: finish waits for exited, the last
	// thing wait does.
	go r.wait()
	r.helpers.Add(2)
	go r.watch()
	go r.readStderr()
	if r.stdin != nil {
		r.helpers.Add(1)
		go r.writeStdin(stdinData)
	}
	if r.stepFile != "" {
		r.helpers.Add(1)
		go r.watchStepFile()
	}
	return r, nil
}

// wait reaps the process, then kills what is left of its group (the
// background children a tool left behind) and arms the pipe deadlines
// that pipeReader turns into end of output.
func (r *run) wait() {
	_ = r.cmd.Wait()
	r.killGroup()
	deadline := time.Now().Add(pipeGrace)
	_ = r.stdout.SetReadDeadline(deadline)
	_ = r.stderr.SetReadDeadline(deadline)
	if r.stdin != nil {
		_ = r.stdin.SetWriteDeadline(deadline)
	}
	close(r.exited)
}

// watch kills the run when its context ends or the transport closes.
func (r *run) watch() {
	defer r.helpers.Done()
	select {
	case <-r.exited:
	case <-r.ctx.Done():
		r.abort(context.Cause(r.ctx))
	case <-r.t.ctx.Done():
		r.abort(errClosed)
	}
}

func (r *run) readStderr() {
	defer r.helpers.Done()
	buf := make([]byte, 32<<10)
	pr := pipeReader{r.stderr}
	for {
		n, err := pr.Read(buf)
		r.errBuf.write(buf[:n], r.max)
		if err != nil {
			return
		}
	}
}

func (r *run) writeStdin(data []byte) {
	defer r.helpers.Done()
	_, _ = r.stdin.Write(data)
	_ = r.stdin.Close()
}

func (r *run) watchStepFile() {
	defer r.helpers.Done()
	tick := time.NewTicker(stepPoll)
	defer tick.Stop()
	for {
		select {
		case <-r.exited:
			return
		case <-tick.C:
			if fi, err := os.Stat(r.stepFile); err == nil && fi.Size() > r.max {
				r.abort(r.tooLarge("a step's standard output"))
				return
			}
		}
	}
}

// abort records why the run ends (the first reason wins) and kills its
// process group.
func (r *run) abort(reason error) {
	r.reason.CompareAndSwap(nil, &reason)
	r.killGroup()
}

// killGroup sends SIGKILL to the run's process group. While the leader
// lives, or any member does, the group id cannot be reused, so the signal
// reaches only this run's processes.
func (r *run) killGroup() {
	r.mu.Lock()
	pgid := r.pgid
	r.mu.Unlock()
	if pgid > 0 {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
}

func (r *run) tooLarge(what string) error {
	return &utcp.Error{
		Code:    utcp.CodePayloadTooLarge,
		Message: fmt.Sprintf("cli: %s: %s exceeded the cap of %d bytes (max_output_bytes); the process was killed", r.what, what, r.max),
		Err:     transports.ErrTooLarge,
	}
}

// readAll reads standard output up to the cap. More than the cap aborts
// the run.
func (r *run) readAll() []byte {
	var out bytes.Buffer
	buf := make([]byte, 32<<10)
	pr := pipeReader{r.stdout}
	for {
		n, err := pr.Read(buf)
		if int64(out.Len()+n) > r.max {
			r.abort(r.tooLarge("standard output"))
			return nil
		}
		out.Write(buf[:n])
		if err != nil {
			return out.Bytes()
		}
	}
}

// pipeReader reads the read end of an output pipe. Before the process
// exits it blocks like any read. wait sets a read deadline when the
// process is gone; from then on every read still returns what the pipe
// holds, however late it comes, and only a read that finds the pipe empty
// for pipeGrace ends the output (io.EOF), so a pipe held open by an
// escaped descendant cannot block the call.
type pipeReader struct{ f *os.File }

func (p pipeReader) Read(b []byte) (int, error) {
	n, err := p.f.Read(b)
	if n > 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		return n, err
	}
	_ = p.f.SetReadDeadline(time.Now().Add(pipeGrace))
	n, err = p.f.Read(b)
	if n == 0 && errors.Is(err, os.ErrDeadlineExceeded) {
		return 0, io.EOF
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		err = nil
	}
	return n, err
}

// finish waits until the process is reaped and every helper is done, and
// releases the run's files. It is called exactly once per run.
func (r *run) finish() {
	<-r.exited
	r.helpers.Wait()
	r.mu.Lock()
	r.pgid = 0 // reaped and group killed: never signal this id again
	r.mu.Unlock()
	r.stdout.Close()
	r.stderr.Close()
	if r.stepFile != "" {
		if fi, err := os.Stat(r.stepFile); err == nil && fi.Size() > r.max {
			r.reason.CompareAndSwap(nil, ptr(r.tooLarge("a step's standard output")))
		}
		os.Remove(r.stepFile)
	}
	r.cancel()
	r.t.wg.Done()
}

func ptr(err error) *error { return &err }

// failure returns why the run was killed (timeout, cancellation, output
// cap, transport closed), or nil if it ran to its end.
func (r *run) failure() error {
	p := r.reason.Load()
	if p == nil {
		return nil
	}
	err := *p
	var ue *utcp.Error
	if errors.As(err, &ue) {
		return err
	}
	// A context error of the caller's own context.
	return fmt.Errorf("cli: %s: %w", r.what, err)
}

// exit returns the exit status (128+n for signal n) and a description.
func (r *run) exit() (int, string) {
	st := r.cmd.ProcessState
	if st == nil {
		return -1, "without status"
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal()), fmt.Sprintf("on signal %v (status %d)", ws.Signal(), 128+int(ws.Signal()))
	}
	return st.ExitCode(), fmt.Sprintf("with status %d", st.ExitCode())
}

// stderrTail returns ": " and the last StderrTailBytes of standard error,
// trimmed, or "" if it was empty.
func (r *run) stderrTail() string {
	tail := strings.TrimSpace(string(r.errBuf.tail()))
	if tail == "" {
		return ""
	}
	return ": " + tail
}

// result picks and decodes the run's output: standard output when it is
// not blank, else standard error.
func (r *run) result(stdout []byte) (any, error) {
	out := bytes.TrimSpace(stdout)
	if len(out) == 0 {
		if r.errBuf.truncated() {
			return nil, r.tooLarge("standard error")
		}
		out = bytes.TrimSpace(r.errBuf.head)
	}
	return decodeOutput(out), nil
}

// decodeOutput returns out decoded as JSON when it starts with { or [ and
// is one valid JSON value (numbers as json.Number), else out as a string.
func decodeOutput(out []byte) any {
	if len(out) > 0 && (out[0] == '{' || out[0] == '[') {
		if v, ok := jsonx.DecodeValue(out); ok {
			return v
		}
	}
	return string(out)
}

// capBuffer keeps the first max bytes written to it and, separately, the
// last StderrTailBytes.
type capBuffer struct {
	head  []byte
	last  []byte
	total int64
}

func (b *capBuffer) write(p []byte, max int64) {
	b.total += int64(len(p))
	if room := max - int64(len(b.head)); room > 0 {
		b.head = append(b.head, p[:min(int64(len(p)), room)]...)
	}
	b.last = append(b.last, p...)
	if len(b.last) > 2*StderrTailBytes {
		b.last = append(b.last[:0], b.last[len(b.last)-StderrTailBytes:]...)
	}
}

func (b *capBuffer) tail() []byte {
	if len(b.last) > StderrTailBytes {
		return b.last[len(b.last)-StderrTailBytes:]
	}
	return b.last
}

func (b *capBuffer) truncated() bool { return b.total > int64(len(b.head)) }

func newNonce() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// environment builds the process environment: the inherited variables,
// then env_vars, then one variable per placeholder argument.
func environment(spec *Template, sc *script, args map[string]any) ([]string, error) {
	inherit := spec.InheritEnvVars
	if inherit == nil {
		inherit = DefaultInherit
	}
	env := procenv.Inherit(inherit)
	env.SetAll(spec.EnvVars)
	for _, name := range sc.args.order {
		v, ok := args[name]
		if !ok {
			return nil, utcp.NewError(utcp.CodeInvalidArguments, "cli: missing argument %q: the command refers to it as UTCP_ARG_%s_UTCP_END", name, name).
				WithDetail("argument", name)
		}
		s, err := argString(v)
		if err != nil {
			return nil, utcp.Errorf(utcp.CodeInvalidArguments, "cli: argument %q: %w", name, err).WithDetail("argument", name)
		}
		if d, ok := sc.leading[name]; ok && strings.HasPrefix(s, "-") && (d.always || !slices.Contains(spec.AllowDashArguments, name)) {
			msg := "cli: argument %q starts with \"-\" and its placeholder begins an argument of %s, which would read it as an option; " +
				"pass a value that does not start with \"-\""
			if !d.always {
				msg += ", or list the argument in the template's allow_dash_arguments if any option there is harmless"
			}
			return nil, utcp.NewError(utcp.CodeInvalidArguments, msg, name, d.cmd).WithDetail("argument", name)
		}
		if strings.IndexByte(s, 0) >= 0 {
			return nil, utcp.NewError(utcp.CodeInvalidArguments, "cli: argument %q contains a NUL byte, which a process environment cannot carry; set stdin_arguments in the template", name).
				WithDetail("argument", name)
		}
		vname := sc.args.vars[name]
		if n := len(vname) + 1 + len(s) + 1; n > MaxArgumentBytes {
			return nil, utcp.NewError(utcp.CodeInvalidArguments, "cli: argument %q is %d bytes, over the %d-byte limit of one environment string; set stdin_arguments in the template and read the arguments from standard input", name, len(s), MaxArgumentBytes).
				WithDetail("argument", name)
		}
		env.Set(vname, s)
	}
	return env.List(), nil
}

// argString renders one argument value for a placeholder: strings as they
// are, numbers in their JSON form, everything else JSON-encoded.
func argString(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case json.Number:
		return x.String(), nil
	}
	b, err := jsonx.Marshal(v)
	return string(b), err
}

// stream is the transports.Stream of one run.
type stream struct {
	r      *run
	what   string
	events chan *utcp.Event
	final  error // set before events is closed
	stop   chan struct{}
	once   sync.Once
	done   chan struct{} // closed when pump returns
}

// pump reads lines from standard output and sends them as events until
// the process ends, the stream is closed or the run is killed.
func (s *stream) pump() {
	defer close(s.done)
	r := s.r
	br := bufio.NewReaderSize(pipeReader{r.stdout}, 64<<10)
	var line []byte
	stopped := false
	for !stopped {
		frag, err := br.ReadSlice('\n')
		line = append(line, frag...)
		if int64(len(line)) > r.max {
			r.abort(r.tooLarge("one line of standard output"))
			break
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if ev := lineEvent(line); ev != nil {
			select {
			case s.events <- ev:
			case <-s.stop:
				r.abort(errStreamClosed)
				stopped = true
			case <-r.t.ctx.Done():
				r.abort(errClosed)
				stopped = true
			}
		}
		line = line[:0]
		if err != nil {
			break
		}
	}
	r.finish()
	switch err := r.failure(); {
	case err != nil:
		s.final = err
	default:
		if code, desc := r.exit(); code != 0 {
			s.final = &utcp.ToolError{Status: code, Message: fmt.Sprintf("cli: %s exited %s%s", s.what, desc, r.stderrTail())}
		} else {
			s.final = io.EOF
		}
	}
	close(s.events)
}

// errStreamClosed ends a run whose stream the caller closed.
var errStreamClosed = utcp.NewError(utcp.CodeCanceled, "cli: stream closed")

// lineEvent turns one output line into an event, nil for a blank line.
func lineEvent(line []byte) *utcp.Event {
	text := bytes.TrimRight(line, "\r\n")
	trimmed := bytes.TrimSpace(text)
	if len(trimmed) == 0 {
		return nil
	}
	if v, ok := jsonx.DecodeValue(trimmed); ok {
		return &utcp.Event{Data: v}
	}
	return &utcp.Event{Data: string(text)}
}

// Recv returns the next line's event, io.EOF after the last one, or the
// error that ended the run.
func (s *stream) Recv() (*utcp.Event, error) {
	ev, ok := <-s.events
	if !ok {
		return nil, s.final
	}
	return ev, nil
}

// Close kills the run if it still runs and waits until it is reaped. It
// is idempotent.
func (s *stream) Close() error {
	s.once.Do(func() {
		close(s.stop)
		select {
		case <-s.done:
		default:
			s.r.abort(errStreamClosed)
		}
	})
	<-s.done
	return nil
}

// parseDiscovery reads a manual from discovery output.
func parseDiscovery(out []byte) (*utcp.Manual, []manuals.Warning, error) {
	out = bytes.TrimSpace(out)
	if len(out) == 0 {
		return nil, nil, errors.New("the command printed nothing on standard output")
	}
	var whole any
	if err := json.Unmarshal(out, &whole); err == nil {
		switch v := whole.(type) {
		case map[string]any:
			if isManual(v) {
				return parseManual(out)
			}
			if _, ok := v["name"]; ok {
				return parseManual(wrapTools([]json.RawMessage{out}))
			}
			return nil, nil, errors.New("the output is a JSON object but neither a UTCP manual (no tools) nor a tool (no name)")
		case []any:
			var tools []json.RawMessage
			if err := json.Unmarshal(out, &tools); err != nil {
				return nil, nil, err
			}
			return parseManual(wrapTools(tools))
		default:
			return nil, nil, fmt.Errorf("the output is a JSON %T, not a UTCP manual, a tool or a list of tools", whole)
		}
	}
	// Newline-delimited JSON: a manual on one line wins; otherwise every
	// line that is a JSON object with a name is a tool. Other lines are
	// ignored.
	var tools []json.RawMessage
	for line := range bytes.SplitSeq(out, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 || line[0] != '{' {
			continue
		}
		var obj map[string]any
		if json.Unmarshal(line, &obj) != nil {
			continue
		}
		if isManual(obj) {
			return parseManual(line)
		}
		if _, ok := obj["name"]; ok {
			tools = append(tools, json.RawMessage(line))
		}
	}
	if len(tools) > 0 {
		return parseManual(wrapTools(tools))
	}
	return nil, nil, fmt.Errorf("the output is not a UTCP manual, a JSON list of tools, a tool or newline-delimited JSON tools (it begins %q)", preview(out))
}

func isManual(obj map[string]any) bool {
	_, tools := obj["tools"]
	return tools
}

func parseManual(data []byte) (*utcp.Manual, []manuals.Warning, error) {
	m, warns, err := manuals.ParseManual(data)
	if err != nil {
		return nil, warns, err
	}
	return m, warns, nil
}

// wrapTools builds a v1.1 manual document around tool objects.
func wrapTools(tools []json.RawMessage) []byte {
	if tools == nil {
		tools = []json.RawMessage{}
	}
	b, _ := json.Marshal(map[string]any{"utcp_version": utcp.Version, "manual_version": "0.0.0", "tools": tools})
	return b
}

func preview(b []byte) string {
	const n = 120
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}
