package mcp

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/utcpd/utcpd/transports/internal/procenv"
	"github.com/utcpd/utcpd/utcp"
)

// pipeGrace bounds how long the pipes of a stdio server are read once
// its process group is gone (a descendant that left the group may keep
// them open).
const pipeGrace = 250 * time.Millisecond

// connectStdio starts the server process and runs the MCP handshake over
// its standard input and output.
func (s *server) connectStdio(ctx context.Context, sess *session) error {
	sess.kind = "stdio"
	p, err := s.startProc()
	if err != nil {
		return err
	}
	sess.proc = p
	sess.line = newLineConn(p.stdout, stdinWriter{p.stdin}, s.t.cfg.maxMessage, sess.tapMessage)
	cs, err := s.newClient(sess).Connect(ctx, lineTransport{sess.line}, s.sessionOptions())
	if err != nil {
		return fmt.Errorf("mcp: %s: MCP handshake with %s: %w", s.what(), s.cfg.Command, err)
	}
	sess.cs = cs
	return nil
}

// writeFailed marks an error writing to a stdio server's standard input.
type writeFailed struct{ err error }

func (w *writeFailed) Error() string { return "writing to the server: " + w.err.Error() }

func (w *writeFailed) Unwrap() error { return w.err }

// stdinWriter is a stdio server's standard input as the SDK writes it.
type stdinWriter struct{ f *os.File }

func (w stdinWriter) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	if err != nil {
		err = &writeFailed{err}
	}
	return n, err
}

func (w stdinWriter) Close() error { return w.f.Close() }

// proc is one stdio server process, leader of its own process group.
type proc struct {
	s      *server
	cmd    *exec.Cmd
	pid    int
	stdin  *os.File // write end
	stdout *os.File // read end
	stderr *os.File // read end
	exited chan struct{}

	mu      sync.Mutex
	pgid    int // 0 once reaped and the group killed
	helpers sync.WaitGroup
	tail    []byte // the end of standard error, for error messages
}

// startProc starts the server's command in its own process group.
func (s *server) startProc() (*proc, error) {
	path := s.cfg.Command
	if !strings.Contains(path, "/") {
		lp, err := exec.LookPath(path)
		if err != nil {
			return nil, &utcp.TransportError{Err: fmt.Errorf("mcp: %s: command %q: %w", s.what(), path, err)}
		}
		path = lp
	}
	if s.cfg.Cwd != "" {
		if fi, err := os.Stat(s.cfg.Cwd); err != nil || !fi.IsDir() {
			return nil, &utcp.TransportError{Err: fmt.Errorf("mcp: %s: cwd %q is not a directory", s.what(), s.cfg.Cwd)}
		}
	}
	p := &proc{s: s, exited: make(chan struct{})}
	var rIn, wOut, wErr *os.File
	var err error
	closeAll := func() {
		for _, f := range []*os.File{rIn, p.stdin, p.stdout, wOut, p.stderr, wErr} {
			if f != nil {
				f.Close()
			}
		}
	}
	if rIn, p.stdin, err = os.Pipe(); err == nil {
		if p.stdout, wOut, err = os.Pipe(); err == nil {
			p.stderr, wErr, err = os.Pipe()
		}
	}
	if err != nil {
		closeAll()
		return nil, &utcp.TransportError{Err: fmt.Errorf("mcp: %s: %w", s.what(), err)}
	}
	p.cmd = &exec.Cmd{
		Path:        path,
		Args:        append([]string{s.cfg.Command}, s.cfg.Args...),
		Env:         environment(s.cfg),
		Dir:         s.cfg.Cwd,
		Stdin:       rIn,
		Stdout:      wOut,
		Stderr:      wErr,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	if err := p.cmd.Start(); err != nil {
		closeAll()
		return nil, &utcp.TransportError{Err: fmt.Errorf("mcp: %s: starting %s: %w", s.what(), s.cfg.Command, err)}
	}
	rIn.Close()
	wOut.Close()
	wErr.Close()
	s.spawns.Add(1)
	p.pid = p.cmd.Process.Pid
	p.pgid = p.pid
	s.log.Info("mcp: server process started", "pid", p.pid, "command", s.cfg.Command)
	p.helpers.Add(1)
	go p.readStderr()
	go p.wait()
	return p, nil
}

// wait reaps the process, kills what is left of its group, and lets the
// pipe readers finish.
func (p *proc) wait() {
	err := p.cmd.Wait()
	p.mu.Lock()
	if p.pgid > 0 {
		_ = syscall.Kill(-p.pgid, syscall.SIGKILL)
		p.pgid = 0
	}
	p.mu.Unlock()
	deadline := time.Now().Add(pipeGrace)
	_ = p.stdout.SetReadDeadline(deadline)
	_ = p.stderr.SetReadDeadline(deadline)
	p.s.log.Info("mcp: server process exited", "pid", p.pid, "status", exitStatus(p.cmd.ProcessState, err))
	close(p.exited)
}

func exitStatus(st *os.ProcessState, err error) string {
	if st == nil {
		return fmt.Sprint(err)
	}
	return st.String()
}

// signal sends sig to the process group while it exists.
func (p *proc) signal(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pgid > 0 {
		_ = syscall.Kill(-p.pgid, sig)
	}
}

// stop shuts the server down the way the MCP spec asks: close its input,
// wait, SIGTERM, wait, SIGKILL (to the whole process group).
func (p *proc) stop(grace time.Duration) {
	_ = p.stdin.Close()
	if waitFor(p.exited, grace) {
		return
	}
	p.signal(syscall.SIGTERM)
	if waitFor(p.exited, grace) {
		return
	}
	p.kill()
}

// kill sends SIGKILL to the process group and waits for the reaping.
func (p *proc) kill() {
	p.signal(syscall.SIGKILL)
	<-p.exited
}

// finish waits until the process is reaped and its pipes are drained.
func (p *proc) finish() {
	<-p.exited
	p.helpers.Wait()
	_ = p.stdin.Close()
	_ = p.stderr.Close()
}

func waitFor(ch <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	}
}

