package graphql_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	gql "github.com/graphql-go/graphql"

	"github.com/utcpd/utcpd/examples/servers/graphql/graphqlserver"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/transports/graphql"
	"github.com/utcpd/utcpd/transports/transporttest"
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
	"github.com/utcpd/utcpd/utcp"
)

func newTransport(t testing.TB, cfg map[string]any) *graphql.Transport {
	t.Helper()
	return transporttest.NewTransport(t, graphql.New, cfg)
}

func tmpl(t testing.TB, fields map[string]any) *utcp.CallTemplate {
	t.Helper()
	return transporttest.ParseTemplate(t, graphql.ParseTemplate, "graphql", fields)
}

func callOf(ct *utcp.CallTemplate, tool string, args map[string]any) *utcp.Call {
	return transporttest.CallOf(ct, tool, args)
}

func do(t testing.TB, tr *graphql.Transport, ct *utcp.CallTemplate, tool string, args map[string]any) (any, error) {
	t.Helper()
	return transporttest.Do(t, tr, ct, tool, args)
}

func register(t testing.TB, tr *graphql.Transport, ct *utcp.CallTemplate) map[string]utcp.Tool {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	m, err := tr.RegisterManual(ctx, ct)
	if err != nil {
		t.Fatalf("RegisterManual: %v", err)
	}
	out := map[string]utcp.Tool{}
	for _, tool := range m.Tools {
		out[tool.Name] = tool
	}
	return out
}

// jsonOf round-trips v through JSON, for comparisons.
func jsonOf(t testing.TB, v any) any {
	t.Helper()
	var b []byte
	if raw, ok := v.(json.RawMessage); ok {
		b = raw
	} else {
		var err error
		if b, err = json.Marshal(v); err != nil {
			t.Fatal(err)
		}
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("not JSON: %s", b)
	}
	return out
}

func TestTemplateValidation(t *testing.T) {
	cases := []struct {
		name   string
		fields map[string]any
		want   string // "" means valid
	}{
		{"minimal", map[string]any{"url": "https://api.example.com/graphql"}, ""},
		{"full", map[string]any{"url": "http://127.0.0.1:1/graphql", "operation_type": "mutation", "operation_name": "Op",
			"variable_types": map[string]any{"id": "ID!", "ids": "[ID!]!"}, "headers": map[string]any{"X-A": "b"}, "header_fields": []any{"X-Trace"},
			"selection_depth": 3, "timeout": 500, "allow_insecure": true, "subscription_url": "wss://api.example.com/ws"}, ""},
		{"no url", map[string]any{}, "url"},
		{"ws url", map[string]any{"url": "ws://127.0.0.1/graphql"}, "url"},
		{"bad operation_type", map[string]any{"url": "https://x/graphql", "operation_type": "fetch"}, "operation_type"},
		{"bad operation_name", map[string]any{"url": "https://x/graphql", "operation_name": "a b"}, "operation_name"},
		{"bad variable type", map[string]any{"url": "https://x/graphql", "variable_types": map[string]any{"id": "ID!!"}}, "variable_types"},
		{"unbalanced list", map[string]any{"url": "https://x/graphql", "variable_types": map[string]any{"id": "[ID"}}, "variable_types"},
		{"bad variable name", map[string]any{"url": "https://x/graphql", "variable_types": map[string]any{"a-b": "ID"}}, "variable_types"},
		{"depth", map[string]any{"url": "https://x/graphql", "selection_depth": 11}, "selection_depth"},
		{"timeout", map[string]any{"url": "https://x/graphql", "timeout": -1}, "timeout"},
		{"header", map[string]any{"url": "https://x/graphql", "headers": map[string]any{"X": "a\nb"}}, "headers"},
		{"subscription_url", map[string]any{"url": "https://x/graphql", "subscription_url": "https://x/ws"}, "subscription_url"},
		{"blank query", map[string]any{"url": "https://x/graphql", "query": "  "}, "query"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := map[string]any{"name": "m", "call_template_type": "graphql"}
			for k, v := range c.fields {
				m[k] = v
			}
			raw, _ := json.Marshal(m)
			ct, err := graphql.ParseTemplate(raw)
			if c.want == "" {
				if err != nil {
					t.Fatalf("ParseTemplate: %v", err)
				}
				if len(ct.Unknown) != 0 {
					t.Errorf("Unknown = %v", ct.Unknown)
				}
				return
			}
			if !errors.Is(err, transports.ErrInvalidTemplate) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want invalid_template naming %s", err, c.want)
			}
		})
	}
}

// TestDiscoveryOfTheFixture checks the tools discovery makes of the demo
// schema: schemas from arguments and result types, the generated
// documents, and the operation types.
func TestDiscoveryOfTheFixture(t *testing.T) {
	_, url := serveFixture(t, fixture.New(), graphqlserver.Options{})
	tr := newTransport(t, nil)
	ct := tmpl(t, map[string]any{"url": url})
	tools := register(t, tr, ct)
	if diff := cmp.Diff([]string{"add", "count", "echo", "fail", "sleep"}, sortedNames(tools)); diff != "" {
		t.Fatalf("tools (-want +got):\n%s", diff)
	}
	add := tools["add"]
	wantIn := map[string]any{"type": "object", "required": []any{"a", "b"}, "properties": map[string]any{"a": map[string]any{"type": "number"}, "b": map[string]any{"type": "number"}}}
	if diff := cmp.Diff(wantIn, jsonOf(t, add.Inputs)); diff != "" {
		t.Errorf("add inputs (-want +got):\n%s", diff)
	}
	wantOut := map[string]any{"type": "object", "properties": map[string]any{"sum": map[string]any{"type": "number", "description": "a + b"}}}
	if diff := cmp.Diff(wantOut, jsonOf(t, add.Outputs)); diff != "" {
		t.Errorf("add outputs (-want +got):\n%s", diff)
	}
	if got := tr.Document("m", "add"); got != "query add($a: Float!, $b: Float!) { add(a: $a, b: $b) { sum } }" {
		t.Errorf("add document = %q", got)
	}
	if got := tr.Document("m", "fail"); got != "mutation fail($message: String) { fail(message: $message) }" {
		t.Errorf("fail document = %q", got)
	}
	if got := tr.Document("m", "count"); got != "subscription count($delay_ms: Int, $n: Int!) { count(delay_ms: $delay_ms, n: $n) }" {
		t.Errorf("count document = %q", got)
	}
	for name, want := range map[string]string{"add": "query", "fail": "mutation", "count": "subscription"} {
		if tags := tools[name].Tags; len(tags) != 2 || tags[1] != want {
			t.Errorf("%s tags = %v, want [graphql %s]", name, tags, want)
		}
	}
	if tools["echo"].Description != fixture.Tools()[0].Description {
		t.Errorf("echo description = %q", tools["echo"].Description)
	}
}

