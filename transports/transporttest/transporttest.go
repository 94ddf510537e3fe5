// Package transporttest is the conformance suite every transport passes.
//
// A transport package joins it in a few lines:
//
//	func TestConformance(t *testing.T) {
//		transporttest.Run(t, transporttest.Harness{
//			Info:  http.Info,
//			Serve: func(t *testing.T, f *fixture.Fixture) json.RawMessage { ... },
//			Caps:  transporttest.Caps{Discovery: true},
//		})
//	}
//
// Serve starts the matching examples/servers/<type> on 127.0.0.1:0 serving
// the fixture tools and returns the manual call template that reaches it.
// Subtest names are stable so that waivers can name them; a waiver needs a
// written reason.
package transporttest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
	"github.com/utcpd/utcpd/utcp"
)

// Caps says what a transport can do, so the suite runs the matching
// subtests.
type Caps struct {
	// Stream: the transport implements transports.Streamer and count
	// streams its numbers as separate events.
	Stream bool
	// Sessions: the transport keeps per-manual state, so a call after
	// DeregisterManual fails.
	Sessions bool
	// CancelReachesServer: cancelling a call is observed by the server
	// (the fixture's Canceled counter rises).
	CancelReachesServer bool
}

// Harness connects the suite to one transport and a server speaking its
// protocol.
type Harness struct {
	// Info is the value the transport package registers.
	Info transports.Info
	// Serve starts a server for f on 127.0.0.1:0, stopped with t.Cleanup,
	// and returns the raw manual call template that reaches it.
	Serve func(t *testing.T, f *fixture.Fixture) json.RawMessage
	// Required lists fields of the manual template whose removal must make
	// ParseTemplate fail with ErrInvalidTemplate.
	Required []string
	// Retarget returns the call template to use for calling a tool the
	// server does not have, given the echo tool's raw template. Nil uses
	// echo's template unchanged with the unknown tool's name in the Call.
	Retarget func(raw json.RawMessage, tool string) json.RawMessage
	// EventValue, when set, maps a streamed event to the value Stream/Order
	// compares with 1..n, or reports false for events that carry no count
	// (progress envelopes, a final result event). Nil compares ev.Data.
	EventValue func(ev *utcp.Event) (any, bool)
	// Options are passed to Info.New; Logger is filled in when nil.
	Options transports.Options
	// Caps selects the capability-dependent subtests.
	Caps Caps
	// Waive maps subtest names ("Call/UnknownTool") to the reason they do
	// not apply. A waived subtest is reported as skipped with its reason.
	Waive map[string]string
}

// Run runs the conformance suite as subtests of t.
func Run(t *testing.T, h Harness) {
	t.Helper()
	for name, reason := range h.Waive {
		if strings.TrimSpace(reason) == "" {
			t.Fatalf("waiver for %s has no reason", name)
		}
	}
	s := &suite{h: h}
	s.run(t, "Template/Valid", s.templateValid)
	s.run(t, "Template/UnknownField", s.templateUnknownField)
	s.run(t, "Template/MissingField", s.templateMissingField)
	s.run(t, "RegisterManual/ListsFixtureTools", s.registerLists)
	s.run(t, "Call/Echo", s.callEcho)
	s.run(t, "Call/Add", s.callAdd)
	s.run(t, "Call/ToolError", s.callToolError)
	s.run(t, "Call/UnknownTool", s.callUnknownTool)
	s.run(t, "Call/Cancel", s.callCancel)
	s.run(t, "Call/Concurrent", s.callConcurrent)
	if h.Caps.Stream {
		s.run(t, "Stream/Order", s.streamOrder)
		s.run(t, "Stream/EarlyClose", s.streamEarlyClose)
	}
	s.run(t, "Deregister/Idempotent", s.deregisterIdempotent)
	if h.Caps.Sessions {
		s.run(t, "Deregister/ThenCallFails", s.deregisterThenCallFails)
	}
	s.run(t, "Close/Idempotent", s.closeIdempotent)
	s.run(t, "Close/NoLeaks", s.closeNoLeaks)
}

