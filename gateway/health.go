package gateway

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/utcpd/utcpd/manuals"
	"github.com/utcpd/utcpd/registry"
	"github.com/utcpd/utcpd/utcp"
)

// This file keeps every manual's health: whether its tools are the ones
// its backend lists now, the last failure, and the background retries of
// manuals whose discovery failed.
//
// A registration that fails with RegisterOptions.KeepFailed (the
// configuration file and the manuals folder, the stored manuals at
// start) leaves a failed manual in the registry: it has no tools, keeps
// its name, source and template, is listed, and can be refreshed,
// replaced and removed like any other. A refresh (or a replacement with
// KeepFailed) that fails leaves the registered version serving, degraded.
// Failed and degraded manuals are retried in the background with a
// capped exponential backoff with jitter (Options.Retry), on goroutines
// Close waits for; RefreshManual retries one at once. Health is kept in
// memory, per process: replicas sharing a store each discover, and keep
// the health of, their own registry.

// ManualState is the health state of a manual.
type ManualState string

// The manual states.
const (
	// StateReady: the tools are those the last discovery found.
	StateReady ManualState = "ready"
	// StateDiscovering: a first discovery is under way (no tools yet), or
	// the tools come from a stored copy whose rediscovery is pending.
	StateDiscovering ManualState = "discovering"
	// StateFailed: the manual could not be registered; it has no tools.
	StateFailed ManualState = "failed"
	// StateDegraded: the last discovery failed and the tools of an
	// earlier one (a stored copy, or the version before a failed refresh
	// or replacement) keep serving.
	StateDegraded ManualState = "degraded"
)

// HealthError is the last failure of a manual's registration or
// discovery.
type HealthError struct {
	// Code is the failure's stable error code.
	Code utcp.Code
	// Message is one line saying what failed (at most 1,000 bytes),
	// without the manual's name.
	Message string
	// At is when it failed.
	At time.Time
}

// ManualHealth is the health of one manual.
type ManualHealth struct {
	// State is ready, discovering, failed or degraded.
	State ManualState
	// LastError is the last failure; nil once an attempt succeeded.
	LastError *HealthError
	// LastSuccess is when the manual's tools were last discovered (a
	// stored copy's discovery time, possibly by an earlier process or
	// another replica); zero if never.
	LastSuccess time.Time
	// NextRetry is when the next background attempt is due; zero when
	// none is scheduled (the manual is healthy, background retries are
	// off, or the failure needs a change of the template or a variable:
	// invalid_template, variable_not_found, ...).
	NextRetry time.Time
	// Failures counts the consecutive failed attempts.
	Failures int
	// ToolCount is the number of tools the manual contributes now.
	ToolCount int
}

// ManualStatus is one manual as Statuses lists it.
type ManualStatus struct {
	// Name and Source are the manual's name and source.
	Name, Source string
	// Type is its call_template_type ("" when unknown).
	Type string
	// Manual is the registry entry; nil while a first discovery is under
	// way (State discovering).
	Manual *registry.Manual
	// Health is the manual's health.
	Health ManualHealth
}

// HealthCounts counts the manuals by state.
type HealthCounts struct {
	Total, Ready, Discovering, Failed, Degraded int
}

// RetryOptions tune the background retries of failed and degraded
// manuals. The zero value retries with DefaultBackoff, one minute an
// attempt, four attempts at once.
type RetryOptions struct {
	// Backoff spaces the attempts (zero fields: DefaultBackoff's).
	Backoff Backoff
	// Timeout bounds one attempt (default DefaultRetryTimeout).
	Timeout time.Duration
	// Concurrency caps the attempts under way at once (default 4).
	Concurrency int
	// Disabled turns background retries off; RefreshManual still
	// retries at once.
	Disabled bool
	// Rand, when set, draws the jitter (a number in [0, 1)); tests pin
	// it.
	Rand func() float64
}

// DefaultRetryTimeout bounds one background attempt.
const DefaultRetryTimeout = time.Minute

// maxMessage caps HealthError.Message.
const maxMessage = 1000