func sortedNames(m map[string]utcp.Tool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// richSchema has enums, recursive input objects, lists, non-null
// wrappers, an interface, a union, fields with required arguments and
// objects nested deeper than the default selection depth.
func richSchema(t testing.TB) gql.Schema {
	t.Helper()
	color := gql.NewEnum(gql.EnumConfig{Name: "Color", Values: gql.EnumValueConfigMap{"RED": {Value: "RED"}, "GREEN": {Value: "GREEN"}}})
	filter := gql.NewInputObject(gql.InputObjectConfig{Name: "Filter", Fields: gql.InputObjectConfigFieldMap{}})
	filter.AddFieldConfig("color", &gql.InputObjectFieldConfig{Type: color})
	filter.AddFieldConfig("tags", &gql.InputObjectFieldConfig{Type: gql.NewNonNull(gql.NewList(gql.NewNonNull(gql.String)))})
	filter.AddFieldConfig("not", &gql.InputObjectFieldConfig{Type: filter})
	var item *gql.Object
	node := gql.NewInterface(gql.InterfaceConfig{Name: "Node", Fields: gql.Fields{"id": {Type: gql.NewNonNull(gql.ID)}},
		ResolveType: func(p gql.ResolveTypeParams) *gql.Object { return item }})
	user := gql.NewObject(gql.ObjectConfig{Name: "User", Fields: gql.Fields{"name": {Type: gql.String}}})
	item = gql.NewObject(gql.ObjectConfig{Name: "Item", Interfaces: []*gql.Interface{node},
		IsTypeOf: func(p gql.IsTypeOfParams) bool { m, _ := p.Value.(map[string]any); return m["kind"] == "item" },
		Fields: gql.Fields{
			"id":    {Type: gql.NewNonNull(gql.ID)},
			"name":  {Type: gql.String},
			"color": {Type: color},
			"owner": {Type: user},
		}})
	item.AddFieldConfig("related", &gql.Field{Type: gql.NewList(item), Args: gql.FieldConfigArgument{"first": {Type: gql.NewNonNull(gql.Int)}}})
	user.AddFieldConfig("best", &gql.Field{Type: item})
	user.AddFieldConfig("id", &gql.Field{Type: gql.NewNonNull(gql.ID)})
	user.AddFieldConfig("kind", &gql.Field{Type: gql.String})
	thing := gql.NewUnion(gql.UnionConfig{Name: "Thing", Types: []*gql.Object{item, user},
		ResolveType: func(p gql.ResolveTypeParams) *gql.Object {
			if m, _ := p.Value.(map[string]any); m["kind"] == "item" {
				return item
			}
			return user
		}})
	ann := map[string]any{"kind": "user", "id": "u1", "name": "Ann", "best": map[string]any{"kind": "item", "id": "i0", "name": "best"}}
	items := []any{
		map[string]any{"kind": "item", "id": "i1", "name": "one", "color": "RED", "owner": ann},
		map[string]any{"kind": "item", "id": "i2", "name": "two", "color": "GREEN"},
	}
	query := gql.NewObject(gql.ObjectConfig{Name: "Query", Fields: gql.Fields{
		"items": {Type: gql.NewNonNull(gql.NewList(gql.NewNonNull(item))), Description: "Items matching filter.",
			Args: gql.FieldConfigArgument{"filter": {Type: filter}, "limit": {Type: gql.Int, DefaultValue: 10}},
			Resolve: func(p gql.ResolveParams) (any, error) {
				f, _ := p.Args["filter"].(map[string]any)
				if f == nil {
					return items, nil
				}
				var out []any
				for _, it := range items {
					if it.(map[string]any)["color"] == f["color"] {
						out = append(out, it)
					}
				}
				return out, nil
			}},
		"node": {Type: node, Args: gql.FieldConfigArgument{"id": {Type: gql.NewNonNull(gql.ID)}},
			Resolve: func(p gql.ResolveParams) (any, error) { return items[0], nil }},
		"things":  {Type: gql.NewList(thing), Resolve: func(p gql.ResolveParams) (any, error) { return []any{items[1], ann}, nil }},
		"version": {Type: gql.String, Resolve: func(p gql.ResolveParams) (any, error) { return "1.0", nil }},
		"profile": {Type: user, Description: "A user whose best item cannot be read: partial data.",
			Resolve: func(p gql.ResolveParams) (any, error) {
				return map[string]any{"kind": "user", "id": "u9", "name": "Zed"}, nil
			}},
	}})
	user.AddFieldConfig("secret", &gql.Field{Type: gql.String, Resolve: func(p gql.ResolveParams) (any, error) {
		return nil, errors.New("secret is classified")
	}})
	s, err := gql.NewSchema(gql.SchemaConfig{Query: query, Types: []gql.Type{item, user}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func serveSchema(t testing.TB, s gql.Schema, opts graphqlserver.Options) string {
	t.Helper()
	srv := httptest.NewServer(graphqlserver.NewWithSchema(s, opts).Handler())
	t.Cleanup(srv.Close)
	return srv.URL + "/graphql"
}

// TestDiscoveryOfARichSchema runs the generated documents against
// graphql-go: each must validate, and the results carry the selected
// fields.
func TestDiscoveryOfARichSchema(t *testing.T) {
	url := serveSchema(t, richSchema(t), graphqlserver.Options{})
	tr := newTransport(t, nil)
	ct := tmpl(t, map[string]any{"url": url})
	tools := register(t, tr, ct)

	// graphql-go lists fields in name order.
	wantItems := "query items($filter: Filter, $limit: Int) { items(filter: $filter, limit: $limit) { color id name owner { id kind name secret } } }"
	if got := tr.Document("m", "items"); got != wantItems {
		t.Errorf("items document =\n%q, want\n%q", got, wantItems)
	}
	in := jsonOf(t, tools["items"].Inputs).(map[string]any)
	props := in["properties"].(map[string]any)
	if diff := cmp.Diff(map[string]any{"type": "integer"}, props["limit"]); diff != "" {
		t.Errorf("limit schema (-want +got):\n%s", diff)
	}
	f := props["filter"].(map[string]any)
	fp := f["properties"].(map[string]any)
	// graphql-go keeps enum values in a Go map, so the server lists them in
	// any order; the transport keeps the server's order.
	sortEnum := cmpopts.SortSlices(func(a, b any) bool { return fmt.Sprint(a) < fmt.Sprint(b) })
	if diff := cmp.Diff(map[string]any{"type": "string", "enum": []any{"GREEN", "RED"}}, fp["color"], sortEnum); diff != "" {
		t.Errorf("filter.color schema (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]any{"type": "array", "items": map[string]any{"type": "string"}}, fp["tags"]); diff != "" {
		t.Errorf("filter.tags schema (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]any{"tags"}, f["required"]); diff != "" {
		t.Errorf("filter required (-want +got):\n%s", diff)
	}
	if fp["not"].(map[string]any)["type"] != "object" {
		t.Errorf("recursive filter.not = %v", fp["not"])
	}
	if diff := cmp.Diff([]any{}, in["required"]); diff != "" {
		t.Errorf("items required (limit has a default) (-want +got):\n%s", diff)
	}
	out := jsonOf(t, tools["items"].Outputs).(map[string]any)
	if out["type"] != "array" || out["items"].(map[string]any)["properties"].(map[string]any)["owner"] == nil {
		t.Errorf("items outputs = %v", out)
	}

	// Calls: enum and input object variables, an interface, a union.
	v, err := do(t, tr, ct, "items", map[string]any{"filter": map[string]any{"color": "GREEN", "tags": []any{}}})
	if err != nil {
		t.Fatalf("items: %v", err)
	}
	if diff := cmp.Diff([]any{map[string]any{"id": "i2", "name": "two", "color": "GREEN", "owner": nil}}, jsonOf(t, v)); diff != "" {
		t.Errorf("items result (-want +got):\n%s", diff)
	}
	if got := tr.Document("m", "node"); got != "query node($id: ID!) { node(id: $id) { __typename id } }" {
		t.Errorf("node document = %q", got)
	}
	v, err = do(t, tr, ct, "node", map[string]any{"id": "i1"})
	if err != nil || !cmp.Equal(map[string]any{"__typename": "Item", "id": "i1"}, jsonOf(t, v)) {
		t.Errorf("node: %v, %v", v, err)
	}
	if got := tr.Document("m", "things"); !strings.Contains(got, "__typename ... on Item { color id name } ... on User { id kind name secret }") {
		t.Errorf("things document = %q", got)
	}
	v, err = do(t, tr, ct, "things", nil)
	if err == nil {
		t.Errorf("things: the selection asks for User.secret, which fails; want a tool error, got %v", v)
	}

	// selection_depth 1 keeps only the result's own leaves.
	tr1 := newTransport(t, nil)
	ct1 := tmpl(t, map[string]any{"url": url, "selection_depth": 1, "name": "d1"})
	register(t, tr1, ct1)
	if got := tr1.Document("d1", "items"); got != "query items($filter: Filter, $limit: Int) { items(filter: $filter, limit: $limit) { color id name } }" {
		t.Errorf("depth 1 items document = %q", got)
	}
	// selection_depth 3 reaches owner.best but never related (it needs first).
	tr3 := newTransport(t, nil)
	ct3 := tmpl(t, map[string]any{"url": url, "selection_depth": 3, "name": "d3"})
	register(t, tr3, ct3)
	got := tr3.Document("d3", "items")
	if !strings.Contains(got, "owner { best { color id name } id kind name secret }") || strings.Contains(got, "related") {
		t.Errorf("depth 3 items document = %q", got)
	}
}

// TestPartialData: GraphQL errors next to data are a tool error that keeps
// the partial data.
func TestPartialData(t *testing.T) {
	url := serveSchema(t, richSchema(t), graphqlserver.Options{})
	tr := newTransport(t, nil)
	ct := tmpl(t, map[string]any{"url": url})
	register(t, tr, ct)
	_, err := do(t, tr, ct, "profile", nil)
	var te *utcp.ToolError
	if !errors.As(err, &te) {
		t.Fatalf("profile: err = %v (%T), want *utcp.ToolError", err, err)
	}
	if !strings.Contains(te.Message, "secret is classified") {
		t.Errorf("message = %q", te.Message)
	}
	val := jsonOf(t, te.Value).(map[string]any)
	wantData := map[string]any{"profile": map[string]any{"id": "u9", "name": "Zed", "kind": "user", "secret": nil, "best": nil}}
	if diff := cmp.Diff(wantData, val["data"]); diff != "" {
		t.Errorf("partial data (-want +got):\n%s", diff)
	}
	errs, _ := val["errors"].([]any)
	if len(errs) != 1 || errs[0].(map[string]any)["message"] != "secret is classified" {
		t.Errorf("errors = %v", val["errors"])
	}
}

func TestIntrospectionDisabled(t *testing.T) {
	f := fixture.New()
	_, url := serveFixture(t, f, graphqlserver.Options{DisableIntrospection: true})
	tr := newTransport(t, nil)
	_, err := tr.RegisterManual(t.Context(), tmpl(t, map[string]any{"url": url}))
	if utcp.CodeOf(err) != utcp.CodeDiscoveryFailed {
		t.Fatalf("err = %v (code %s), want discovery_failed", err, utcp.CodeOf(err))
	}
	for _, want := range []string{"introspection", url, "not allowed"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	// A template with an explicit query still works.
	ct := tmpl(t, map[string]any{"url": url, "name": "q",
		"query": "query Sum($a: Float!, $b: Float!) { add(a: $a, b: $b) { sum } }"})
	tools := register(t, tr, ct)
	if _, ok := tools["Sum"]; !ok || len(tools) != 1 {
		t.Fatalf("tools = %v, want just Sum", sortedNames(tools))
	}
	v, err := do(t, tr, ct, "Sum", map[string]any{"a": 1, "b": 2})
	if err != nil || !cmp.Equal(map[string]any{"sum": 3.0}, jsonOf(t, v)) {
		t.Errorf("Sum: %v, %v", v, err)
	}
}

// TestExplicitQuery: a document in the template is sent as it is, with
// operationName, and the arguments as variables; its inputs come from the
// variable definitions.
func TestExplicitQuery(t *testing.T) {
	var seen atomic.Value
	f := fixture.New()
	s := graphqlserver.New(f, graphqlserver.Options{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		seen.Store(string(body))
		r.Body = io.NopCloser(bytes.NewReader(body))
		s.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	doc := "# two operations\nquery Both($a: Float!, $b: Float = 1, $t: String) { add(a: $a, b: $b) { sum } echo(text: $t) }\nquery Other { echo }"
	ct := tmpl(t, map[string]any{"url": srv.URL + "/graphql", "name": "ex", "query": doc, "operation_name": "Both",
		"variable_types": map[string]any{"t": "String"}})
	tr := newTransport(t, nil)
	tools := register(t, tr, ct)
	tool, ok := tools["Both"]
	if !ok {
		t.Fatalf("tools = %v", sortedNames(tools))
	}
	wantIn := map[string]any{"type": "object", "required": []any{"a"}, "properties": map[string]any{
		"a": map[string]any{"type": "number"}, "b": map[string]any{"type": "number"}, "t": map[string]any{"type": "string"}}}
	if diff := cmp.Diff(wantIn, jsonOf(t, tool.Inputs)); diff != "" {
		t.Errorf("inputs (-want +got):\n%s", diff)
	}
	v, err := do(t, tr, ct, "Both", map[string]any{"a": 2, "t": "hi"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"add": map[string]any{"sum": 3.0}, "echo": map[string]any{"text": "hi"}}
	if diff := cmp.Diff(want, jsonOf(t, v)); diff != "" {
		t.Errorf("result (several root fields: the whole data) (-want +got):\n%s", diff)
	}
	var req map[string]any
	_ = json.Unmarshal([]byte(seen.Load().(string)), &req)
	if req["query"] != doc || req["operationName"] != "Both" || !cmp.Equal(map[string]any{"a": 2.0, "t": "hi"}, req["variables"]) {
		t.Errorf("request = %v", req)
	}
}

// TestExplicitQueryHeads: the one tool of a template's own document is
// named and typed from the operation a request runs.
func TestExplicitQueryHeads(t *testing.T) {
	_, url := serveFixture(t, fixture.New(), graphqlserver.Options{})
	cases := []struct {
		name, doc, opName string
		wantTool, wantOp  string
		wantRequired      []any
	}{
		{"shorthand", "{ add(a: 1, b: 2) { sum } }", "", "manual", "query", []any{}},
		{"named", "query Sum($a: Float!, $b: Float!) { add(a: $a, b: $b) { sum } }", "", "Sum", "query", []any{"a", "b"}},
		{"comments and defaults", "# a comment\nmutation Boom(\n  $message: String = \"x\" # why\n) { fail(message: $message) }", "", "Boom", "mutation", []any{}},
		{"fragment first", "fragment S on AddResult { sum }\nquery Sum($a: Float!) { add(a: $a, b: 1) { ...S } }", "", "Sum", "query", []any{"a"}},
		{"operation_name picks", "query A { add(a: 1, b: 1) { sum } }\nsubscription C($n: Int!) { count(n: $n) }", "C", "C", "subscription", []any{"n"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fields := map[string]any{"url": url, "name": "manual", "query": c.doc}
			if c.opName != "" {
				fields["operation_name"] = c.opName
			}
			ct := tmpl(t, fields)
			tr := newTransport(t, nil)
			tools := register(t, tr, ct)
			tool, ok := tools[c.wantTool]
			if !ok || len(tools) != 1 {
				t.Fatalf("tools = %v, want just %s", sortedNames(tools), c.wantTool)
			}
			if tool.Tags[1] != c.wantOp {
				t.Errorf("tags = %v, want operation %s", tool.Tags, c.wantOp)
			}
			if diff := cmp.Diff(c.wantRequired, jsonOf(t, tool.Inputs).(map[string]any)["required"]); diff != "" {
				t.Errorf("required (-want +got):\n%s", diff)
			}
			args := map[string]any{}
			for _, r := range c.wantRequired {
				args[r.(string)] = 2
			}
			_, err := do(t, tr, ct, c.wantTool, args)
			if c.wantOp == "mutation" {
				var te *utcp.ToolError
				if !errors.As(err, &te) || te.Message != "x" {
					t.Errorf("Boom: %v, want the tool error x", err)
				}
			} else if err != nil {
				t.Errorf("call: %v", err)
			}
		})
	}
}

// TestErrorsAndFaults covers GraphQL errors, answers that are not GraphQL,
// a hanging server, an oversized answer and a dead server.
func TestErrorsAndFaults(t *testing.T) {
	f := fixture.New()
	_, url := serveFixture(t, f, graphqlserver.Options{})
	tr := newTransport(t, nil)
	ct := tmpl(t, map[string]any{"url": url})
	register(t, tr, ct)

	t.Run("tool error carries the errors array", func(t *testing.T) {
		_, err := do(t, tr, ct, "fail", map[string]any{"message": "nope"})
		var te *utcp.ToolError
		if !errors.As(err, &te) || te.Message != "nope" {
			t.Fatalf("err = %v", err)
		}
		val := jsonOf(t, te.Value).(map[string]any)
		if diff := cmp.Diff(map[string]any{"fail": nil}, val["data"]); diff != "" {
			t.Errorf("data (-want +got):\n%s", diff)
		}
		if errs := val["errors"].([]any); len(errs) != 1 || errs[0].(map[string]any)["message"] != "nope" {
			t.Errorf("errors = %v", errs)
		}
	})
	t.Run("missing required argument", func(t *testing.T) {
		_, err := do(t, tr, ct, "add", map[string]any{"a": 1})
		var te *utcp.ToolError
		if !errors.As(err, &te) || !strings.Contains(te.Message, "$b") {
			t.Errorf("err = %v, want a tool error about $b", err)
		}
	})
	t.Run("unknown argument", func(t *testing.T) {
		_, err := do(t, tr, ct, "add", map[string]any{"a": 1, "b": 2, "c": 3})
		if utcp.CodeOf(err) != utcp.CodeInvalidArguments || !strings.Contains(err.Error(), `"c"`) {
			t.Errorf("err = %v, want invalid_arguments naming c", err)
		}
	})
	t.Run("arguments as text are coerced", func(t *testing.T) {
		v, err := do(t, tr, ct, "add", map[string]any{"a": "1.5", "b": "2"})
		if err != nil || !cmp.Equal(map[string]any{"sum": 3.5}, jsonOf(t, v)) {
			t.Errorf("add: %v, %v", v, err)
		}
	})

	handler := func(h http.HandlerFunc) string {
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		return srv.URL + "/graphql"
	}
	call := func(t *testing.T, url string, extra map[string]any, cfg map[string]any) error {
		t.Helper()
		fields := map[string]any{"url": url, "name": "x"}
		for k, v := range extra {
			fields[k] = v
		}
		ct := tmpl(t, fields)
		_, err := do(t, newTransport(t, cfg), ct, "version", nil)
		return err
	}
	t.Run("garbage body", func(t *testing.T) {
		url := handler(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			_, _ = io.WriteString(w, "<html>hello</html>")
		})
		err := call(t, url, nil, nil)
		var tre *utcp.TransportError
		if !errors.As(err, &tre) || !strings.Contains(err.Error(), "not a GraphQL response") || !strings.Contains(err.Error(), "<html>") {
			t.Errorf("err = %v, want a transport error quoting the body", err)
		}
		_, err = newTransport(t, nil).RegisterManual(t.Context(), tmpl(t, map[string]any{"url": url}))
		if utcp.CodeOf(err) != utcp.CodeDiscoveryFailed {
			t.Errorf("discovery: err = %v, want discovery_failed", err)
		}
	})
	t.Run("HTTP error without a GraphQL body", func(t *testing.T) {
		url := handler(func(w http.ResponseWriter, r *http.Request) { http.Error(w, "bad gateway", http.StatusBadGateway) })
		err := call(t, url, nil, nil)
		var tre *utcp.TransportError
		if !errors.As(err, &tre) || tre.Status != http.StatusBadGateway {
			t.Errorf("err = %v, want a transport error with status 502", err)
		}
		url = handler(func(w http.ResponseWriter, r *http.Request) { http.Error(w, "who are you", http.StatusUnauthorized) })
		if err := call(t, url, nil, nil); !errors.As(err, &tre) || tre.Status != http.StatusUnauthorized {
			t.Errorf("err = %v, want a transport error with status 401", err)
		}
	})
	t.Run("HTTP error with a GraphQL body", func(t *testing.T) {
		url := handler(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/graphql-response+json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"errors":[{"message":"Variable \"$x\" got invalid value"}]}`)
		})
		err := call(t, url, nil, nil)
		var te *utcp.ToolError
		if !errors.As(err, &te) || te.Status != http.StatusBadRequest || !strings.Contains(te.Message, "invalid value") {
			t.Errorf("err = %v, want a tool error with status 400", err)
		}
	})
	t.Run("oversized response", func(t *testing.T) {
		big := strings.Repeat("x", 300<<10)
		tr := newTransport(t, map[string]any{"max_response_bytes": 256 << 10})
		register(t, tr, tmpl(t, map[string]any{"url": url, "name": "big"}))
		_, err := do(t, tr, tmpl(t, map[string]any{"url": url, "name": "big"}), "echo", map[string]any{"text": big})
		if utcp.CodeOf(err) != utcp.CodePayloadTooLarge {
			t.Errorf("err = %v, want payload_too_large", err)
		}
	})
	t.Run("server hangs", func(t *testing.T) {
		release := make(chan struct{})
		url := handler(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-release:
			}
		})
		defer close(release)
		start := time.Now()
		err := call(t, url, map[string]any{"timeout": 200}, nil)
		if utcp.CodeOf(err) != utcp.CodeTimeout {
			t.Errorf("err = %v (code %s), want timeout", err, utcp.CodeOf(err))
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("a 200 ms timeout took %v", took)
		}
		_, err = newTransport(t, nil).RegisterManual(t.Context(), tmpl(t, map[string]any{"url": url, "timeout": 200}))
		if utcp.CodeOf(err) != utcp.CodeTimeout {
			t.Errorf("discovery: err = %v, want timeout", err)
		}
	})
	t.Run("dead server", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		dead := "http://" + ln.Addr().String() + "/graphql"
		ln.Close()
		err = call(t, dead, nil, nil)
		var tre *utcp.TransportError
		if !errors.As(err, &tre) {
			t.Errorf("call: err = %v, want a transport error", err)
		}
		_, err = newTransport(t, nil).RegisterManual(t.Context(), tmpl(t, map[string]any{"url": dead}))
		if utcp.CodeOf(err) != utcp.CodeDiscoveryFailed || !strings.Contains(err.Error(), dead) {
			t.Errorf("discovery: err = %v, want discovery_failed naming the URL", err)
		}
		ct := tmpl(t, map[string]any{"url": dead, "operation_type": "subscription"})
		_, err = newTransport(t, nil).CallToolStream(t.Context(), callOf(ct, "count", map[string]any{"n": 1}))
		if !errors.As(err, &tre) {
			t.Errorf("subscription: err = %v, want a transport error", err)
		}
	})
	t.Run("insecure URL", func(t *testing.T) {
		ct := tmpl(t, map[string]any{"url": "http://example.com/graphql"})
		_, err := newTransport(t, nil).RegisterManual(t.Context(), ct)
		if utcp.CodeOf(err) != utcp.CodeInvalidTemplate || !strings.Contains(err.Error(), "allow_insecure") {
			t.Errorf("err = %v, want invalid_template mentioning allow_insecure", err)
		}
		_, err = do(t, newTransport(t, nil), ct, "version", nil)
		if utcp.CodeOf(err) != utcp.CodeInvalidTemplate {
			t.Errorf("call: err = %v, want invalid_template", err)
		}
	})
}

// TestHeadersAndAuth: template headers, header_fields arguments and auth
// reach the server on POSTs and on the subscription handshake.
func TestHeadersAndAuth(t *testing.T) {
	f := fixture.New()
	s := graphqlserver.New(f, graphqlserver.Options{})
	var mu sync.Mutex
	var seen []http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Clone())
		mu.Unlock()
		if r.Header.Get("X-Api-Key") != "k3y" {
			http.Error(w, "no key", http.StatusUnauthorized)
			return
		}
		s.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(func() { s.DropConnections(); srv.Close() })
	ct := tmpl(t, map[string]any{"url": srv.URL + "/graphql", "headers": map[string]any{"X-Client": "utcpd-test"},
		"header_fields": []any{"X-Trace"}, "auth": map[string]any{"auth_type": "api_key", "api_key": "k3y"}})
	tr := newTransport(t, nil)
	register(t, tr, ct)
	v, err := do(t, tr, ct, "add", map[string]any{"a": 1, "b": 2, "X-Trace": "t-1"})
	if err != nil || !cmp.Equal(map[string]any{"sum": 3.0}, jsonOf(t, v)) {
		t.Fatalf("add: %v, %v", v, err)
	}
	v, err = do(t, tr, ct, "count", map[string]any{"n": 2, "X-Trace": "t-2"})
	if err != nil || !cmp.Equal([]any{1.0, 2.0}, jsonOf(t, v)) {
		t.Fatalf("count: %v, %v", v, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 3 {
		t.Fatalf("%d requests, want 3 (introspection, add, the handshake)", len(seen))
	}
	for i, h := range seen {
		if h.Get("X-Client") != "utcpd-test" || h.Get("X-Api-Key") != "k3y" {
			t.Errorf("request %d headers = %v", i, h)
		}
	}
	if seen[1].Get("X-Trace") != "t-1" || seen[2].Get("X-Trace") != "t-2" {
		t.Errorf("header_fields: %q, %q", seen[1].Get("X-Trace"), seen[2].Get("X-Trace"))
	}
	if seen[2].Get("Sec-Websocket-Protocol") != graphql.Subprotocol {
		t.Errorf("handshake subprotocol = %q", seen[2].Get("Sec-Websocket-Protocol"))
	}
}

// TestCallsWithoutRegistration: a tool loaded from a store, whose manual
// this transport never registered, is introspected on its first call; a
// tool discovery did not see is sent as written and the server's
// "Cannot query field" is tool_not_found.
func TestCallsWithoutRegistration(t *testing.T) {
	_, url := serveFixture(t, fixture.New(), graphqlserver.Options{})
	tr := newTransport(t, nil)
	ct := tmpl(t, map[string]any{"url": url})
	v, err := do(t, tr, ct, "add", map[string]any{"a": 1, "b": 2})
	if err != nil || !cmp.Equal(map[string]any{"sum": 3.0}, jsonOf(t, v)) {
		t.Errorf("add: %v, %v", v, err)
	}
	_, err = do(t, tr, ct, "missing", map[string]any{"q": "x"})
	if !errors.Is(err, transports.ErrToolNotFound) {
		t.Errorf("missing: err = %v, want tool_not_found", err)
	}
	// Without introspection, a generated document (no selection set)
	// still reaches scalar fields, typed from the values or variable_types.
	_, url2 := serveFixture(t, fixture.New(), graphqlserver.Options{DisableIntrospection: true})
	ct2 := tmpl(t, map[string]any{"url": url2, "name": "n", "variable_types": map[string]any{"x": "JSON"}})
	v, err = do(t, tr, ct2, "echo", map[string]any{"text": "hi", "x": 2})
	if err != nil || !cmp.Equal(map[string]any{"text": "hi", "x": 2.0}, jsonOf(t, v)) {
		t.Errorf("echo without introspection: %v, %v", v, err)
	}
}

// TestSubscriptions: CallTool collects a subscription; a stream ends with
// io.EOF; errors end it with a tool error; cancelling the context stops
// the server's operation.
func TestSubscriptions(t *testing.T) {
	f := fixture.New()
	s, url := serveFixture(t, f, graphqlserver.Options{})
	tr := newTransport(t, nil)
	ct := tmpl(t, map[string]any{"url": url})
	register(t, tr, ct)

	v, err := do(t, tr, ct, "count", map[string]any{"n": 3})
	if err != nil || !cmp.Equal([]any{1.0, 2.0, 3.0}, jsonOf(t, v)) {
		t.Errorf("count: %v, %v", v, err)
	}
	v, err = do(t, tr, ct, "count", map[string]any{"n": 0})
	if err != nil || !cmp.Equal([]any{}, jsonOf(t, v)) {
		t.Errorf("count(0): %v, %v", v, err)
	}
	// A validation error before the stream starts is an error message.
	st, err := tr.CallToolStream(t.Context(), callOf(ct, "count", map[string]any{}))
	if err != nil {
		t.Fatalf("CallToolStream: %v", err)
	}
	_, err = st.Recv()
	var te *utcp.ToolError
	if !errors.As(err, &te) || !strings.Contains(te.Message, "$n") {
		t.Errorf("count without n: err = %v, want a tool error about $n", err)
	}
	st.Close()
	// A query streamed is one event.
	st, err = tr.CallToolStream(t.Context(), callOf(ct, "add", map[string]any{"a": 1, "b": 1}))
	if err != nil {
		t.Fatal(err)
	}
	ev, err := st.Recv()
	if err != nil || !cmp.Equal(map[string]any{"sum": 2.0}, jsonOf(t, ev.Data)) {
		t.Errorf("add streamed: %v, %v", ev, err)
	}
	if _, err := st.Recv(); !errors.Is(err, io.EOF) {
		t.Errorf("second Recv = %v, want io.EOF", err)
	}
	// Cancelling the context sends complete: the server stops counting.
	ctx, cancel := context.WithCancel(t.Context())
	st, err = tr.CallToolStream(ctx, callOf(ct, "count", map[string]any{"n": 100000, "delay_ms": 5}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil {
		t.Fatal(err)
	}
	cancel()
	deadline := time.Now().Add(5 * time.Second)
	for f.InFlight() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the server still runs the subscription after the context ended (in flight %d)", f.InFlight())
		}
		time.Sleep(10 * time.Millisecond)
	}
	for {
		if _, err = st.Recv(); err != nil {
			break
		}
	}
	if code := utcp.CodeOf(err); code != utcp.CodeCanceled {
		t.Errorf("Recv after cancel: %v (code %s), want canceled", err, code)
	}
	st.Close()
	// A dropped connection fails the stream with a transport error.
	st, err = tr.CallToolStream(t.Context(), callOf(ct, "count", map[string]any{"n": 100000, "delay_ms": 5}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil {
		t.Fatal(err)
	}
	s.DropConnections()
	for {
		if _, err = st.Recv(); err != nil {
			break
		}
	}
	var tre *utcp.TransportError
	if !errors.As(err, &tre) {
		t.Errorf("after the connection dropped: %v, want a transport error", err)
	}
	st.Close()
	// A message over the cap is payload_too_large: connection_ack (25
	// bytes) fits in 40, the next message does not.
	small := newTransport(t, map[string]any{"max_message_bytes": 40})
	smallCT := tmpl(t, map[string]any{"url": url, "name": "small", "query": "subscription Big { count(n: 1) }"})
	_, err = small.CallTool(t.Context(), callOf(smallCT, "Big", nil))
	if utcp.CodeOf(err) != utcp.CodePayloadTooLarge {
		t.Errorf("a next message over max_message_bytes: %v, want payload_too_large", err)
	}
}

// TestYogaPeer runs the transport against graphql-yoga (queries and
// mutations over HTTP) with graphql-ws on ws (subscriptions over
// graphql-transport-ws), third-party implementations
// (testdata/yoga-server.mjs). It needs node and `npm ci` in
// testdata/peer; set UTCPD_NPM_PEERS=1 to run it (CI does), and it fails
// when that is set and the peer is missing.
func TestYogaPeer(t *testing.T) {
	peer := transporttest.NPMPeer(t, "graphql-yoga", "graphql-ws", "ws", "graphql")
	var hello struct {
		Port    int    `json:"port"`
		Yoga    string `json:"yoga_version"`
		GraphWS string `json:"graphql_ws_version"`
	}
	peer.Start(t, filepath.Join("testdata", "yoga-server.mjs"), &hello, "NODE_NO_WARNINGS=1")
	t.Logf("graphql-yoga %s, graphql-ws %s serving on 127.0.0.1:%d", hello.Yoga, hello.GraphWS, hello.Port)
	url := fmt.Sprintf("http://127.0.0.1:%d/graphql", hello.Port)

	tr := newTransport(t, nil)
	ct := tmpl(t, map[string]any{"name": "yoga", "url": url})
	tools := register(t, tr, ct)
	want := []string{"activeSubscriptions", "add", "addBook", "book", "boom", "countdown", "echo", "hello", "search"}
	if diff := cmp.Diff(want, sortedNames(tools)); diff != "" {
		t.Fatalf("tools (-want +got):\n%s", diff)
	}
	if d := tools["hello"].Description; d != "Greets name." {
		t.Errorf("hello description = %q", d)
	}
	in := jsonOf(t, tools["addBook"].Inputs).(map[string]any)
	bookInput := in["properties"].(map[string]any)["input"].(map[string]any)
	if diff := cmp.Diff([]any{"title"}, bookInput["required"]); diff != "" {
		t.Errorf("BookInput required (genre has a default) (-want +got):\n%s", diff)
	}
	if g := bookInput["properties"].(map[string]any)["genre"]; !cmp.Equal(map[string]any{"type": "string", "enum": []any{"FICTION", "SCIENCE"}}, g) {
		t.Errorf("BookInput.genre = %v", g)
	}

	check := func(tool string, args map[string]any, want any) {
		t.Helper()
		v, err := do(t, tr, ct, tool, args)
		if err != nil {
			t.Errorf("%s: %v", tool, err)
			return
		}
		if diff := cmp.Diff(want, jsonOf(t, v)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tool, diff)
		}
	}
	check("hello", map[string]any{"name": "utcp"}, "Hello utcp")
	check("add", map[string]any{"a": 2, "b": 3}, 5.0)
	check("book", map[string]any{"id": "1"}, map[string]any{"id": "1", "title": "Dune", "author": map[string]any{"name": "Frank Herbert"}})
	check("search", map[string]any{"term": "d"}, []any{
		map[string]any{"__typename": "Book", "id": "1", "title": "Dune"},
		map[string]any{"__typename": "Author", "name": "Frank Herbert"}})
	check("echo", map[string]any{"msg": "héllo 🌍"}, "héllo 🌍")
	check("addBook", map[string]any{"input": map[string]any{"title": "T", "tags": []any{"a", "b"}}},
		map[string]any{"id": "3", "title": "T (FICTION, a+b)", "author": nil})

	var te *utcp.ToolError
	if _, err := do(t, tr, ct, "boom", nil); !errors.As(err, &te) || te.Message != "boom: the peer refuses" {
		t.Errorf("boom: %v", err)
	}
	_, err := do(t, tr, ct, "book", map[string]any{"id": "2"})
	if !errors.As(err, &te) {
		t.Fatalf("book 2: %v, want a tool error with partial data", err)
	}
	val := jsonOf(t, te.Value).(map[string]any)
	if diff := cmp.Diff(map[string]any{"book": map[string]any{"id": "2", "title": "Anonymous", "author": nil}}, val["data"]); diff != "" {
		t.Errorf("partial data (-want +got):\n%s", diff)
	}
	// yoga answers validation errors with HTTP 400 and a GraphQL body.
	if _, err := do(t, tr, ct, "nope", nil); !errors.Is(err, transports.ErrToolNotFound) {
		t.Errorf("unknown tool: %v", err)
	}
	if _, err := do(t, tr, ct, "add", map[string]any{"a": 1}); !errors.As(err, &te) || te.Status != http.StatusBadRequest {
		t.Errorf("add without b: %v, want a tool error with status 400", err)
	}

	// Subscriptions over graphql-transport-ws.
	check("countdown", map[string]any{"from": 3}, []any{3.0, 2.0, 1.0, 0.0})
	st, err := tr.CallToolStream(t.Context(), callOf(ct, "countdown", map[string]any{"from": 100000, "delayMs": 5}))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		ev, err := st.Recv()
		if err != nil || !cmp.Equal(float64(100000-i), jsonOf(t, ev.Data)) {
			t.Fatalf("event %d: %v, %v", i, ev, err)
		}
	}
	check("activeSubscriptions", nil, 1.0)
	st.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		v, err := do(t, tr, ct, "activeSubscriptions", nil)
		if err == nil && jsonOf(t, v) == 0.0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the peer still runs the subscription after Close: %v, %v", v, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// 32 concurrent calls.
	var wg sync.WaitGroup
	var bad atomic.Int32
	for i := range 32 {
		wg.Go(func() {
			v, err := do(t, tr, ct, "add", map[string]any{"a": i, "b": 1})
			if err != nil || jsonOf(t, v) != float64(i+1) {
				bad.Add(1)
			}
		})
	}
	wg.Wait()
	if bad.Load() != 0 {
		t.Errorf("%d of 32 concurrent calls failed", bad.Load())
	}
}

// BenchmarkCalls compares add calls per second through the transport with
// direct HTTP POSTs of the same GraphQL document to the demo server, at
// concurrency 32.
func BenchmarkCalls(b *testing.B) {
	_, url := serveFixture(b, fixture.New(), graphqlserver.Options{})
	ct := tmpl(b, map[string]any{"name": "bench", "url": url})
	const concurrency = 32
	parallelism := func(b *testing.B) { b.SetParallelism(max(1, concurrency/max(1, runtime.GOMAXPROCS(0)))) }
	b.Run("transport", func(b *testing.B) {
		tr := newTransport(b, nil)
		register(b, tr, ct)
		parallelism(b)
		start := time.Now()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				res, err := tr.CallTool(b.Context(), callOf(ct, "add", map[string]any{"a": 1, "b": 2}))
				if err != nil || res == nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "calls/s")
	})
	b.Run("direct", func(b *testing.B) {
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
		defer client.CloseIdleConnections()
		body, _ := json.Marshal(map[string]any{"query": "query add($a: Float!, $b: Float!) { add(a: $a, b: $b) { sum } }",
			"variables": map[string]any{"a": 1, "b": 2}})
		parallelism(b)
		start := time.Now()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				resp, err := client.Post(url, "application/json", bytes.NewReader(body))
				if err != nil {
					b.Error(err)
					return
				}
				var out struct {
					Data struct {
						Add struct{ Sum float64 } `json:"add"`
					} `json:"data"`
				}
				err = json.NewDecoder(resp.Body).Decode(&out)
				resp.Body.Close()
				if err != nil || out.Data.Add.Sum != 3 {
					b.Errorf("direct: %v %v", out, err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "calls/s")
	})
}
