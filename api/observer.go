package api

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/utcpd/utcpd/api/httpx"
	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/registry"
	"github.com/utcpd/utcpd/utcp"
)

// Observer logs and measures what the daemon does: one log line and the
// metrics of every tool call (through OnCall, which the daemon installs as
// gateway.Options.OnCall), registrations made through any source, calls in
// flight, and the number of registered manuals and tools. Every metric is
// named utcpd_*. An Observer is safe for concurrent use.
//
// Metrics:
//
//	utcpd_calls_total{tool,outcome}              counter; outcome "ok" or an error code
//	utcpd_call_duration_seconds{protocol}        histogram of call latency
//	utcpd_guard_decisions_total{decision}        counter; allow, deny, review, error
//	utcpd_calls_in_flight                        gauge of REST calls running now
//	utcpd_registrations_total{source,op,outcome} counter; op register, replace, refresh, deregister
//	utcpd_manuals{source}                        gauge, read from the gateway at scrape time
//	utcpd_tools{source}                          gauge, read from the gateway at scrape time
//	utcpd_manual_up{manual}                      gauge, 1 while the manual is ready, 0 while discovering, failed or degraded
//
// The tool label is the qualified name, or "unresolved" for a name that
// matched no tool (so unknown names cannot grow the series without bound).
type Observer struct {
	log       *slog.Logger
	gatherer  prometheus.Gatherer
	calls     *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	decisions *prometheus.CounterVec
	inFlight  prometheus.Gauge
	regs      *prometheus.CounterVec
	inv       *inventory
	tap       atomic.Pointer[func(*gateway.CallRecord)]

	// The children of the usual labels, looked up once instead of hashed
	// on every call: tool → calls{tool, "ok"}, protocol → latency,
	// decision → decisions. They hold what the vectors hold (a series is
	// never deleted), so they grow only as the vectors do.
	okCalls, latencies, decided sync.Map
}

// unresolvedTool is the tool label of a call whose name matched no tool.
const unresolvedTool = "unresolved"

// NewObserver returns an Observer logging to log (nil: discard) and
// registering its metrics with reg (nil: prometheus.DefaultRegisterer).
// A metric already registered with reg under the same name and labels is
// reused, so several Observers may share one registry. When reg is also a
// prometheus.Gatherer (a *prometheus.Registry is), New serves it on
// /metrics unless Options.Metrics says otherwise.
func NewObserver(log *slog.Logger, reg prometheus.Registerer) *Observer {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if reg == nil {
		reg = prometheus.DefaultRegisterer
	}
	o := &Observer{log: log}
	if g, ok := reg.(prometheus.Gatherer); ok {
		o.gatherer = g
	} else if reg == prometheus.DefaultRegisterer {
		o.gatherer = prometheus.DefaultGatherer
	}
	o.calls = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "utcpd_calls_total",
		Help: "Tool calls by qualified tool name and outcome (ok or the error code).",
	}, []string{"tool", "outcome"}))
	o.latency = register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "utcpd_call_duration_seconds",
		Help:    "Tool call latency through the gateway, by communication protocol.",
		Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
	}, []string{"protocol"}))
	o.decisions = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "utcpd_guard_decisions_total",
		Help: "Guard chain decisions on tool calls.",
	}, []string{"decision"}))
	o.inFlight = register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "utcpd_calls_in_flight",
		Help: "Tool calls through the REST front running now.",
	}))
	o.regs = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "utcpd_registrations_total",
		Help: "Manual registrations by source (config, dir, api), operation and outcome.",
	}, []string{"source", "op", "outcome"}))
	o.inv = register(reg, &inventory{
		manuals: prometheus.NewDesc("utcpd_manuals", "Registered manuals by source.", []string{"source"}, nil),
		tools:   prometheus.NewDesc("utcpd_tools", "Registered tools by the source of their manual.", []string{"source"}, nil),
		up: prometheus.NewDesc("utcpd_manual_up",
			"1 while the manual is ready (its tools are what its backend lists now), 0 while it is discovering, failed or degraded.", []string{"manual"}, nil),
	})
	return o
}

// register registers c with reg, or returns the collector already
// registered in its place. Any other failure is a programming error.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		panic("api: registering metrics: " + err.Error())
	}
	return c
}

// SetGateway makes the manuals and tools gauges report g's registry (the
// last Gateway set wins when Observers share a registry). New calls it
// with Options.Gateway.
func (o *Observer) SetGateway(g *gateway.Gateway) { o.inv.gw.Store(g) }

// SetTap makes OnCall hand every record to fn as well (the web console's
// traffic view); fn must be fast, must not block and must not keep rec.
// nil removes it.
func (o *Observer) SetTap(fn func(rec *gateway.CallRecord)) {
	if fn == nil {
		o.tap.Store(nil)
		return
	}
	o.tap.Store(&fn)
}