type suite struct {
	h Harness
}

func (s *suite) run(t *testing.T, name string, fn func(t *testing.T)) {
	t.Run(name, func(t *testing.T) {
		if reason, ok := s.h.Waive[name]; ok {
			t.Skipf("waived: %s", reason)
		}
		fn(t)
	})
}

// env is one server plus one transport with the fixture manual registered.
type env struct {
	f      *fixture.Fixture
	tr     transports.Counted
	manual *utcp.CallTemplate
	tools  map[string]*utcp.Tool // by short fixture name
}

// newTransport returns a new transport of the harness's type wrapped by
// transports.Count, as the gateway uses it.
func (s *suite) newTransport(t *testing.T) transports.Counted {
	t.Helper()
	opts := s.h.Options
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	tr, err := s.h.Info.New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return transports.Count(s.h.Info.Type, tr)
}

func (s *suite) parse(t *testing.T, raw json.RawMessage) *utcp.CallTemplate {
	t.Helper()
	tmpl, err := s.h.Info.ParseTemplate(raw)
	if err != nil {
		t.Fatalf("ParseTemplate(%s): %v", raw, err)
	}
	return &tmpl
}

func (s *suite) setup(t *testing.T) *env {
	t.Helper()
	f := fixture.New()
	raw := withName(t, s.h.Serve(t, f))
	tr := s.newTransport(t)
	t.Cleanup(func() { _ = tr.Close() })
	manual := s.parse(t, raw)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	m, err := tr.RegisterManual(ctx, manual)
	if err != nil {
		t.Fatalf("RegisterManual: %v", err)
	}
	e := &env{f: f, tr: tr, manual: manual, tools: map[string]*utcp.Tool{}}
	for i := range m.Tools {
		tool := &m.Tools[i]
		short := tool.Name[strings.LastIndex(tool.Name, ".")+1:]
		e.tools[short] = tool
	}
	return e
}

// withName gives the template the name "fixture" when it has none.
func withName(t *testing.T, raw json.RawMessage) json.RawMessage {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("Serve returned a template that is not a JSON object: %v", err)
	}
	if _, ok := m["name"]; ok {
		return raw
	}
	m["name"] = "fixture"
	out, _ := json.Marshal(m)
	return out
}

// call builds the Call for a fixture tool.
func (s *suite) callFor(t *testing.T, e *env, name string, args map[string]any) *utcp.Call {
	t.Helper()
	tool, ok := e.tools[name]
	if !ok {
		t.Fatalf("fixture tool %q was not discovered", name)
	}
	tmpl := e.manual
	if tool.ToolCallTemplate != nil {
		tmpl = s.parse(t, tool.ToolCallTemplate.Raw)
	}
	return &utcp.Call{Tool: e.manual.Name + "." + tool.Name, Manual: e.manual.Name, Name: tool.Name, Template: tmpl, Arguments: args}
}

func (s *suite) do(t *testing.T, e *env, name string, args map[string]any) (*utcp.Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	return e.tr.CallTool(ctx, s.callFor(t, e, name, args))
}

func (s *suite) templateValid(t *testing.T) {
	raw := withName(t, s.h.Serve(t, fixture.New()))
	tmpl := s.parse(t, raw)
	if tmpl.Type != s.h.Info.Type {
		t.Errorf("Type = %q, want %q", tmpl.Type, s.h.Info.Type)
	}
	if tmpl.Spec == nil {
		t.Errorf("Spec is nil after ParseTemplate")
	}
	if len(tmpl.Unknown) != 0 {
		t.Errorf("the server's own template has unknown fields %v", tmpl.Unknown)
	}
	if len(tmpl.Raw) == 0 {
		t.Errorf("Raw is empty after ParseTemplate")
	}
}