// health is the gateway's record of one manual (healthTable.m).
type health struct {
	state       ManualState
	lastErr     *HealthError
	lastSuccess time.Time
	nextRetry   time.Time
	failures    int
	// wanted, when set, is the template to register instead of the
	// registered one (a replacement that failed); retries use it.
	wanted json.RawMessage
	// gen changes whenever the registry entry or wanted changes; a
	// registration checks it was not overtaken (see begin).
	gen uint64
	// pending counts first registrations under way while the name is not
	// registered: the manual is listed as discovering meanwhile.
	pending     int
	source, typ string
	retrying    bool // a background attempt is under way
}

// healthTable holds the records, by manual name.
type healthTable struct {
	mu      sync.Mutex
	m       map[string]*health
	seq     uint64
	wake    chan struct{}
	started bool
	sem     chan struct{}
}

func (t *healthTable) nextGen() uint64 {
	t.seq++
	return t.seq
}

// get returns the record of name, creating it.
func (t *healthTable) get(name string) *health {
	if t.m == nil {
		t.m = map[string]*health{}
	}
	h := t.m[name]
	if h == nil {
		h = &health{gen: t.nextGen()}
		t.m[name] = h
	}
	return h
}

// started is what begin noted of a registration, for settle.
type started struct {
	gen     uint64 // the record's generation (0: none)
	pending bool   // counted in the record's pending
}

// begin notes a registration of name starting: a name not registered is
// listed as discovering until it ends.
func (g *Gateway) begin(name, source, typ string) started {
	if name == "" {
		return started{}
	}
	g.regLock.Lock()
	defer g.regLock.Unlock()
	t := &g.health
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := g.reg.Manual(name); ok {
		if h := t.m[name]; h != nil {
			return started{gen: h.gen}
		}
		return started{}
	}
	h := t.get(name)
	h.pending++
	if h.pending == 1 {
		h.source, h.typ = source, typ
	}
	return started{gen: h.gen, pending: true}
}

// committed records, under regLock, that entry was registered. fromCopy
// reports tools from a stored copy rather than a discovery; pending, that
// a rediscovery of it is due.
func (g *Gateway) committed(entry *registry.Manual, fromCopy, pending bool) {
	t := &g.health
	t.mu.Lock()
	defer t.mu.Unlock()
	h := t.get(entry.Name)
	h.gen = t.nextGen()
	h.source, h.typ = entry.Source, templateTypeOf(entry)
	h.wanted, h.nextRetry, h.lastSuccess = nil, time.Time{}, entry.Refreshed
	if fromCopy && pending {
		h.state = StateDiscovering // the failures so far stay until the rediscovery
		return
	}
	h.state, h.lastErr, h.failures = StateReady, nil, 0
}

// forget drops the record of a manual removed from the registry (under
// regLock).
func (g *Gateway) forget(name string) {
	t := &g.health
	t.mu.Lock()
	defer t.mu.Unlock()
	if h := t.m[name]; h != nil && h.pending == 0 {
		delete(t.m, name)
	} else if h != nil {
		h.gen = t.nextGen()
		h.state, h.lastErr, h.failures, h.nextRetry, h.wanted = "", nil, 0, time.Time{}, nil
	}
}

// settle ends a registration that begin started: on failure it keeps a
// failed manual (opts.KeepFailed, name not registered) or marks the
// registered one degraded (a refresh, or a replacement with KeepFailed),
// and schedules its retry; unless the registry changed meanwhile.
func (g *Gateway) settle(name string, raw json.RawMessage, opts RegisterOptions, st started, regErr error) {
	if name == "" {
		return
	}
	g.regLock.Lock()
	defer g.regLock.Unlock()
	t := &g.health
	t.mu.Lock()
	h := t.m[name]
	cur, registered := g.reg.Manual(name)
	if h != nil && st.pending && h.pending > 0 {
		h.pending--
	}
	gen0 := st.gen
	if regErr == nil || !keepable(regErr) {
		g.dropIdle(name, registered)
		t.mu.Unlock()
		return
	}
	var gen uint64
	if h != nil {
		gen = h.gen
	}
	if gen != gen0 {
		// Overtaken: another registration or a removal applied meanwhile.
		g.dropIdle(name, registered)
		t.mu.Unlock()
		return
	}
	now := time.Now()
	switch {
	case registered && (opts.KeepFailed || opts.expect != nil):
		h = t.get(name)
		if st, ok := cur.Ext.(*manualState); ok && st.placeholder {
			h.state = StateFailed
		} else {
			h.state = StateDegraded
		}
		// A replacement that failed is retried with its template (none
		// to remember when it is the registered one); a refresh leaves
		// that as it was.
		if opts.KeepFailed && opts.expect == nil {
			want := raw
			if cur.Template != nil && jsonEqual(raw, cur.Template.Raw) {
				want = nil
			}
			if !jsonEqual(want, h.wanted) {
				h.wanted = want
				h.gen = t.nextGen()
			}
		}
		g.failedLocked(name, h, regErr, now)
		t.mu.Unlock()
	case !registered && opts.KeepFailed:
		t.mu.Unlock()
		g.addPlaceholder(name, raw, opts, regErr, now)
	default:
		g.dropIdle(name, registered)
		t.mu.Unlock()
	}
}

