package main

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"sync"
	"time"
)

// logFlushInterval bounds how long a log line of level info or below
// waits in the daemon's log buffer before it is written.
const logFlushInterval = 50 * time.Millisecond

// logSink is the daemon's log output: lines are collected in a buffer and
// written to out at most logFlushInterval after the first of them (one
// write for many lines, instead of one system call per call's log line),
// when the buffer is full, at once for a line of level warn or above
// (flushAbove), and by Close. After Close, writes go to out directly. The
// lines of the last logFlushInterval are lost if the process dies without
// Close (a crash; a panic's own report goes to stderr unbuffered). Safe
// for concurrent use.
type logSink struct {
	mu     sync.Mutex
	out    io.Writer
	buf    *bufio.Writer
	armed  bool // a flush is scheduled
	closed bool
}

func newLogSink(out io.Writer) *logSink {
	return &logSink{out: out, buf: bufio.NewWriterSize(out, 64<<10)}
}

// Write buffers p (one log line: slog handlers write a line in one call).
func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return s.out.Write(p)
	}
	if !s.armed {
		s.armed = true
		time.AfterFunc(logFlushInterval, s.timed)
	}
	return s.buf.Write(p)
}

func (s *logSink) timed() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armed = false
	_ = s.buf.Flush()
}

// Flush writes what is buffered.
func (s *logSink) Flush() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Flush()
}

// Close writes what is buffered; later writes are not buffered.
func (s *logSink) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return s.buf.Flush()
}

// flushAbove is a slog.Handler that flushes its sink after each record of
// level warn or above, so that warnings and errors are written at once.
type flushAbove struct {
	slog.Handler
	sink *logSink
}

func (h flushAbove) Handle(ctx context.Context, r slog.Record) error {
	err := h.Handler.Handle(ctx, r)
	if r.Level >= slog.LevelWarn {
		_ = h.sink.Flush()
	}
	return err
}

func (h flushAbove) WithAttrs(as []slog.Attr) slog.Handler {
	return flushAbove{h.Handler.WithAttrs(as), h.sink}
}

func (h flushAbove) WithGroup(name string) slog.Handler {
	return flushAbove{h.Handler.WithGroup(name), h.sink}
}