// stderrTail returns ": stderr: " and the end of standard error, or "".
func (p *proc) stderrTail() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	tail := strings.TrimSpace(string(p.tail))
	if tail == "" {
		return ""
	}
	return " (stderr: " + tail + ")"
}

const stderrTailBytes = 1 << 10

// readStderr logs standard error line by line: each line capped, at most
// the configured rate (bursts of twice that), with a count of the lines
// dropped.
func (p *proc) readStderr() {
	defer p.helpers.Done()
	cfg := p.s.t.cfg
	log := p.s.log.With("pid", p.pid)
	br := bufio.NewReaderSize(deadlineEOF{p.stderr}, 4<<10)
	rate := float64(cfg.stderrRate)
	tokens, last := 2*rate, time.Now()
	dropped := 0
	for {
		line, truncated, err := readLine(br, cfg.maxStderrLine)
		if len(line) > 0 || truncated {
			p.mu.Lock()
			p.tail = append(p.tail, line...)
			p.tail = append(p.tail, '\n')
			if len(p.tail) > 2*stderrTailBytes {
				p.tail = append(p.tail[:0], p.tail[len(p.tail)-stderrTailBytes:]...)
			}
			p.mu.Unlock()
			now := time.Now()
			tokens = min(2*rate, tokens+now.Sub(last).Seconds()*rate)
			last = now
			if tokens >= 1 {
				tokens--
				if dropped > 0 {
					log.Warn("mcp: server stderr lines dropped (rate limit)", "dropped", dropped)
					dropped = 0
				}
				text := string(line)
				if truncated {
					text += " …[truncated]"
				}
				log.Info("mcp: server stderr", "line", text)
			} else {
				dropped++
			}
		}
		if err != nil {
			break
		}
	}
	if dropped > 0 {
		log.Warn("mcp: server stderr lines dropped (rate limit)", "dropped", dropped)
	}
}

// readLine reads one line, keeping at most max bytes of it (without the
// newline); truncated says bytes were dropped.
func readLine(br *bufio.Reader, max int) (line []byte, truncated bool, err error) {
	keep := func(b []byte) {
		room := min(max-len(line), len(b))
		if room > 0 {
			line = append(line, b[:room]...)
		}
		if room < len(b) {
			truncated = true
		}
	}
	for {
		frag, e := br.ReadSlice('\n')
		if errors.Is(e, bufio.ErrBufferFull) {
			keep(frag)
			continue
		}
		keep(bytes.TrimRight(frag, "\r\n"))
		return line, truncated, e
	}
}

// deadlineEOF turns a read deadline (set once the process is gone) into
// the end of the output.
type deadlineEOF struct{ f *os.File }

func (d deadlineEOF) Read(b []byte) (int, error) {
	n, err := d.f.Read(b)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		err = io.EOF
	}
	return n, err
}

// environment builds a stdio server's environment: the inherited
// variables, then env.
func environment(cfg *Server) []string {
	inherit := cfg.InheritEnvVars
	if inherit == nil {
		inherit = DefaultInherit
	}
	env := procenv.Inherit(inherit)
	env.SetAll(cfg.Env)
	return env.List()
}