// dropIdle deletes the record of a name neither registered nor being
// registered (t.mu held).
func (g *Gateway) dropIdle(name string, registered bool) {
	t := &g.health
	if h := t.m[name]; h != nil && !registered && h.pending == 0 {
		delete(t.m, name)
	}
}

// failedLocked records a failure on h and schedules the retry (t.mu
// held).
func (g *Gateway) failedLocked(name string, h *health, err error, now time.Time) {
	h.lastErr = &HealthError{Code: utcp.CodeOf(err), Message: FailureMessage(name, err), At: now}
	h.failures++
	h.nextRetry = time.Time{}
	if retryable(err) && !g.opts.Retry.Disabled {
		h.nextRetry = now.Add(g.opts.Retry.Backoff.Delay(h.failures, g.opts.Retry.Rand))
		g.kickLocked()
	}
}

// addPlaceholder registers a failed manual called name (under regLock):
// no tools, its template as given.
func (g *Gateway) addPlaceholder(name string, raw json.RawMessage, opts RegisterOptions, regErr error, now time.Time) {
	tmpl := g.placeholderTemplate(name, raw)
	entry := &registry.Manual{Name: name, Template: tmpl, Source: opts.Source, Registered: now, Ext: &manualState{tmpl: tmpl, placeholder: true}}
	if !opts.Registered.IsZero() {
		entry.Registered = opts.Registered
	}
	if opts.stored != nil {
		entry.Registered, entry.Refreshed = opts.stored.Registered, opts.stored.Refreshed
	}
	if err := g.reg.Add(entry); err != nil {
		return
	}
	t := &g.health
	t.mu.Lock()
	defer t.mu.Unlock()
	h := t.get(name)
	h.gen = t.nextGen()
	h.state, h.source, h.typ, h.wanted, h.lastSuccess = StateFailed, opts.Source, tmpl.Type, nil, time.Time{}
	g.failedLocked(name, h, regErr, now)
}

// placeholderTemplate returns the template of a failed manual: raw
// parsed when it parses, else raw with its name and type as far as they
// can be read.
func (g *Gateway) placeholderTemplate(name string, raw json.RawMessage) *utcp.CallTemplate {
	var head struct {
		Type       string `json:"call_template_type"`
		LegacyType string `json:"provider_type"`
	}
	_ = json.Unmarshal(raw, &head)
	if head.Type == "" {
		head.Type = head.LegacyType
	}
	if norm, _, err := manuals.NormalizeTemplate(raw); err == nil {
		raw = norm
	}
	if tmpl, err := g.types.ParseTemplate(raw); err == nil {
		tmpl.Name = name
		return &tmpl
	}
	return &utcp.CallTemplate{Name: name, Type: head.Type, Raw: raw}
}

// keepable reports whether a failed registration is recorded in the
// manual's health: not when it lost a race (manual_exists, a stale
// stored record) or the caller went away.
func keepable(err error) bool {
	if errors.Is(err, errStale) || errors.Is(err, errOvertaken) {
		return false
	}
	switch utcp.CodeOf(err) {
	case utcp.CodeManualExists, utcp.CodeCanceled:
		return false
	}
	return !errors.Is(err, context.Canceled)
}

