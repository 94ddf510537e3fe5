package utcpmanual_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/utcpd/utcpd/api/utcpmanual"
	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/manuals"
	"github.com/utcpd/utcpd/transports"
	utcphttp "github.com/utcpd/utcpd/transports/http"
	"github.com/utcpd/utcpd/utcp"
)

type manualDoc struct {
	UTCPVersion   string          `json:"utcp_version"`
	ManualVersion string          `json:"manual_version"`
	Tools         []manualToolDoc `json:"tools"`
}

type manualToolDoc struct {
	Name             string          `json:"name"`
	Description      string          `json:"description"`
	Tags             []string        `json:"tags"`
	Inputs           json.RawMessage `json:"inputs"`
	Outputs          json.RawMessage `json:"outputs"`
	AverageSize      *int            `json:"average_response_size"`
	ToolCallTemplate map[string]any  `json:"tool_call_template"`
}

func (m manualDoc) tool(t *testing.T, name string) manualToolDoc {
	t.Helper()
	for _, tl := range m.Tools {
		if tl.Name == name {
			return tl
		}
	}
	t.Fatalf("no tool %q in the manual", name)
	return manualToolDoc{}
}

// TestManual checks the manual's shape: UTCP v1.1's keys only, every
// tool under its qualified name with its own description, tags and
// schemas, an http template pointing back at the call route with the
// api_key auth as a variable reference, and no key anywhere.
func TestManual(t *testing.T) {
	e := newEnv(t, envOptions{keys: []string{apiKey}})
	r := e.do("GET", "/utcp", apiKey, "", nil)
	if r.status != http.StatusOK || r.header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /utcp: %s", r)
	}
	if strings.Contains(string(r.body), apiKey) {
		t.Fatal("the manual shows the API key")
	}
	var top map[string]json.RawMessage
	decode(t, r.body, &top)
	var keys []string
	for k := range top {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if diff := cmp.Diff([]string{"manual_version", "tools", "utcp_version"}, keys); diff != "" {
		t.Errorf("top-level keys (-want +got):\n%s", diff)
	}
	var m manualDoc
	decode(t, r.body, &m)
	if m.UTCPVersion != utcp.Version || !strings.HasPrefix(m.ManualVersion, "1.0.0+") {
		t.Errorf("versions %q %q", m.UTCPVersion, m.ManualVersion)
	}
	var names []string
	for _, tl := range m.Tools {
		names = append(names, tl.Name)
	}
	want := []string{"demo.add", "demo.count", "demo.echo", "demo.fail", "demo.sleep", "typed.crash", "typed.echo", "typed.odd", "typed.plain", "typed.we ird/$HOME{x}"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
	echo := m.tool(t, "typed.echo")
	if echo.Description != "Echo returns its typed arguments <unchanged> & whole." || !slices.Equal(echo.Tags, []string{"typed"}) ||
		echo.AverageSize == nil || *echo.AverageSize != 64 {
		t.Errorf("typed.echo: %+v", echo)
	}
	var in map[string]any
	decode(t, echo.Inputs, &in)
	if _, ok := in["$defs"]; !ok || in["properties"].(map[string]any)["count"].(map[string]any)["type"] != "integer" {
		t.Errorf("typed.echo inputs: %s", echo.Inputs)
	}
	wantTmpl := map[string]any{
		"call_template_type": "http", "http_method": "POST", "content_type": "application/json",
		"url": e.url + "/utcp/call/typed.echo", "body_field": "config",
		"headers": map[string]any{"Content-Type": "application/json"},
		"auth":    map[string]any{"auth_type": "api_key", "api_key": "Bearer ${UTCPD_API_KEY}", "var_name": "Authorization", "location": "header"},
	}
	if diff := cmp.Diff(wantTmpl, echo.ToolCallTemplate); diff != "" {
		t.Errorf("typed.echo template (-want +got):\n%s", diff)
	}
	for name, field := range map[string]string{"typed.plain": "_body", "demo.add": "body", "typed.odd": "body"} {
		if got := m.tool(t, name).ToolCallTemplate["body_field"]; got != field {
			t.Errorf("%s body_field %v, want %s", name, got, field)
		}
	}
	// A tool without tags lists [], not null; a schema the TypeScript
	// client's model would refuse is made acceptable.
	plain := m.tool(t, "typed.plain")
	if plain.Tags == nil || string(plain.Outputs) != "{}" {
		t.Errorf("typed.plain: tags %v outputs %s", plain.Tags, plain.Outputs)
	}
	var odd map[string]any
	decode(t, m.tool(t, "typed.odd").Inputs, &odd)
	wantOdd := map[string]any{"type": "object", "required": []any{"any"}, "properties": map[string]any{
		"any": map[string]any{}, "never": map[string]any{"not": map[string]any{}}, "x": map[string]any{"type": "integer"}}}
	if diff := cmp.Diff(wantOdd, odd); diff != "" {
		t.Errorf("typed.odd inputs (-want +got):\n%s", diff)
	}
	// HEAD answers like GET, without a body.
	if r := e.do("HEAD", "/utcp", apiKey, "", nil); r.status != http.StatusOK || len(r.body) != 0 || r.header.Get("ETag") == "" {
		t.Errorf("HEAD /utcp: %s %v", r, r.header)
	}
}

// TestManualOpen checks that an open gateway's templates carry no auth.
func TestManualOpen(t *testing.T) {
	e := newEnv(t, envOptions{})
	r := e.do("GET", "/utcp", "", "", nil)
	var m manualDoc
	decode(t, r.body, &m)
	if r.status != http.StatusOK || len(m.Tools) == 0 {
		t.Fatalf("GET /utcp: %s", r)
	}
	for _, tl := range m.Tools {
		if _, ok := tl.ToolCallTemplate["auth"]; ok {
			t.Errorf("%s carries auth on an open gateway", tl.Name)
		}
	}
}

// TestAuth checks that both routes need a valid key when keys are set.
func TestAuth(t *testing.T) {
	e := newEnv(t, envOptions{keys: []string{apiKey}})
	for _, key := range []string{"", "wrong"} {
		expectError(t, e.do("GET", "/utcp", key, "", nil), http.StatusUnauthorized, utcp.CodeUnauthorized)
		expectError(t, e.do("POST", "/utcp/call/typed.echo?count=1", key, "", nil), http.StatusUnauthorized, utcp.CodeUnauthorized)
	}
	if len(e.recs()) != 0 {
		t.Errorf("refused requests reached the gateway: %+v", e.recs())
	}
}

// TestManualETag checks ETag and If-None-Match, and that the manual
// follows the tool set.
func TestManualETag(t *testing.T) {
	e := newEnv(t, envOptions{keys: []string{apiKey}})
	r := e.do("GET", "/utcp", apiKey, "", nil)
	etag := r.header.Get("ETag")
	if r.status != http.StatusOK || !strings.HasPrefix(etag, `"`) || strings.HasPrefix(etag, "W/") {
		t.Fatalf("GET /utcp: %s, ETag %q", r, etag)
	}
	if cc := r.header.Get("Cache-Control"); cc != "private, no-cache" {
		t.Errorf("Cache-Control %q", cc)
	}
	if again := e.do("GET", "/utcp", apiKey, "", nil); again.header.Get("ETag") != etag || string(again.body) != string(r.body) {
		t.Errorf("a second GET differs: %q vs %q", again.header.Get("ETag"), etag)
	}
	for _, inm := range []string{etag, "W/" + etag, `"other", ` + etag, "*"} {
		nm := e.do("GET", "/utcp", apiKey, "", map[string]string{"If-None-Match": inm})
		if nm.status != http.StatusNotModified || len(nm.body) != 0 || nm.header.Get("ETag") != etag {
			t.Errorf("If-None-Match %s: %s, ETag %q", inm, nm, nm.header.Get("ETag"))
		}
	}
	if r := e.do("GET", "/utcp", apiKey, "", map[string]string{"If-None-Match": `"stale"`}); r.status != http.StatusOK {
		t.Errorf("a stale tag: %s", r)
	}
	var before manualDoc
	decode(t, r.body, &before)

	// Another manual: the old tag no longer matches and the tool shows.
	e.register(`{"name":"more","call_template_type":"typed"}`)
	r2 := e.do("GET", "/utcp", apiKey, "", map[string]string{"If-None-Match": etag})
	if r2.status != http.StatusOK || r2.header.Get("ETag") == etag {
		t.Fatalf("after a change: %d, ETag %q", r2.status, r2.header.Get("ETag"))
	}
	var after manualDoc
	decode(t, r2.body, &after)
	after.tool(t, "more.echo")
	if after.ManualVersion == before.ManualVersion {
		t.Errorf("manual_version stayed %q", after.ManualVersion)
	}
	// And it goes again when the manual leaves.
	if err := e.g.DeregisterManual(t.Context(), "more"); err != nil {
		t.Fatal(err)
	}
	if r3 := e.do("GET", "/utcp", apiKey, "", nil); r3.header.Get("ETag") != etag || string(r3.body) != string(r.body) {
		t.Errorf("after deregistering: ETag %q, want %q", r3.header.Get("ETag"), etag)
	}
}

// TestPublicURL checks that a configured public URL replaces the
// request's address, and that a bad one is refused.
func TestPublicURL(t *testing.T) {
	e := newEnv(t, envOptions{publicURL: "https://tools.example.com/gw/"})
	var m manualDoc
	decode(t, e.do("GET", "/utcp", "", "", nil).body, &m)
	if got := m.tool(t, "demo.add").ToolCallTemplate["url"]; got != "https://tools.example.com/gw/utcp/call/demo.add" {
		t.Errorf("url %v", got)
	}
	for _, bad := range []string{"tools.example.com", "ftp://x", "https://x/?a=1", "https://u:p@x", "https://x/${V}", "http://", "https://x/#f"} {
		if _, err := utcpmanual.New(utcpmanual.Options{Gateway: e.g, PublicURL: bad}); err == nil {
			t.Errorf("public URL %q accepted", bad)
		}
	}
	if _, err := utcpmanual.New(utcpmanual.Options{}); err == nil {
		t.Error("no gateway accepted")
	}
}

// TestCallTyped calls the typed echo tool the way a UTCP http client
// does (body_field as the body, the rest as query parameters in axios's
// notation) and checks the exact JSON values the tool received.
func TestCallTyped(t *testing.T) {
	e := newEnv(t, envOptions{keys: []string{apiKey}})
	q := url.Values{}
	q.Set("count", "3")
	q.Set("ratio", "-0.25e1")
	q.Set("flag", "true")
	q.Set("label", "héllo & more+[x]")
	q["tags[]"] = []string{"a", "b,c"}
	q["ids"] = []string{"1", "2"}
	q.Set("options[level]", "2")
	q.Set("options[deep][on]", "false")
	q.Set("options[deep][name]", "12")
	q.Set("ref[x]", "1.5")
	q.Set("untyped", "7")
	body := `{"nested":{"list":[1,null,{"z":true}],"empty":{}},"s":"x"}`
	r := e.do("POST", "/utcp/call/typed.echo?"+q.Encode(), apiKey, body, nil)
	if r.status != http.StatusOK {
		t.Fatalf("call: %s", r)
	}
	var got map[string]any
	decode(t, r.body, &got)
	var want map[string]any
	decode(t, []byte(`{"count":3,"ratio":-0.25e1,"flag":true,"label":"héllo & more+[x]","tags":["a","b,c"],"ids":[1,2],
		"options":{"level":2,"deep":{"on":false,"name":"12"}},"ref":{"x":1.5},"untyped":"7",
		"config":{"nested":{"list":[1,null,{"z":true}],"empty":{}},"s":"x"}}`), &want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("arguments (-want +got):\n%s", diff)
	}
	recs := e.recs()
	if len(recs) != 1 || recs[0].Front != utcpmanual.FrontName || !strings.HasPrefix(recs[0].Principal, "key:") ||
		recs[0].Qualified != "typed.echo" || recs[0].Code != "" {
		t.Errorf("call records: %+v", recs)
	}
}

// TestCallOutcomes checks the other answers of the call route: a real
// HTTP backend's result, a tool error, schema and guard refusals, an
// unknown tool, a body given twice, and unreadable arguments — each
// through the gateway (audited) unless the request itself is unreadable.
func TestCallOutcomes(t *testing.T) {
	e := newEnv(t, envOptions{keys: []string{apiKey}})

	r := e.do("POST", "/utcp/call/demo.add?a=2&b=3.5", apiKey, "", nil)
	var sum map[string]any
	decode(t, r.body, &sum)
	if r.status != http.StatusOK || sum["sum"] != json.Number("5.5") {
		t.Errorf("demo.add: %s", r)
	}
	// An unqualified name resolves while unambiguous.
	if r := e.do("POST", "/utcp/call/add?a=1&b=1", apiKey, "", nil); r.status != http.StatusOK || !strings.Contains(string(r.body), `"sum":2`) {
		t.Errorf("add: %s", r)
	}
	// No arguments at all: an empty object reaches the tool.
	if r := e.do("POST", "/utcp/call/typed.echo", apiKey, "", nil); r.status != http.StatusOK || string(r.body) != "{}\n" {
		t.Errorf("no arguments: %q", r.body)
	}
	// A string argument named body travels as a query parameter: the
	// template's body_field is _body.
	if r := e.do("POST", "/utcp/call/typed.plain?body=42&n=1", apiKey, "", nil); r.status != http.StatusOK || string(r.body) != `{"body":"42","n":1}`+"\n" {
		t.Errorf("typed.plain: %s", r)
	}

	d := expectError(t, e.do("POST", "/utcp/call/typed.crash?why=because", apiKey, "", nil), http.StatusBadGateway, utcp.CodeToolError)
	if v, _ := d["value"].(map[string]any); v["why"] != "because" {
		t.Errorf("tool error details %v", d)
	}
	expectError(t, e.do("POST", "/utcp/call/demo.fail?message=boom", apiKey, "", nil), http.StatusBadGateway, utcp.CodeToolError)
	expectError(t, e.do("POST", "/utcp/call/typed.echo?count=abc", apiKey, "", nil), http.StatusBadRequest, utcp.CodeInvalidArguments)
	expectError(t, e.do("POST", "/utcp/call/typed.echo?count=13", apiKey, "", nil), http.StatusForbidden, utcp.CodeGuardDenied)
	expectError(t, e.do("POST", "/utcp/call/nope.nothing?x=1", apiKey, "", nil), http.StatusNotFound, utcp.CodeToolNotFound)
	audited := len(e.recs())

	expectError(t, e.do("POST", "/utcp/call/typed.echo?config=%7B%7D", apiKey, `{"a":1}`, nil), http.StatusBadRequest, utcp.CodeInvalidRequest)
	expectError(t, e.do("POST", "/utcp/call/typed.echo?count=1&count=2", apiKey, "", nil), http.StatusBadRequest, utcp.CodeInvalidRequest)
	expectError(t, e.do("POST", "/utcp/call/typed.echo?options=1&options[a]=2", apiKey, "", nil), http.StatusBadRequest, utcp.CodeInvalidRequest)
	expectError(t, e.do("POST", "/utcp/call/typed.echo", apiKey, `{"a":`, nil), http.StatusBadRequest, utcp.CodeInvalidRequest)

	recs := e.recs()
	if len(recs) != audited {
		t.Errorf("unreadable requests reached the gateway: %d records, want %d", len(recs), audited)
	}
	codes := map[utcp.Code]bool{}
	for _, rec := range recs {
		codes[rec.Code] = true
		if rec.Front != utcpmanual.FrontName {
			t.Errorf("record front %q", rec.Front)
		}
	}
	for _, c := range []utcp.Code{utcp.CodeToolError, utcp.CodeInvalidArguments, utcp.CodeGuardDenied, utcp.CodeToolNotFound} {
		if !codes[c] {
			t.Errorf("no audited call ended %s: %v", c, codes)
		}
	}
}

// TestCallNameEscaping checks that a tool name with characters a URL
// path or a UTCP client's variable substitution would change survives
// the round trip through the manual's URL.
func TestCallNameEscaping(t *testing.T) {
	e := newEnv(t, envOptions{})
	var m manualDoc
	decode(t, e.do("GET", "/utcp", "", "", nil).body, &m)
	u := m.tool(t, "typed.we ird/$HOME{x}").ToolCallTemplate["url"].(string)
	if want := e.url + "/utcp/call/typed.we%20ird%2F%24HOME%7Bx%7D"; u != want {
		t.Errorf("url %q, want %q", u, want)
	}
	r := e.do("POST", strings.TrimPrefix(u, e.url)+"?label=x", "", "", nil)
	if r.status != http.StatusOK || string(r.body) != `{"label":"x"}`+"\n" {
		t.Errorf("call through the manual's url: %s", r)
	}
}

// TestChainedGateway registers this gateway's manual in a second utcpd
// gateway (its http transport is another UTCP client: JSON text for
// objects and arrays in the query) and calls through it with typed
// arguments, the key coming from the second gateway's variables.
func TestChainedGateway(t *testing.T) {
	e := newEnv(t, envOptions{keys: []string{apiKey}})
	types := transports.NewRegistry()
	if err := types.Register(utcphttp.Info); err != nil {
		t.Fatal(err)
	}
	vars, err := manuals.NewResolver(nil, manuals.ResolverOptions{LookupEnv: func(k string) (string, bool) {
		return apiKey, k == "upstream_UTCPD_API_KEY"
	}})
	if err != nil {
		t.Fatal(err)
	}
	g2, err := gateway.New(gateway.Options{Transports: types, Variables: vars})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g2.Close() })
	manual := `{"name":"upstream","call_template_type":"http","http_method":"GET","url":"` + e.url + `/utcp",
		"auth":{"auth_type":"api_key","api_key":"Bearer ${UTCPD_API_KEY}","var_name":"Authorization","location":"header"}}`
	res, err := g2.RegisterManual(t.Context(), json.RawMessage(manual), gateway.RegisterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Tools) != 10 {
		t.Errorf("registered %d tools: %v", len(res.Tools), res.Tools)
	}
	var args map[string]any
	decode(t, []byte(`{"count":3,"ratio":0.5,"flag":false,"label":"a&b=c","tags":["x","y"],"ids":[1],
		"options":{"level":2,"deep":{"on":true}},"config":{"k":[null,{}]}}`), &args)
	out, err := g2.CallTool(t.Context(), "upstream.typed_echo", args, gateway.CallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(out.Value)
	var got map[string]any
	decode(t, b, &got)
	if diff := cmp.Diff(args, got); diff != "" {
		t.Errorf("arguments through two gateways (-sent +received):\n%s", diff)
	}
	// The downstream gateway's http transport reads a 5xx as a transport
	// failure; the envelope it shows still names the tool error.
	if _, err := g2.CallTool(t.Context(), "upstream.typed_crash", nil, gateway.CallOptions{}); err == nil || !strings.Contains(err.Error(), `"code":"tool_error"`) {
		t.Errorf("a tool error upstream: %v", err)
	}
}