// OnCall records one finished call: it logs one line (tool, outcome,
// duration, guard decision; never arguments or results) and updates the
// call, latency and guard metrics. Install it as gateway.Options.OnCall.
func (o *Observer) OnCall(rec *gateway.CallRecord) {
	if tap := o.tap.Load(); tap != nil {
		(*tap)(rec)
	}
	outcome := "ok"
	if rec.Code != "" {
		outcome = string(rec.Code)
	}
	tool := rec.Qualified
	if tool == "" {
		tool = unresolvedTool
	}
	if outcome == "ok" {
		child(&o.okCalls, tool, func() prometheus.Counter { return o.calls.WithLabelValues(tool, outcome) }).Inc()
	} else {
		o.calls.WithLabelValues(tool, outcome).Inc()
	}
	child(&o.latencies, rec.Protocol, func() prometheus.Observer { return o.latency.WithLabelValues(rec.Protocol) }).
		Observe(rec.Duration.Seconds())
	if d := string(rec.Verdict.Decision); d != "" {
		child(&o.decided, d, func() prometheus.Counter { return o.decisions.WithLabelValues(d) }).Inc()
	}
	level := slog.LevelInfo
	if rec.Code != "" && httpx.Status(rec.Code) >= 500 && rec.Code != utcp.CodeToolError {
		level = slog.LevelWarn
	}
	ctx := context.Background()
	if !o.log.Enabled(ctx, level) {
		return
	}
	// The record is handed to the handler directly: Logger.LogAttrs would
	// also capture the caller's program counter, which only a handler
	// with AddSource uses (the daemon's do not) and which costs more
	// than formatting the line.
	r := slog.NewRecord(time.Now(), level, "call", 0)
	var buf [10]slog.Attr
	attrs := buf[:0]
	attrs = append(attrs,
		slog.String("tool", rec.Tool),
		slog.String("qualified", rec.Qualified),
		slog.String("protocol", rec.Protocol),
		slog.String("outcome", outcome),
		slog.Duration("duration", rec.Duration),
		slog.String("guard", string(rec.Verdict.Decision)),
	)
	if rec.Verdict.Guard != "" {
		attrs = append(attrs, slog.String("guard_name", rec.Verdict.Guard))
	}
	if rec.Principal != "" {
		attrs = append(attrs, slog.String("principal", rec.Principal))
	}
	if rec.Stream {
		attrs = append(attrs, slog.Bool("stream", true))
	}
	if rec.Err != nil && loggableError(rec.Code) {
		attrs = append(attrs, slog.String("err", rec.Err.Error()))
	}
	r.AddAttrs(attrs...)
	_ = o.log.Handler().Handle(ctx, r)
}

// child returns the metric cached under key in m, looked up with get
// and cached the first time.
func child[M any](m *sync.Map, key string, get func() M) M {
	if c, ok := m.Load(key); ok {
		return c.(M)
	}
	c, _ := m.LoadOrStore(key, get())
	return c.(M)
}

// loggableError reports whether the message of an error with code c is
// safe to log: it names the gateway's own conditions, never argument
// values or a tool's output (invalid_arguments and tool_error may quote
// them).
func loggableError(c utcp.Code) bool {
	switch c {
	case utcp.CodeTransportError, utcp.CodeTimeout, utcp.CodeCanceled, utcp.CodeToolNotFound,
		utcp.CodeAmbiguousTool, utcp.CodeProtocolNotAllowed, utcp.CodeGuardDenied, utcp.CodeGuardError,
		utcp.CodeReviewPending, utcp.CodeGuardReviewTimeout, utcp.CodeVariableNotFound, utcp.CodeUnavailable, utcp.CodePayloadTooLarge,
		utcp.CodeUnsupported, utcp.CodeRateLimited, utcp.CodeInternal:
		return true
	}
	return false
}

// Registration counts one registration operation (op "register",
// "replace", "refresh" or "deregister") of a manual from source ("config",
// "dir", "api"); err nil is outcome "ok", otherwise its code. The daemon
// calls it for the manuals it registers from its configuration; the admin
// API for its own.
func (o *Observer) Registration(source, op string, err error) {
	outcome := "ok"
	if err != nil {
		outcome = string(utcp.CodeOf(err))
	}
	o.regs.WithLabelValues(source, op, outcome).Inc()
}

// CallStarted increments the in-flight gauge; pair it with CallFinished.
func (o *Observer) CallStarted() { o.inFlight.Inc() }

// CallFinished decrements the in-flight gauge.
func (o *Observer) CallFinished() { o.inFlight.Dec() }

// inventory reports the manuals and tools gauges from the gateway at
// scrape time.
type inventory struct {
	gw                 atomic.Pointer[gateway.Gateway]
	manuals, tools, up *prometheus.Desc
}

func (c *inventory) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.manuals
	ch <- c.tools
	ch <- c.up
}

func (c *inventory) Collect(ch chan<- prometheus.Metric) {
	g := c.gw.Load()
	if g == nil {
		return
	}
	manuals := map[string]int{registry.SourceConfig: 0, registry.SourceDir: 0, registry.SourceAPI: 0}
	tools := map[string]int{}
	for _, m := range g.Manuals() {
		manuals[m.Source]++
		tools[m.Source] += len(m.Tools)
	}
	for _, s := range g.Statuses() {
		up := 0.0
		if s.Health.State == gateway.StateReady {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, up, s.Name)
	}
	for source, n := range manuals {
		ch <- prometheus.MustNewConstMetric(c.manuals, prometheus.GaugeValue, float64(n), source)
		ch <- prometheus.MustNewConstMetric(c.tools, prometheus.GaugeValue, float64(tools[source]), source)
	}
}
