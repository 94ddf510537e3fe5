package audit_test

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/utcpd/utcpd/gateway/audit"
)

// TestAppendJSONMatchesMarshal checks that AppendJSON writes exactly what
// json.Marshal writes, for the records its direct path handles and for
// those it hands to encoding/json.
func TestAppendJSONMatchesMarshal(t *testing.T) {
	at := time.Date(2026, 12, 3, 14, 8, 34, 123456789, time.UTC)
	base := audit.Record{ID: 42, Time: at, Front: "rest", Principal: "agent-1", Tool: "demo.add", Qualified: "demo.add",
		Protocol: "http", Decision: "allow", Steps: []audit.Step{}, Dispatched: true, Outcome: "ok", Duration: 1234567}
	cases := map[string]func(r *audit.Record){
		"usual":     func(*audit.Record) {},
		"zero":      func(r *audit.Record) { *r = audit.Record{} },
		"nil steps": func(r *audit.Record) { r.Steps = nil },
		"steps": func(r *audit.Record) {
			r.Steps = []audit.Step{{Guard: "0:policy", Decision: "review", Reason: "needs a human"}, {Guard: "0:policy", Decision: "allow", Review: true}}
		},
		"every field": func(r *audit.Record) {
			r.Guard, r.Reason, r.ReviewID, r.Stream, r.Kind, r.Change, r.Toolset = "1:webhook", "denied", "rv_1", true, "prompt", "ch_1", "ops"
			r.Dispatched, r.Outcome, r.Duration = false, "guard_denied", -5
		},
		"zone":            func(r *audit.Record) { r.Time = at.In(time.FixedZone("x", -7*3600-30*60)) },
		"monotonic":       func(r *audit.Record) { r.Time = time.Now() },
		"year out of RFC": func(r *audit.Record) { r.Time = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) },
		"quote":           func(r *audit.Record) { r.Tool = `a"b` },
		"backslash":       func(r *audit.Record) { r.Reason = `a\b` },
		"html":            func(r *audit.Record) { r.Principal = "<a&b>" },
		"control":         func(r *audit.Record) { r.Reason = "line\nbreak\t" },
		"del":             func(r *audit.Record) { r.Reason = "\x7f" },
		"unicode":         func(r *audit.Record) { r.Tool = "données.add\u2028" },
		"invalid utf-8":   func(r *audit.Record) { r.Qualified = "\xff\xfe" },
		"step escape":     func(r *audit.Record) { r.Steps = []audit.Step{{Guard: "0:g", Decision: "deny", Reason: "<script>"}} },
		"diff":            func(r *audit.Record) { r.Diff = json.RawMessage(`[ {"tool": "a<b"} ]`) },
		"bad diff":        func(r *audit.Record) { r.Diff = json.RawMessage(`{`) },
	}
	for name, change := range cases {
		t.Run(name, func(t *testing.T) {
			r := base
			change(&r)
			want, werr := json.Marshal(&r)
			prefix := []byte("row,")
			got, gerr := audit.AppendJSON(bytes.Clone(prefix), &r)
			if (werr != nil) != (gerr != nil) {
				t.Fatalf("AppendJSON error %v, json.Marshal error %v", gerr, werr)
			}
			if werr != nil {
				if !bytes.Equal(got, prefix) {
					t.Fatalf("on error AppendJSON returned %q, want the prefix %q", got, prefix)
				}
				return
			}
			if !bytes.Equal(got, append(prefix, want...)) {
				t.Fatalf("AppendJSON:\n got %s\nwant %s%s", got, prefix, want)
			}
		})
	}
}

// BenchmarkAppendJSON measures the encoding of a usual record against
// json.Marshal.
//
//	go test -run '^$' -bench AppendJSON -benchmem ./gateway/audit/
func BenchmarkAppendJSON(b *testing.B) {
	r := audit.Record{Time: time.Now(), Front: "rest", Principal: "agent-1", Tool: "demo.add", Qualified: "demo.add",
		Protocol: "http", Decision: "allow", Steps: []audit.Step{}, Dispatched: true, Outcome: "ok", Duration: 1234567}
	b.Run("AppendJSON", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			buf, _ = audit.AppendJSON(buf[:0], &r)
		}
	})
	b.Run("json.Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = json.Marshal(&r)
		}
	})
}