// retryable reports whether a failure may go away by itself (a backend
// down, a timeout), so that it is retried in the background; a template
// that does not parse or a variable that does not resolve needs a change
// first (a reload, a PUT).
func retryable(err error) bool {
	switch utcp.CodeOf(err) {
	case utcp.CodeInvalidTemplate, utcp.CodeInvalidConfig, utcp.CodeInvalidRequest, utcp.CodeVariableNotFound,
		utcp.CodeManualExists, utcp.CodeManualReadOnly, utcp.CodeProtocolNotAllowed:
		return false
	}
	return true
}

// FailureMessage returns err as one line for a manual's health and the
// log, which name the manual already: without the "discovering manual
// %q: " prefix and the " of manual %q" of the transports' discovery
// errors ("http discovery from http://...: HTTP 503 ..."), whitespace runs
// folded into one space, secrets redacted (utcp.RedactText), at most
// 1,000 bytes.
func FailureMessage(name string, err error) string {
	msg := err.Error()
	q := strconv.Quote(name)
	for _, p := range []string{"discovering manual " + q + ": ", "manual " + q + ": "} {
		msg = strings.TrimPrefix(msg, p)
	}
	msg = strings.ReplaceAll(msg, " of manual "+q, "")
	msg = strings.ReplaceAll(msg, " of manual "+name+":", ":")
	msg = strings.Replace(msg, ": manual "+name+": ", ": ", 1)
	// "http discovery from URL: transport error: GET URL: ..." names the
	// URL twice: the first goes.
	if m := discoveryFrom.FindStringSubmatchIndex(msg); m != nil {
		target := msg[m[4]:m[5]]
		if rest := msg[m[1]:]; strings.Contains(rest, target) {
			msg = msg[:m[3]] + " discovery: " + rest
		}
	}
	// "PATH: open PATH: ..." likewise.
	msg = repeatedPath.ReplaceAllStringFunc(msg, func(s string) string {
		sub := repeatedPath.FindStringSubmatch(s)
		if sub[1] != strings.TrimSuffix(sub[3], ":") {
			return s
		}
		return sub[2] + " " + sub[3]
	})
	msg = strings.Join(strings.FieldsFunc(msg, unicode.IsSpace), " ")
	// Shown by the admin API and the CLI: the secrets a message can
	// carry (a URL's api_key or password) are redacted, as in the log.
	msg = utcp.RedactText(msg)
	if len(msg) > maxMessage {
		cut := maxMessage
		for cut > 0 && !utf8Start(msg[cut]) {
			cut--
		}
		msg = msg[:cut] + "…"
	}
	return msg
}

var (
	discoveryFrom = regexp.MustCompile(`^([a-z_]+) discovery from (\S+): `)
	repeatedPath  = regexp.MustCompile(`(\S{4,}): (open|stat|lstat|read|GET|POST) (\S{4,})`)
)

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// Health returns the health of the manual called name, and whether the
// gateway knows it (registered, failed, or being discovered for the first
// time).
func (g *Gateway) Health(name string) (ManualHealth, bool) {
	m, registered := g.reg.Manual(name)
	t := &g.health
	t.mu.Lock()
	defer t.mu.Unlock()
	h := t.m[name]
	if !registered {
		if h == nil || h.pending == 0 {
			return ManualHealth{}, false
		}
		return ManualHealth{State: StateDiscovering}, true
	}
	return healthOf(m, h), true
}

// healthOf builds the health of the registered manual m from its record
// h (t.mu held).
func healthOf(m *registry.Manual, h *health) ManualHealth {
	out := ManualHealth{State: StateReady, ToolCount: len(m.Tools), LastSuccess: m.Refreshed}
	if h != nil && h.state != "" {
		out.State, out.LastSuccess, out.NextRetry, out.Failures = h.state, h.lastSuccess, h.nextRetry, h.failures
		if h.lastErr != nil {
			e := *h.lastErr
			out.LastError = &e
		}
	}
	if st, ok := m.Ext.(*manualState); ok && st.placeholder {
		out.State = StateFailed
	}
	return out
}