func (s *suite) templateUnknownField(t *testing.T) {
	raw := withName(t, s.h.Serve(t, fixture.New()))
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	m["zz_not_a_field"] = true
	raw, _ = json.Marshal(m)
	tmpl, err := s.h.Info.ParseTemplate(raw)
	if err != nil {
		t.Fatalf("an unknown field must not be fatal, got %v", err)
	}
	if !slices.Contains(tmpl.Unknown, "zz_not_a_field") {
		t.Errorf("Unknown = %v, want it to list zz_not_a_field", tmpl.Unknown)
	}
	// A field of the wrong JSON type is an error naming the template type.
	m["zz_not_a_field"] = nil
	m["auth"] = "not an object"
	raw, _ = json.Marshal(m)
	if _, err := s.h.Info.ParseTemplate(raw); !errors.Is(err, transports.ErrInvalidTemplate) {
		t.Errorf("auth of the wrong type: err = %v, want ErrInvalidTemplate", err)
	}
}

func (s *suite) templateMissingField(t *testing.T) {
	if len(s.h.Required) == 0 {
		t.Skip("the transport declares no required fields")
	}
	raw := withName(t, s.h.Serve(t, fixture.New()))
	for _, field := range s.h.Required {
		var m map[string]any
		_ = json.Unmarshal(raw, &m)
		delete(m, field)
		b, _ := json.Marshal(m)
		_, err := s.h.Info.ParseTemplate(b)
		if !errors.Is(err, transports.ErrInvalidTemplate) {
			t.Errorf("without %s: err = %v, want ErrInvalidTemplate", field, err)
			continue
		}
		if !strings.Contains(err.Error(), field) {
			t.Errorf("without %s: error %q does not name the field", field, err)
		}
	}
}

