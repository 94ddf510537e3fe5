package console

import (
	"bytes"
	"encoding/json"
	"html/template"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/guard"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/utcp"
)

// shape is a field tree reduced to what the form shows.
type shape struct {
	Kind, Name string
	Required   bool
	Desc       string
	Options    []string
	Fields     []shape
	Item       *shape
	Open       bool
	Value      string
}

func shapeOf(f *field) shape {
	s := shape{Kind: f.Kind, Name: f.Name, Required: f.Required, Desc: f.Description, Open: f.Open, Value: f.Value}
	for _, o := range f.Options {
		s.Options = append(s.Options, o.Value)
	}
	for _, c := range f.Fields {
		s.Fields = append(s.Fields, shapeOf(c))
	}
	if f.Item != nil {
		it := shapeOf(f.Item)
		s.Item = &it
	}
	return s
}

// TestBuildForm: a field per property in schema order, of the kind its
// type asks for, with required marks, descriptions, defaults and enums;
// arrays with their item; nested objects; local $refs followed; what the
// form cannot express is a JSON field.
func TestBuildForm(t *testing.T) {
	schema := `{
	  "type": "object",
	  "required": ["query", "limit", "mode"],
	  "$defs": {"point": {"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "number"}}, "required": ["x"]}},
	  "properties": {
	    "query": {"type": "string", "description": "what to look for"},
	    "limit": {"type": "integer", "minimum": 1, "maximum": 50, "default": 10},
	    "ratio": {"type": ["number", "null"]},
	    "exact": {"type": "boolean"},
	    "mode": {"enum": ["fast", "slow", 3]},
	    "tags": {"type": "array", "items": {"type": "string"}},
	    "where": {"$ref": "#/$defs/point"},
	    "path": {"type": "array", "items": {"$ref": "#/$defs/point"}, "minItems": 2},
	    "extra": {"type": "object"},
	    "either": {"anyOf": [{"type": "string"}, {"type": "number"}]},
	    "fixed": {"const": "v1"},
	    "loop": {"$ref": "#/properties/loop"},
	    "closed": {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": false},
	    "never": false
	  }
	}`
	got := shapeOf(buildForm(json.RawMessage(schema)))
	point := shape{Kind: kindObject, Fields: []shape{{Kind: kindNumber, Name: "x", Required: true}, {Kind: kindNumber, Name: "y"}}}
	pointItem := point
	pointItem.Required = true
	whereField := point
	whereField.Name = "where"
	want := shape{Kind: kindObject, Name: "arguments", Required: true, Fields: []shape{
		{Kind: kindString, Name: "query", Required: true, Desc: "what to look for"},
		{Kind: kindInteger, Name: "limit", Required: true, Value: "10"},
		{Kind: kindNumber, Name: "ratio"},
		{Kind: kindBoolean, Name: "exact"},
		{Kind: kindEnum, Name: "mode", Required: true, Options: []string{`"fast"`, `"slow"`, `3`}},
		{Kind: kindArray, Name: "tags", Item: &shape{Kind: kindString, Required: true}},
		whereField,
		{Kind: kindArray, Name: "path", Item: &pointItem},
		{Kind: kindObject, Name: "extra", Open: true},
		{Kind: kindJSON, Name: "either"},
		{Kind: kindEnum, Name: "fixed", Options: []string{`"v1"`}},
		{Kind: kindJSON, Name: "loop", Desc: "a schema reference the form cannot follow; type the value as JSON"},
		{Kind: kindObject, Name: "closed", Fields: []shape{{Kind: kindString, Name: "a"}}},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("form (-want +got):\n%s", diff)
	}
	f := buildForm(json.RawMessage(schema))
	if f.Fields[7].MinItems != 2 || f.Fields[1].Min != "1" || f.Fields[1].Max != "50" || f.Fields[1].Step != "1" || !f.Fields[2].Nullable {
		t.Errorf("bounds: %+v %+v", f.Fields[7], f.Fields[1])
	}

	for _, bad := range []string{``, `true`, `{"type": "string"}`, `{not json`, `[]`} {
		f := buildForm(json.RawMessage(bad))
		if bad == `` {
			if f.Kind != kindObject || !f.Open {
				t.Errorf("no schema: %+v", shapeOf(f))
			}
			continue
		}
		if f.Kind != kindJSON {
			t.Errorf("%s: %+v, want a JSON field", bad, shapeOf(f))
		}
	}
}

// TestBuildFormBounded: a deep or huge schema makes a bounded form.
func TestBuildFormBounded(t *testing.T) {
	deep := strings.Repeat(`{"type": "object", "properties": {"n": `, 50) + `{"type": "string"}` + strings.Repeat(`}}`, 50)
	f := buildForm(json.RawMessage(deep))
	depth := 0
	for f.Kind == kindObject && len(f.Fields) > 0 {
		f = f.Fields[0]
		depth++
	}
	if depth > maxFormDepth || f.Kind != kindJSON {
		t.Errorf("depth %d, leaf %s", depth, f.Kind)
	}
	var props []string
	for i := 0; i < 2000; i++ {
		props = append(props, `"p`+strings.Repeat("x", i%7)+string(rune('a'+i%26))+`_`+itoa(i)+`": {"type": "string"}`)
	}
	f = buildForm(json.RawMessage(`{"type": "object", "properties": {` + strings.Join(props, ",") + `}}`))
	leaves := 0
	for _, c := range f.Fields {
		if c.Kind == kindString {
			leaves++
		}
	}
	if len(f.Fields) != 2000 || leaves > maxFormFields {
		t.Errorf("%d fields, %d of them full string inputs", len(f.Fields), leaves)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func mustGateway(t *testing.T) *gateway.Gateway {
	t.Helper()
	g, err := gateway.New(gateway.Options{Transports: transports.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	return g
}

// TestFormTemplate: the rendered form escapes schema text and carries
// what the script reads (data-kind, data-name, data-required).
func TestFormTemplate(t *testing.T) {
	c, err := New(Options{Gateway: mustGateway(t)})
	if err != nil {
		t.Fatal(err)
	}
	f := buildForm(json.RawMessage(`{"type": "object", "required": ["q"], "properties": {
	  "q": {"type": "string", "description": "<script>alert(1)</script>"},
	  "items": {"type": "array", "items": {"type": "object", "properties": {"id": {"type": "integer"}}}},
	  "\"><img src=x>": {"type": "boolean"}}}`))
	var buf bytes.Buffer
	if err := c.pages["tool"].ExecuteTemplate(&buf, "field", f); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{`data-kind="string" data-name="q" data-required="true"`, `&lt;script&gt;alert(1)&lt;/script&gt;`,
		`<template class="item-template"><li class="item"><fieldset class="field" data-kind="object" data-name="" data-required="true">`,
		`data-kind="integer" data-name="id"`, `data-name="&#34;&gt;&lt;img src=x&gt;"`} {
		if !strings.Contains(out, want) {
			t.Errorf("the form has no %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "<script>") || strings.Contains(out, "<img src=x>") {
		t.Errorf("schema text is not escaped:\n%s", out)
	}
}

// TestSessions: sessions expire (lifetime and idle), are bounded (the
// least recently used goes first), and are found only by their id.
func TestSessions(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	s := newSessions(2, time.Hour, 10*time.Minute)
	s.now = func() time.Time { return now }
	a, ida := s.create()
	now = now.Add(time.Minute)
	_, idb := s.create()
	now = now.Add(time.Minute)
	if s.get(ida) != a {
		t.Fatal("a is not found")
	}
	now = now.Add(time.Minute)
	_, idc := s.create() // evicts b, the least recently used
	if s.get(idb) != nil || s.get(ida) == nil || s.get(idc) == nil || s.len() != 2 {
		t.Fatalf("eviction: b %v, a %v, c %v, %d", s.get(idb) != nil, s.get(ida) != nil, s.get(idc) != nil, s.len())
	}
	if s.get(ida+"x") != nil || s.get("") != nil || s.get(strings.Repeat("a", 1000)) != nil {
		t.Fatal("a wrong id finds a session")
	}
	now = now.Add(11 * time.Minute) // idle
	if s.get(ida) != nil || s.get(idc) != nil {
		t.Fatal("idle sessions live on")
	}
	d, idd := s.create()
	for i := 0; i < 6; i++ {
		now = now.Add(9 * time.Minute)
		if s.get(idd) == nil {
			t.Fatalf("an active session ended after %d steps", i)
		}
	}
	now = now.Add(9 * time.Minute) // over an hour since login
	if s.get(idd) != nil || s.alive(d) {
		t.Fatal("a session outlived its lifetime")
	}
	if a.csrf == d.csrf || len(a.csrf) < 40 || ida == idd {
		t.Fatal("tokens repeat")
	}
}

// TestLocated: a pasted template's JSON errors name line and column.
func TestLocated(t *testing.T) {
	for _, c := range []struct {
		text, want string
	}{
		{"{\"a\": 1,}", "pasted template:1:9: malformed JSON"},
		{"\n\n  {\n  \"a\": tru\n}", "pasted template:4:11: malformed JSON"},
		{"{\"a\":\n 1", "pasted template:2:3: malformed JSON: the body ends early"},
	} {
		_, err := pastedTemplate(c.text, "")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.text, err, c.want)
		}
	}
	if _, err := pastedTemplate(`{"name": "a", "call_template_type": "http"}`, "b"); err != nil {
		t.Fatal(err)
	}
	raw, _ := pastedTemplate(`{"name": "a", "call_template_type": "http"}`, "b")
	if templateName(raw) != "b" {
		t.Errorf("the name field does not override: %s", raw)
	}
}

// TestURLTemplate builds the template of the URL form per type.
func TestURLTemplate(t *testing.T) {
	raw, err := urlTemplate("http://127.0.0.1:8081/utcp", "http", "")
	if err != nil || string(raw) != `{"call_template_type":"http","http_method":"GET","name":"127_0_0_1","url":"http://127.0.0.1:8081/utcp"}` {
		t.Errorf("http: %s %v", raw, err)
	}
	raw, err = urlTemplate("https://mcp.example.com/mcp", "mcp", "tools")
	if err != nil || string(raw) != `{"call_template_type":"mcp","config":{"mcpServers":{"tools":{"url":"https://mcp.example.com/mcp"}}},"name":"tools"}` {
		t.Errorf("mcp: %s %v", raw, err)
	}
	for _, bad := range [][2]string{{"", "http"}, {"ftp://x/y", "http"}, {"http:///nohost", "http"}, {"http://x", "cli"}} {
		if _, err := urlTemplate(bad[0], bad[1], ""); utcp.CodeOf(err) != utcp.CodeInvalidRequest {
			t.Errorf("%v: %v", bad, err)
		}
	}
}

// TestTrafficSnapshot: per-tool counts, error rates and latency
// percentiles over the window; old buckets drop out; tools beyond the
// bound count as other.
func TestTrafficSnapshot(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	tr := NewTraffic()
	tr.now = func() time.Time { return now }
	rec := func(tool string, d time.Duration, code utcp.Code, dec guard.Decision) {
		tr.Record(&gateway.CallRecord{Qualified: tool, Duration: d, Code: code, Dispatched: code != utcp.CodeGuardDenied, Verdict: guard.Verdict{Decision: dec}})
	}
	for i := 0; i < 98; i++ {
		rec("m.fast", time.Millisecond, "", guard.Allow)
	}
	rec("m.fast", 900*time.Millisecond, "", guard.Allow)
	rec("m.fast", time.Millisecond, utcp.CodeToolError, guard.Allow)
	rec("m.slow", 2*time.Second, "", guard.Allow)
	rec("m.denied", 0, utcp.CodeGuardDenied, guard.Deny)
	rec("", 0, utcp.CodeToolNotFound, guard.Allow)
	tr.Record(&gateway.CallRecord{Qualified: "m.fast", Duration: time.Millisecond, Dispatched: true, ReviewID: "rv_1", Verdict: guard.Verdict{Decision: guard.Allow}})
	s := tr.Snapshot(time.Minute)
	if s.Calls != 104 || s.Errors != 3 || s.Decisions["allow"] != 103 || s.Decisions["deny"] != 1 || s.Decisions[sentToReview] != 1 {
		t.Fatalf("totals: %d calls, %d errors, %v", s.Calls, s.Errors, s.Decisions)
	}
	if len(s.Tools) != 4 || s.Tools[0].Name != "m.fast" || s.Tools[0].Calls != 101 || s.Tools[0].Errors != 1 {
		t.Fatalf("tools: %+v", s.Tools)
	}
	fast := s.Tools[0]
	if fast.P50 < time.Millisecond || fast.P50 > 1500*time.Microsecond || fast.P99 < time.Millisecond || fast.P99 > 1500*time.Microsecond {
		t.Errorf("fast p50 %v p99 %v, want about 1ms", fast.P50, fast.P99)
	}
	if math.Abs(fast.ErrorRate-1.0/101) > 1e-9 || math.Abs(fast.Rate-101.0/60) > 1e-9 {
		t.Errorf("fast rates %v %v", fast.ErrorRate, fast.Rate)
	}
	if s.Tools[1].Name == "m.slow" && (s.Tools[1].P50 < 2*time.Second || s.Tools[1].P50 > 3*time.Second) {
		t.Errorf("slow p50 %v", s.Tools[1].P50)
	}
	if len(s.CallRate) != 12 || s.CallRate[11] != 104.0/5 || !math.IsNaN(s.ErrorShare[0]) || !math.IsNaN(s.P50s[0]) {
		t.Errorf("series: %v %v", s.CallRate, s.ErrorShare)
	}
	// Two minutes on, the one-minute window is empty, the five-minute
	// one is not.
	now = now.Add(2 * time.Minute)
	if s := tr.Snapshot(time.Minute); s.Calls != 0 || len(s.Tools) != 0 {
		t.Errorf("the window kept old calls: %d", s.Calls)
	}
	if s := tr.Snapshot(5 * time.Minute); s.Calls != 104 {
		t.Errorf("five minutes: %d", s.Calls)
	}
	// Fifteen minutes on, the slot is reused.
	now = now.Add(15 * time.Minute)
	rec("m.new", time.Millisecond, "", guard.Allow)
	if s := tr.Snapshot(15 * time.Minute); s.Calls != 1 {
		t.Errorf("after the ring wrapped: %d calls", s.Calls)
	}
	for i := 0; i < maxTrafficTools+10; i++ {
		rec("m.t"+itoa(i), time.Millisecond, "", guard.Allow)
	}
	s = tr.Snapshot(time.Minute)
	if len(s.Tools) != maxTrafficTools+1 || s.Calls != maxTrafficTools+11 {
		t.Errorf("bounded tools: %d tools, %d calls", len(s.Tools), s.Calls)
	}
}

// TestCharts: charts escape their labels, break lines at missing values
// and draw with classes only (no inline style).
func TestCharts(t *testing.T) {
	nan := math.NaN()
	svg := string(lineChart(`calls <&>`, "/s", 5*time.Minute, 1, []chartSeries{
		{Name: `<script>alert(1)</script>`, Points: []float64{1, 2, nan, 3, 4, nan, 5}},
		{Name: "b", Points: []float64{0.5}},
	}))
	if strings.Contains(svg, "<script>") || !strings.Contains(svg, "&lt;script&gt;") || !strings.Contains(svg, "calls &lt;&amp;&gt;") {
		t.Errorf("labels are not escaped: %s", svg)
	}
	if n := strings.Count(svg, "<polyline"); n != 2 {
		t.Errorf("%d polylines, want 2 (a gap at each NaN)", n)
	}
	if n := strings.Count(svg, "<circle"); n != 2 {
		t.Errorf("%d dots, want 2 (the lone 5 and b's one point)", n)
	}
	if strings.Contains(svg, "style=") || !strings.Contains(svg, ">5/s<") || !strings.Contains(svg, ">-5m<") || !strings.Contains(svg, ">now<") {
		t.Errorf("axes: %s", svg)
	}
	pct := string(lineChart("errors", "%", time.Minute, 1, []chartSeries{{Points: []float64{0.25, 0.5}}}))
	if !strings.Contains(pct, ">100%<") || !strings.Contains(pct, ">50%<") {
		t.Errorf("percent axis: %s", pct)
	}
	bars := string(barChart("d", []bar{{Label: "<b>", Value: 3, Class: "d-allow"}, {Label: "deny", Value: 0, Class: "d-deny"}}))
	if strings.Contains(bars, "<b>") || !strings.Contains(bars, `width="360.0"`) || !strings.Contains(bars, `width="0.0"`) {
		t.Errorf("bars: %s", bars)
	}
	if sp := string(sparkline([]float64{0, 0})); !strings.Contains(sp, `class="grid"`) {
		t.Errorf("an empty sparkline: %s", sp)
	}
	var _ template.HTML = sparkline(nil)
}
