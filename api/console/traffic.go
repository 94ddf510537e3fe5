package console

import (
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/utcpd/utcpd/gateway"
)

// The Traffic page's recorder keeps the last minutes of calls in time
// buckets: per tool the calls, the errors and a latency histogram; per
// bucket the guard decisions. Memory is bounded: trafficBuckets buckets of
// at most maxTrafficTools tools each (further tools count as "other").
const (
	trafficBucket   = 5 * time.Second
	trafficBuckets  = 180 // 15 minutes
	maxTrafficTools = 256
	otherTools      = "(other)"
	unresolvedTool  = "(unresolved)"
	// sentToReview counts the calls a guard sent to human review,
	// whatever the review decided.
	sentToReview = "sent to review"
)

// Latency histogram: bucket i holds durations up to histBase·2^(i/2),
// so a percentile is known within a factor of √2.
const (
	histBase  = 10 * time.Microsecond
	histCount = 48 // up to about 2 minutes; longer ones land in the last
)

type histogram [histCount]uint32

func histIndex(d time.Duration) int {
	if d <= histBase {
		return 0
	}
	i := int(math.Ceil(2 * math.Log2(float64(d)/float64(histBase))))
	return min(max(i, 0), histCount-1)
}

func histBound(i int) time.Duration {
	return time.Duration(float64(histBase) * math.Pow(2, float64(i)/2))
}

// quantile returns the upper bound of the bucket holding quantile q of
// the n observations in h (0 when n is 0).
func (h *histogram) quantile(q float64, n uint32) time.Duration {
	if n == 0 {
		return 0
	}
	rank := uint32(math.Ceil(q * float64(n)))
	rank = max(rank, 1)
	var seen uint32
	for i, c := range h {
		seen += c
		if seen >= rank {
			return histBound(i)
		}
	}
	return histBound(histCount - 1)
}

func (h *histogram) add(o *histogram) {
	for i := range h {
		h[i] += o[i]
	}
}

type toolStats struct {
	calls, errors, timed uint32
	hist                 histogram
}

type trafficSlot struct {
	index     int64 // unix time / trafficBucket
	tools     map[string]*toolStats
	decisions map[string]uint32
}

// Traffic records finished calls for the Traffic page. The zero value is
// not usable; create it with NewTraffic. It is safe for concurrent use.
type Traffic struct {
	mu    sync.Mutex
	slots [trafficBuckets]trafficSlot
	now   func() time.Time
}

// NewTraffic returns an empty recorder.
func NewTraffic() *Traffic { return &Traffic{now: time.Now} }

// Record counts one finished call at the current time: its tool (the
// qualified name), whether it failed (any error code, guard refusals
// included), its latency when it reached its transport, the guard
// chain's final decision, and whether it was sent to review.
func (t *Traffic) Record(rec *gateway.CallRecord) {
	if rec == nil {
		return
	}
	tool := rec.Qualified
	if tool == "" {
		tool = unresolvedTool
	}
	now := t.now()
	idx := now.UnixNano() / int64(trafficBucket)
	t.mu.Lock()
	defer t.mu.Unlock()
	s := &t.slots[idx%trafficBuckets]
	if s.index != idx || s.tools == nil {
		*s = trafficSlot{index: idx, tools: map[string]*toolStats{}, decisions: map[string]uint32{}}
	}
	ts := s.tools[tool]
	if ts == nil {
		if len(s.tools) >= maxTrafficTools {
			tool = otherTools
			ts = s.tools[tool]
		}
		if ts == nil {
			ts = &toolStats{}
			s.tools[tool] = ts
		}
	}
	ts.calls++
	if rec.Code != "" {
		ts.errors++
	}
	if rec.Dispatched {
		ts.timed++
		ts.hist[histIndex(rec.Duration)]++
	}
	if d := string(rec.Verdict.Decision); d != "" {
		s.decisions[d]++
	}
	if rec.ReviewID != "" {
		// Sent to human review (its final decision is counted above).
		s.decisions[sentToReview]++
	}
}

// ToolTraffic is one tool's figures over a snapshot's window.
type ToolTraffic struct {
	// Name is the qualified tool name.
	Name string
	// Calls and Errors count the calls; Rate is calls per second and
	// ErrorRate the share that failed.
	Calls, Errors   int
	Rate, ErrorRate float64
	// P50 and P99 are latency percentiles of the calls that reached
	// their transport (known within a factor of √2).
	P50, P99 time.Duration
	// Series is calls per second in every bucket, oldest first.
	Series []float64
}