func (s *suite) registerLists(t *testing.T) {
	e := s.setup(t)
	for _, want := range fixture.Tools() {
		tool, ok := e.tools[want.Name]
		if !ok {
			t.Errorf("tool %q not discovered (got %v)", want.Name, keys(e.tools))
			continue
		}
		if tool.Description == "" {
			t.Errorf("tool %q has no description", want.Name)
		}
	}
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// normalize round-trips v through JSON so values compare independently of
// their Go representation (json.Number vs float64, RawMessage vs map).
func normalize(t *testing.T, v any) any {
	t.Helper()
	if raw, ok := v.(json.RawMessage); ok {
		var out any
		if err := json.Unmarshal(raw, &out); err != nil {
			return string(raw)
		}
		return out
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("result is not JSON-compatible: %v", err)
	}
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

func (s *suite) callEcho(t *testing.T) {
	e := s.setup(t)
	big := strings.Repeat("utcpd ✓ ", 1<<20/10)
	cases := []struct {
		name string
		args map[string]any
	}{
		{"unicode", map[string]any{"text": "héllo, 世界 🌍 \u2028 \"quoted\" \\ back"}},
		{"nested", map[string]any{"obj": map[string]any{"list": []any{1.0, "two", map[string]any{"three": true}}, "null": nil}}},
		{"one_mib", map[string]any{"blob": big}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := s.do(t, e, fixture.Echo, c.args)
			if err != nil {
				t.Fatalf("echo: %v", err)
			}
			if diff := cmp.Diff(normalize(t, c.args), normalize(t, res.Value)); diff != "" {
				if len(diff) > 2000 {
					diff = diff[:2000] + "..."
				}
				t.Errorf("echo result differs (-want +got):\n%s", diff)
			}
		})
	}
}

func (s *suite) callAdd(t *testing.T) {
	e := s.setup(t)
	res, err := s.do(t, e, fixture.Add, map[string]any{"a": 2, "b": 3.5})
	if err != nil {
		t.Fatalf("add: %v", err)
	}
	want := map[string]any{"sum": 5.5}
	if diff := cmp.Diff(want, normalize(t, res.Value)); diff != "" {
		t.Errorf("add result (-want +got):\n%s", diff)
	}
}

func (s *suite) callToolError(t *testing.T) {
	e := s.setup(t)
	_, err := s.do(t, e, fixture.Fail, map[string]any{"message": "boom: disk on fire"})
	var te *utcp.ToolError
	if !errors.As(err, &te) {
		t.Fatalf("fail: err = %v (%T), want *utcp.ToolError", err, err)
	}
	if !strings.Contains(te.Error(), "boom: disk on fire") {
		t.Errorf("tool error %q does not carry the tool's message", te.Error())
	}
	if utcp.CodeOf(err) != utcp.CodeToolError {
		t.Errorf("CodeOf = %s, want tool_error", utcp.CodeOf(err))
	}
	// A tool error is not a transport failure: the next call works.
	if _, err := s.do(t, e, fixture.Add, map[string]any{"a": 1, "b": 1}); err != nil {
		t.Errorf("call after a tool error: %v", err)
	}
}

func (s *suite) callUnknownTool(t *testing.T) {
	e := s.setup(t)
	call := s.callFor(t, e, fixture.Echo, map[string]any{})
	call.Name = "no_such_tool"
	call.Tool = e.manual.Name + ".no_such_tool"
	if s.h.Retarget != nil {
		call.Template = s.parse(t, s.h.Retarget(call.Template.Raw, "no_such_tool"))
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, err := e.tr.CallTool(ctx, call)
	if !errors.Is(err, transports.ErrToolNotFound) {
		t.Errorf("unknown tool: err = %v, want ErrToolNotFound", err)
	}
}

func (s *suite) callCancel(t *testing.T) {
	e := s.setup(t)
	call := s.callFor(t, e, fixture.Sleep, map[string]any{"ms": 10000})
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := e.tr.CallTool(ctx, call)
	took := time.Since(start)
	if err == nil {
		t.Fatalf("sleep(10s) with a 100ms deadline returned no error")
	}
	if took > time.Second {
		t.Errorf("cancelled call returned after %v, want within 1s", took)
	}
	if code := utcp.CodeOf(err); code != utcp.CodeTimeout && code != utcp.CodeCanceled {
		t.Errorf("CodeOf(%v) = %s, want timeout or canceled", err, code)
	}
	if s.h.Caps.CancelReachesServer {
		waitFor(t, 2*time.Second, "the server to observe the cancellation", func() bool { return e.f.Canceled() > 0 })
	}
}

func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Errorf("timed out after %v waiting for %s", d, what)
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (s *suite) callConcurrent(t *testing.T) {
	e := s.setup(t)
	const n = 64
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			res, err := s.do(t, e, fixture.Add, map[string]any{"a": i, "b": 1000})
			if err != nil {
				errs <- fmt.Errorf("call %d: %w", i, err)
				return
			}
			got := normalize(t, res.Value)
			if diff := cmp.Diff(map[string]any{"sum": float64(i + 1000)}, got); diff != "" {
				errs <- fmt.Errorf("call %d: result (-want +got):\n%s", i, diff)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func (s *suite) stream(t *testing.T, e *env, ctx context.Context, args map[string]any) transports.Stream {
	t.Helper()
	st, ok := e.tr.(transports.Streamer)
	if !ok {
		t.Fatalf("Caps.Stream is set but %T does not implement transports.Streamer", e.tr)
	}
	stream, err := st.CallToolStream(ctx, s.callFor(t, e, fixture.Count, args))
	if err != nil {
		t.Fatalf("CallToolStream: %v", err)
	}
	return stream
}

func (s *suite) streamOrder(t *testing.T) {
	e := s.setup(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	stream := s.stream(t, e, ctx, map[string]any{"n": 5})
	defer stream.Close()
	var got []any
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("Recv: %v", err)
		}
		v := ev.Data
		if s.h.EventValue != nil {
			var ok bool
			if v, ok = s.h.EventValue(ev); !ok {
				continue
			}
		}
		got = append(got, normalize(t, v))
	}
	if diff := cmp.Diff([]any{1.0, 2.0, 3.0, 4.0, 5.0}, got); diff != "" {
		t.Errorf("count(5) events (-want +got):\n%s", diff)
	}
	if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
		t.Errorf("Recv after the end = %v, want io.EOF", err)
	}
}

func (s *suite) streamEarlyClose(t *testing.T) {
	e := s.setup(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	stream := s.stream(t, e, ctx, map[string]any{"n": 1000, "delay_ms": 20})
	for i := range 2 {
		if _, err := stream.Recv(); err != nil {
			t.Fatalf("Recv %d: %v", i, err)
		}
	}
	start := time.Now()
	if err := stream.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := stream.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("Close took %v", took)
	}
	if _, err := stream.Recv(); err == nil {
		// A buffered event may still come; the stream must end soon after.
		deadline := time.Now().Add(2 * time.Second)
		for err == nil && time.Now().Before(deadline) {
			_, err = stream.Recv()
		}
		if err == nil {
			t.Errorf("stream still delivers events 2s after Close")
		}
	}
	waitFor(t, 3*time.Second, "the backend stream to stop", func() bool { return e.f.InFlight() == 0 })
	// The transport still works after an early close.
	if _, err := s.do(t, e, fixture.Add, map[string]any{"a": 1, "b": 2}); err != nil {
		t.Errorf("call after early close: %v", err)
	}
}

func (s *suite) deregisterIdempotent(t *testing.T) {
	e := s.setup(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for i := range 2 {
		if err := e.tr.DeregisterManual(ctx, e.manual); err != nil {
			t.Errorf("DeregisterManual #%d: %v", i+1, err)
		}
	}
}

func (s *suite) deregisterThenCallFails(t *testing.T) {
	e := s.setup(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	call := s.callFor(t, e, fixture.Echo, map[string]any{"x": 1.0})
	if err := e.tr.DeregisterManual(ctx, e.manual); err != nil {
		t.Fatalf("DeregisterManual: %v", err)
	}
	if _, err := e.tr.CallTool(ctx, call); err == nil {
		t.Errorf("call after DeregisterManual succeeded")
	}
}

func (s *suite) closeIdempotent(t *testing.T) {
	e := s.setup(t)
	for i := range 3 {
		if err := e.tr.Close(); err != nil {
			t.Errorf("Close #%d: %v", i+1, err)
		}
	}
}

func (s *suite) closeNoLeaks(t *testing.T) {
	f := fixture.New()
	raw := withName(t, s.h.Serve(t, f))
	ignore := goleak.IgnoreCurrent()
	tr := s.newTransport(t)
	manual := s.parse(t, raw)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	m, err := tr.RegisterManual(ctx, manual)
	if err != nil {
		t.Fatalf("RegisterManual: %v", err)
	}
	e := &env{f: f, tr: tr, manual: manual, tools: map[string]*utcp.Tool{}}
	for i := range m.Tools {
		tool := &m.Tools[i]
		e.tools[tool.Name[strings.LastIndex(tool.Name, ".")+1:]] = tool
	}
	if _, err := s.do(t, e, fixture.Add, map[string]any{"a": 1, "b": 2}); err != nil {
		t.Fatalf("add: %v", err)
	}
	if s.h.Caps.Stream {
		stream := s.stream(t, e, ctx, map[string]any{"n": 3})
		for {
			if _, err := stream.Recv(); err != nil {
				break
			}
		}
		_ = stream.Close()
	}
	if err := tr.DeregisterManual(ctx, manual); err != nil {
		t.Errorf("DeregisterManual: %v", err)
	}
	if err := tr.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := goleak.Find(ignore); err != nil {
		t.Errorf("goroutines left after Close:\n%v", err)
	}
}

// Template builds a raw call template of type typ with the given fields,
// for Serve functions.
func Template(t testing.TB, typ string, fields map[string]any) json.RawMessage {
	t.Helper()
	m := map[string]any{"call_template_type": typ}
	for k, v := range fields {
		m[k] = v
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatalf("Template: %v", err)
	}
	return b
}
