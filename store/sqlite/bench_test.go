package sqlite

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/utcpd/utcpd/gateway/audit"
	"github.com/utcpd/utcpd/registry"
	"github.com/utcpd/utcpd/registry/storetest"
	"github.com/utcpd/utcpd/utcp"
)

// benchRecord returns a record whose manual has the given number of
// realistic tools (schemas, tags, an http call template with auth).
func benchRecord(name string, tools int) *registry.Record {
	var b strings.Builder
	b.WriteString(`{"utcp_version":"1.1.0","manual_version":"1.0.0","tools":[`)
	for i := range tools {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"name":"%[1]s.tool_%[2]d","description":"Tool %[2]d of %[1]s: looks things up and returns them as JSON.",`+
			`"inputs":{"type":"object","properties":{"query":{"type":"string","description":"what to look up"},"limit":{"type":"integer","minimum":1,"maximum":100}},"required":["query"]},`+
			`"outputs":{"type":"object","properties":{"results":{"type":"array","items":{"type":"object"}}}},`+
			`"tags":["search","%[1]s","v2"],"average_response_size":2048,`+
			`"tool_call_template":{"call_template_type":"http","url":"https://api.example.com/%[1]s/tools/%[2]d","http_method":"POST","content_type":"application/json",`+
			`"headers":{"X-Client":"utcpd"},"auth":{"auth_type":"api_key","api_key":"${API_KEY}","var_name":"X-Api-Key","location":"header"}}}`, name, i)
	}
	b.WriteString(`]}`)
	var m utcp.Manual
	if err := json.Unmarshal([]byte(b.String()), &m); err != nil {
		panic(err)
	}
	rec := storetest.Record(name)
	rec.Manual = &m
	return rec
}

// BenchmarkPut measures a durable Put (one fsync'd transaction) of a
// small record under a new name each time.
func BenchmarkPut(b *testing.B) {
	s, err := Open(b.Context(), b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	rec := storetest.Record("x")
	i := 0
	for b.Loop() {
		rec.Name = fmt.Sprintf("m%09d", i)
		i++
		if err := s.Put(b.Context(), rec); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPut100Tools is BenchmarkPut with a manual of 100 tools.
func BenchmarkPut100Tools(b *testing.B) {
	s, err := Open(b.Context(), b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	rec := benchRecord("big", 100)
	i := 0
	for b.Loop() {
		rec.Name = fmt.Sprintf("m%09d", i)
		i++
		if err := s.Put(b.Context(), rec); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkList1000 lists a store of 1,000 manuals of 100 tools each, what
// the daemon restores at start.
func BenchmarkList1000(b *testing.B) {
	const manuals, tools = 1000, 100
	s, err := Open(b.Context(), b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	start := time.Now()
	for i := range manuals {
		if err := s.Put(b.Context(), benchRecord(fmt.Sprintf("manual_%04d", i), tools)); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("filled %d manuals x %d tools in %v", manuals, tools, time.Since(start).Round(time.Millisecond))
	var bytes int64
	if err := s.reader.QueryRowContext(b.Context(), `SELECT sum(length(manual)) FROM manuals`).Scan(&bytes); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(bytes)
	for b.Loop() {
		list, err := s.List(b.Context())
		if err != nil {
			b.Fatal(err)
		}
		if len(list) != manuals || len(list[manuals-1].Manual.Tools) != tools {
			b.Fatalf("List returned %d manuals", len(list))
		}
	}
}

// BenchmarkGet reads one manual of 100 tools.
func BenchmarkGet(b *testing.B) {
	s, err := Open(b.Context(), b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := s.Put(b.Context(), benchRecord("m", 100)); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := s.Get(b.Context(), "m"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeManual100 is the floor under Get and List: decoding one
// stored manual of 100 tools with encoding/json, no database involved.
func BenchmarkDecodeManual100(b *testing.B) {
	enc, err := json.Marshal(benchRecord("m", 100).Manual)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(enc)))
	for b.Loop() {
		var m utcp.Manual
		if err := json.Unmarshal(enc, &m); err != nil {
			b.Fatal(err)
		}
	}
}

// auditBenchRecord is an audit record as an unguarded REST call makes it.
func auditBenchRecord(i int) audit.Record {
	tool := fmt.Sprintf("demo.add%d", i%50)
	return audit.Record{Time: time.Now(), Front: "rest", Tool: tool, Qualified: tool, Protocol: "http",
		Decision: "allow", Reason: "no guards configured", Steps: []audit.Step{}, Dispatched: true, Outcome: "ok", Duration: 812345}
}

// BenchmarkAuditTrim measures audit_max_bytes in its steady state: with
// 100,000 records within the limit, one Trim finds nothing to delete
// (the scan summing the records' sizes is its whole cost). It reports the
// database file's bytes per record and their ratio to the records' JSON.
func BenchmarkAuditTrim(b *testing.B) {
	dir := b.TempDir()
	s, err := Open(b.Context(), dir)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const n = 100_000
	var data int64
	batch := make([]audit.Record, 0, 1000)
	for i := range n {
		r := auditBenchRecord(i)
		enc, _ := json.Marshal(&r)
		data += int64(len(enc))
		batch = append(batch, r)
		if len(batch) == cap(batch) {
			if err := s.Audit().Append(b.Context(), batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	var pages, pageSize int64
	if err := s.reader.QueryRowContext(b.Context(), "PRAGMA page_count").Scan(&pages); err != nil {
		b.Fatal(err)
	}
	if err := s.reader.QueryRowContext(b.Context(), "PRAGMA page_size").Scan(&pageSize); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if m, err := s.Audit().Trim(b.Context(), 0, data); err != nil || m != 0 {
			b.Fatal(m, err)
		}
	}
	b.ReportMetric(float64(data)/n, "json-B/record")
	b.ReportMetric(float64(pages*pageSize)/n, "file-B/record")
}

// BenchmarkAuditAppend measures one Append of a group-committed batch
// (audit.Writer with a linger window: 1, 50 or 512 records in one
// transaction) and reports the cost per record.
func BenchmarkAuditAppend(b *testing.B) {
	for _, n := range []int{1, 50, 512} {
		b.Run(fmt.Sprintf("batch-%d", n), func(b *testing.B) {
			s, err := Open(b.Context(), b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			batch := make([]audit.Record, n)
			for i := range batch {
				batch[i] = auditBenchRecord(i)
			}
			for b.Loop() {
				if err := s.Audit().Append(b.Context(), batch); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/record")
		})
	}
}