// Statuses returns every manual the gateway knows, sorted by name: the
// registered ones (failed ones included) and those whose first discovery
// is under way.
func (g *Gateway) Statuses() []ManualStatus {
	ms := g.reg.Manuals()
	t := &g.health
	t.mu.Lock()
	out := make([]ManualStatus, 0, len(ms))
	seen := make(map[string]bool, len(ms))
	for _, m := range ms {
		seen[m.Name] = true
		out = append(out, ManualStatus{Name: m.Name, Source: m.Source, Type: templateTypeOf(m), Manual: m, Health: healthOf(m, t.m[m.Name])})
	}
	extra := false
	for name, h := range t.m {
		if !seen[name] && h.pending > 0 {
			out = append(out, ManualStatus{Name: name, Source: h.source, Type: h.typ, Health: ManualHealth{State: StateDiscovering}})
			extra = true
		}
	}
	t.mu.Unlock()
	if extra {
		slices.SortFunc(out, func(a, b ManualStatus) int { return cmp.Compare(a.Name, b.Name) })
	}
	return out
}

// Status returns one manual as Statuses lists it.
func (g *Gateway) Status(name string) (ManualStatus, bool) {
	m, registered := g.reg.Manual(name)
	t := &g.health
	t.mu.Lock()
	defer t.mu.Unlock()
	h := t.m[name]
	if registered {
		return ManualStatus{Name: name, Source: m.Source, Type: templateTypeOf(m), Manual: m, Health: healthOf(m, h)}, true
	}
	if h != nil && h.pending > 0 {
		return ManualStatus{Name: name, Source: h.source, Type: h.typ, Health: ManualHealth{State: StateDiscovering}}, true
	}
	return ManualStatus{}, false
}

// Counts counts the manuals Statuses lists by state.
func (g *Gateway) Counts() HealthCounts {
	var c HealthCounts
	for _, s := range g.Statuses() {
		c.Total++
		switch s.Health.State {
		case StateReady:
			c.Ready++
		case StateDiscovering:
			c.Discovering++
		case StateFailed:
			c.Failed++
		case StateDegraded:
			c.Degraded++
		}
	}
	return c
}

// retryVariables makes the failed and degraded manuals whose last failure
// was variable_not_found due at once (the variables changed).
func (g *Gateway) retryVariables() {
	t := &g.health
	t.mu.Lock()
	defer t.mu.Unlock()
	if g.opts.Retry.Disabled {
		return
	}
	now := time.Now()
	kick := false
	for _, h := range t.m {
		if h.lastErr != nil && h.lastErr.Code == utcp.CodeVariableNotFound && (h.state == StateFailed || h.state == StateDegraded) {
			h.nextRetry = now
			kick = true
		}
	}
	if kick {
		g.kickLocked()
	}
}

// kickLocked starts the retry loop once and wakes it (t.mu held).
func (g *Gateway) kickLocked() {
	t := &g.health
	if t.wake == nil {
		t.wake = make(chan struct{}, 1)
	}
	if !t.started {
		t.started = true
		n := g.opts.Retry.Concurrency
		if n <= 0 {
			n = 4
		}
		t.sem = make(chan struct{}, n)
		wake := t.wake
		g.goBackground(func() { g.retryLoop(wake) })
	}
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// retryLoop runs the due retries until the gateway closes.
func (g *Gateway) retryLoop(wake <-chan struct{}) {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		due, next := g.dueRetries(time.Now())
		for _, d := range due {
			g.goBackground(func() { g.retryOne(d) })
		}
		var tc <-chan time.Time
		if !next.IsZero() {
			timer.Reset(time.Until(next))
			tc = timer.C
		}
		select {
		case <-g.life.Done():
			return
		case <-wake:
		case <-tc:
		}
		timer.Stop()
	}
}

// dueRetry is one retry dueRetries hands out.
type dueRetry struct {
	name string
	gen  uint64
}

// dueRetries returns the retries due at now (marked under way) and when
// the next one is due (zero: none scheduled).
func (g *Gateway) dueRetries(now time.Time) ([]dueRetry, time.Time) {
	t := &g.health
	t.mu.Lock()
	defer t.mu.Unlock()
	var due []dueRetry
	var next time.Time
	for name, h := range t.m {
		if h.nextRetry.IsZero() || h.retrying {
			continue
		}
		if !h.nextRetry.After(now) {
			h.retrying = true
			due = append(due, dueRetry{name: name, gen: h.gen})
			continue
		}
		if next.IsZero() || h.nextRetry.Before(next) {
			next = h.nextRetry
		}
	}
	return due, next
}

