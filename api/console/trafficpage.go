package console

import (
	"encoding/json"
	"html/template"
	"net/http"
	"strconv"
	"time"

	"github.com/utcpd/utcpd/api/httpx"
	"github.com/utcpd/utcpd/utcp"
)

// Live traffic: the panel is sent again every trafficTick; a stream ends
// after maxStreamAge (the browser's EventSource reconnects) or when its
// session ends.
const (
	trafficTick  = 2 * time.Second
	maxStreamAge = time.Hour
	topTools     = 5
)

// windows are the spans the Traffic page offers.
var windows = []time.Duration{time.Minute, 5 * time.Minute, 15 * time.Minute}

type trafficData struct {
	Window  time.Duration
	Windows []time.Duration
	Panel   template.HTML
}

// panelData is what the "panel" template draws.
type panelData struct {
	S         TrafficSnapshot
	CallChart template.HTML
	ErrChart  template.HTML
	LatChart  template.HTML
	Decisions template.HTML
	Tools     []toolLine
	Top       []ToolTraffic
}

type toolLine struct {
	ToolTraffic
	Spark template.HTML
}

func windowOf(r *http.Request) time.Duration {
	if d, err := time.ParseDuration(r.URL.Query().Get("window")); err == nil {
		for _, w := range windows {
			if d == w {
				return d
			}
		}
	}
	return 5 * time.Minute
}

// panel renders the traffic panel of the window.
func (c *Console) panel(window time.Duration) (template.HTML, error) {
	s := c.traffic.Snapshot(window)
	d := panelData{S: s}
	calls := []chartSeries{{Name: "all tools", Points: s.CallRate}}
	for i, t := range s.Tools {
		if i == topTools {
			break
		}
		calls = append(calls, chartSeries{Name: t.Name, Points: t.Series})
		d.Top = append(d.Top, t)
	}
	d.CallChart = lineChart("calls per second", "/s", s.Window, 1, calls)
	d.ErrChart = lineChart("error rate", "%", s.Window, 1, []chartSeries{{Name: "", Points: s.ErrorShare}})
	d.LatChart = lineChart("latency", "ms", s.Window, 1, []chartSeries{{Name: "p50", Points: s.P50s}, {Name: "p99", Points: s.P99s}})
	bars := make([]bar, 0, 5)
	for _, dec := range []string{"allow", "deny", "error", "review"} {
		bars = append(bars, bar{Label: dec, Value: s.Decisions[dec], Class: "d-" + dec})
	}
	bars = append(bars, bar{Label: "reviewed", Value: s.Decisions[sentToReview], Class: "d-review"})
	d.Decisions = barChart("guard decisions", bars)
	for _, t := range s.Tools {
		d.Tools = append(d.Tools, toolLine{ToolTraffic: t, Spark: sparkline(t.Series)})
	}
	buf := httpx.GetBuffer()
	defer httpx.PutBuffer(buf)
	if err := c.pages["traffic"].ExecuteTemplate(buf, "panel", d); err != nil {
		return "", err
	}
	return template.HTML(buf.String()), nil // rendered by html/template
}

func (c *Console) trafficPage(w http.ResponseWriter, r *http.Request) {
	win := windowOf(r)
	p, err := c.panel(win)
	if err != nil {
		c.renderError(w, r, nil, httpx.Errorf(utcp.CodeInternal, "rendering the traffic panel: %w", err))
		return
	}
	c.render(w, r, http.StatusOK, "traffic", page{Title: "Traffic", Nav: "traffic", Data: trafficData{Window: win, Windows: windows, Panel: p}})
}

// trafficEvents streams the traffic panel as server-sent events: an
// event "panel" with {"html": ...} at once and every trafficTick. At
// most maxLiveStreams run at once (503 beyond). A stream ends when the
// page goes away, its session ends, after maxStreamAge, or when the
// http.Server serving it shuts down (so an open Traffic page does not hold
// up a graceful shutdown).
func (c *Console) trafficEvents(w http.ResponseWriter, r *http.Request) {
	select {
	case c.streams <- struct{}{}:
		defer func() { <-c.streams }()
	default:
		httpx.WriteError(w, httpx.Errorf(utcp.CodeUnavailable, "too many live traffic views are open (at most %d)", maxLiveStreams))
		return
	}
	s := sessionFrom(r.Context())
	win := windowOf(r)
	stopping := c.shutdownOf(r)
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	send := func() bool {
		p, err := c.panel(win)
		if err != nil {
			c.log.Error("console: rendering the traffic panel", "err", err)
			return false
		}
		data, err := json.Marshal(map[string]string{"html": string(p)})
		if err != nil {
			return false
		}
		if _, err := w.Write([]byte("event: panel\nid: " + strconv.FormatInt(time.Now().UnixMilli(), 10) + "\ndata: ")); err != nil {
			return false
		}
		if _, err := w.Write(append(data, '\n', '\n')); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !send() {
		return
	}
	tick := time.NewTicker(trafficTick)
	defer tick.Stop()
	end := time.NewTimer(maxStreamAge)
	defer end.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-end.C:
			return
		case <-stopping:
			return // the server is shutting down: do not hold it up
		case <-tick.C:
			if s != nil && !c.sessions.alive(s) {
				return // logged out or expired
			}
			if !send() {
				return
			}
		}
	}
}

// shutdownOf returns a channel closed when the http.Server serving r
// shuts down (nil, never closed, when r names none). One channel per
// server, registered with it once.
func (c *Console) shutdownOf(r *http.Request) <-chan struct{} {
	srv, _ := r.Context().Value(http.ServerContextKey).(*http.Server)
	if srv == nil {
		return nil
	}
	c.shutMu.Lock()
	defer c.shutMu.Unlock()
	ch, ok := c.shutdowns[srv]
	if !ok {
		ch = make(chan struct{})
		c.shutdowns[srv] = ch
		srv.RegisterOnShutdown(func() { close(ch) })
	}
	return ch
}