// TrafficSnapshot is the recorder's view of a window: per-bucket series
// (oldest first) and per-tool figures, busiest tool first.
type TrafficSnapshot struct {
	// Window is the span covered, Bucket a point's width, End the end
	// of the newest bucket.
	Window, Bucket time.Duration
	End            time.Time
	// Calls, Errors, Rate and ErrorRate are the totals over the window.
	Calls, Errors   int
	Rate, ErrorRate float64
	// P50 and P99 are the latency percentiles over the window.
	P50, P99 time.Duration
	// CallRate, ErrorShare, P50s and P99s are per bucket: calls per
	// second, the share of failed calls (NaN without calls), and
	// latency percentiles in milliseconds (NaN without timed calls).
	CallRate, ErrorShare, P50s, P99s []float64
	// Tools are the tools with calls in the window, most calls first.
	Tools []ToolTraffic
	// Decisions counts the guard chain's final decisions (allow, deny,
	// review, error) over the window, and under "sent to review" the
	// calls that waited for a human review.
	Decisions map[string]int
}

// Snapshot returns the figures of the last window (at most the recorder's
// 15 minutes, at least one bucket).
func (t *Traffic) Snapshot(window time.Duration) TrafficSnapshot {
	n := int(window / trafficBucket)
	n = min(max(n, 1), trafficBuckets)
	now := t.now()
	last := now.UnixNano() / int64(trafficBucket)
	snap := TrafficSnapshot{Window: time.Duration(n) * trafficBucket, Bucket: trafficBucket,
		End: time.Unix(0, (last+1)*int64(trafficBucket)), Decisions: map[string]int{}}
	type acc struct {
		toolStats
		series []float64
	}
	tools := map[string]*acc{}
	var total histogram
	var totalTimed uint32
	sec := trafficBucket.Seconds()
	t.mu.Lock()
	for k := 0; k < n; k++ {
		idx := last - int64(n-1-k)
		s := &t.slots[((idx%trafficBuckets)+trafficBuckets)%trafficBuckets]
		var calls, errs, timed uint32
		var bh histogram
		if s.index == idx && s.tools != nil {
			for name, ts := range s.tools {
				a := tools[name]
				if a == nil {
					a = &acc{series: make([]float64, n)}
					tools[name] = a
				}
				a.calls += ts.calls
				a.errors += ts.errors
				a.timed += ts.timed
				a.hist.add(&ts.hist)
				a.series[k] = float64(ts.calls) / sec
				calls += ts.calls
				errs += ts.errors
				timed += ts.timed
				bh.add(&ts.hist)
			}
			for d, c := range s.decisions {
				snap.Decisions[d] += int(c)
			}
		}
		snap.CallRate = append(snap.CallRate, float64(calls)/sec)
		share, p50, p99 := math.NaN(), math.NaN(), math.NaN()
		if calls > 0 {
			share = float64(errs) / float64(calls)
		}
		if timed > 0 {
			p50 = ms(bh.quantile(0.5, timed))
			p99 = ms(bh.quantile(0.99, timed))
		}
		snap.ErrorShare = append(snap.ErrorShare, share)
		snap.P50s = append(snap.P50s, p50)
		snap.P99s = append(snap.P99s, p99)
		snap.Calls += int(calls)
		snap.Errors += int(errs)
		total.add(&bh)
		totalTimed += timed
	}
	t.mu.Unlock()
	span := snap.Window.Seconds()
	snap.Rate = float64(snap.Calls) / span
	if snap.Calls > 0 {
		snap.ErrorRate = float64(snap.Errors) / float64(snap.Calls)
	}
	snap.P50, snap.P99 = total.quantile(0.5, totalTimed), total.quantile(0.99, totalTimed)
	for name, a := range tools {
		tt := ToolTraffic{Name: name, Calls: int(a.calls), Errors: int(a.errors), Rate: float64(a.calls) / span,
			P50: a.hist.quantile(0.5, a.timed), P99: a.hist.quantile(0.99, a.timed), Series: a.series}
		if a.calls > 0 {
			tt.ErrorRate = float64(a.errors) / float64(a.calls)
		}
		snap.Tools = append(snap.Tools, tt)
	}
	slices.SortFunc(snap.Tools, func(a, b ToolTraffic) int {
		if a.Calls != b.Calls {
			return b.Calls - a.Calls
		}
		return strings.Compare(a.Name, b.Name)
	})
	return snap
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