// retryOne makes one background attempt for d and logs its outcome: a
// recovery, or a failure that differs from the last one (the same failure
// again is logged at debug level only).
func (g *Gateway) retryOne(d dueRetry) {
	t := &g.health
	defer func() {
		t.mu.Lock()
		if h := t.m[d.name]; h != nil {
			h.retrying = false
			// An attempt whose failure was not recorded (it lost a race)
			// must not make the loop spin on a retry due in the past.
			if now := time.Now(); !h.nextRetry.IsZero() && !h.nextRetry.After(now) && g.life.Err() == nil {
				h.nextRetry = now.Add(g.opts.Retry.Backoff.Delay(max(h.failures, 1), g.opts.Retry.Rand))
			}
		}
		t.mu.Unlock()
		g.kick()
	}()
	select {
	case t.sem <- struct{}{}:
		defer func() { <-t.sem }()
	case <-g.life.Done():
		return
	}
	t.mu.Lock()
	h := t.m[d.name]
	if h == nil || h.gen != d.gen {
		t.mu.Unlock()
		return
	}
	var before *HealthError
	if h.lastErr != nil {
		e := *h.lastErr
		before = &e
	}
	t.mu.Unlock()
	timeout := g.opts.Retry.Timeout
	if timeout <= 0 {
		timeout = DefaultRetryTimeout
	}
	ctx, cancel := context.WithTimeout(g.life, timeout)
	defer cancel()
	res, err := g.refresh(ctx, d.name, d.gen)
	if g.life.Err() != nil {
		return
	}
	switch {
	case err == nil:
		g.log.Info("manual recovered", "manual", d.name, "tools", len(res.Tools))
	case errors.Is(err, errOvertaken) || utcp.CodeOf(err) == utcp.CodeManualNotFound:
	default:
		hl, _ := g.Health(d.name)
		msg := FailureMessage(d.name, err)
		args := []any{"manual", d.name, "code", utcp.CodeOf(err), "err", msg, "failures", hl.Failures}
		if !hl.NextRetry.IsZero() {
			args = append(args, "retry_in", time.Until(hl.NextRetry).Round(time.Second))
		}
		if before == nil || before.Code != utcp.CodeOf(err) || before.Message != msg {
			g.log.Warn("manual still failing", args...)
		} else {
			g.log.Debug("manual still failing", args...)
		}
	}
}

// kick wakes the retry loop when it runs.
func (g *Gateway) kick() {
	t := &g.health
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.started {
		select {
		case t.wake <- struct{}{}:
		default:
		}
	}
}

// healthGen returns the generation of name's record, 0 without one.
func (g *Gateway) healthGen(name string) uint64 {
	t := &g.health
	t.mu.Lock()
	defer t.mu.Unlock()
	if h := t.m[name]; h != nil {
		return h.gen
	}
	return 0
}

// errOvertaken reports that a retry found the manual changed since it was
// scheduled (replaced, removed, or given another template).
var errOvertaken = errors.New("the manual changed while it was being retried")

func templateTypeOf(m *registry.Manual) string {
	if m.Template == nil {
		return ""
	}
	return m.Template.Type
}

func jsonEqual(a, b json.RawMessage) bool {
	return string(a) == string(b)
}

// KeepRejected keeps a manual its source could not use as written (a
// configuration template the shared check refused before any
// discovery, sources.Wanted.Err) as a failed manual called name, as a
// failed registration with RegisterOptions.KeepFailed would: listed with
// its error and no tools, so an operator sees it. A manual already
// registered under name is left serving. err is not retried in the
// background unless it may go away by itself (retryable); a new version
// of the source replaces it.
func (g *Gateway) KeepRejected(name string, raw json.RawMessage, source string, err error) {
	if name == "" || err == nil || !keepable(err) {
		return
	}
	g.regLock.Lock()
	defer g.regLock.Unlock()
	if _, registered := g.reg.Manual(name); registered {
		return
	}
	g.addPlaceholder(name, raw, RegisterOptions{Source: source, KeepFailed: true}, err, time.Now())
}
