package gateway

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/utcpd/utcpd/utcp"
)

// The quick check for simple inputs schemas must never change a verdict:
// every case is validated with it and with the compiled validator alone,
// and both must give the same outcome (the same error, code, message and
// details). fast says whether the quick check alone accepts the case.
func TestSimpleSchemaAgreesWithValidator(t *testing.T) {
	const add = `{"type":"object","properties":{"a":{"type":"number","description":"x"},"b":{"type":"number"}},"required":["a","b"]}`
	const mixed = `{"type":"object","title":"t","properties":{"s":{"type":"string"},"i":{"type":"integer"},"o":{"type":"object"},` +
		`"l":{"type":"array"},"n":{"type":["string","null"]},"t":{"type":"boolean"},"any":{"description":"no type"}},"additionalProperties":false}`
	cases := []struct {
		name   string
		schema string
		args   map[string]any
		fast   bool
	}{
		{"valid", add, map[string]any{"a": json.Number("1"), "b": json.Number("-2.5e3")}, true},
		{"missing required", add, map[string]any{"a": json.Number("1")}, false},
		{"wrong type", add, map[string]any{"a": "1", "b": json.Number("2")}, false},
		{"extra allowed", add, map[string]any{"a": 1, "b": 2.5, "c": "x"}, true},
		{"nil args", add, nil, false},
		{"all types", mixed, map[string]any{"s": "x", "i": json.Number("12"), "o": map[string]any{"k": 1}, "l": []any{1},
			"n": nil, "t": true, "any": []any{"x"}}, true},
		{"closed", mixed, map[string]any{"s": "x", "extra": 1}, false},
		{"integer with a fraction", mixed, map[string]any{"i": json.Number("1.5")}, false},
		{"integer written 1.0", mixed, map[string]any{"i": json.Number("1.0")}, false},
		{"integer as float64", mixed, map[string]any{"i": 3.0}, false},
		{"not a JSON value under an untyped property", mixed, map[string]any{"any": []string{"x"}}, false},
		{"NaN", add, map[string]any{"a": json.Number("NaN"), "b": 1}, false},
		{"not simple: enum", `{"type":"object","properties":{"a":{"enum":["x"]}}}`, map[string]any{"a": "y"}, false},
		{"not simple: minimum", `{"properties":{"a":{"type":"number","minimum":3}}}`, map[string]any{"a": json.Number("1")}, false},
		{"not simple: open schema object", `{"type":"object","additionalProperties":{"type":"string"}}`, map[string]any{"a": 1}, false},
		{"uncompilable", `{"$schema":"https://example.com/unknown","type":"object","required":["a"]}`, map[string]any{}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			withFast := newSchema(json.RawMessage(c.schema))
			full := newSchema(json.RawMessage(c.schema))
			full.simpleOnce.Do(func() {}) // the compiled validator only
			got, want := withFast.validate("m.t", c.args), full.validate("m.t", c.args)
			if diff := cmp.Diff(describe(want), describe(got)); diff != "" {
				t.Errorf("outcome (-validator +with quick check):\n%s", diff)
			}
			fast := withFast.simple != nil && withFast.simple.accepts(c.args)
			if fast != c.fast {
				t.Errorf("quick check accepted: %v, want %v", fast, c.fast)
			}
		})
	}
}

func describe(err error) map[string]any {
	if err == nil {
		return nil
	}
	ue, ok := err.(*utcp.Error)
	if !ok {
		return map[string]any{"error": err.Error()}
	}
	b, _ := json.Marshal(ue.Details)
	return map[string]any{"code": ue.Code, "message": ue.Message, "details": string(b)}
}

// TestInvalidArgumentsListsEveryProblem: the error names every problem
// with the JSON Pointer of the argument it concerns, sorted, in the
// message and in details.errors; a missing or refused property is at its
// own path, an anyOf is one problem naming its alternatives.
func TestInvalidArgumentsListsEveryProblem(t *testing.T) {
	cases := []struct {
		schema, args string
		message      string
		paths        []string
	}{
		{
			`{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"required":["a","b"]}`, `{"a":"one"}`,
			`arguments for t do not match its input schema: /a: got string, want integer; /b: required but missing`,
			[]string{"/a", "/b"},
		},
		{
			`{"type":"object","properties":{"n":{"type":"object","properties":{"x":{"type":"string","minLength":3}},"required":["y/z"]}},"additionalProperties":false}`,
			`{"n":{"x":"ab"},"extra":1}`,
			`arguments for t do not match its input schema: /extra: not allowed (additionalProperties is false); /n/x: minLength: got 2, want 3; /n/y~1z: required but missing`,
			[]string{"/extra", "/n/x", "/n/y~1z"},
		},
		{
			`{"type":"object","properties":{"a":{"anyOf":[{"type":"integer"},{"type":"boolean"}]}}}`, `{"a":"one"}`,
			`arguments for t do not match its input schema: /a: matches none of the anyOf alternatives: got string, want integer | got string, want boolean`,
			[]string{"/a"},
		},
		{
			`{"type":"object","minProperties":2,"$defs":{"pos":{"type":"integer","minimum":1}},"properties":{"p":{"$ref":"#/$defs/pos"}}}`, `{"p":0}`,
			`arguments for t do not match its input schema: (arguments): minProperties: got 1, want 2; /p: minimum: got 0, want 1`,
			[]string{"", "/p"},
		},
	}
	for _, c := range cases {
		var args map[string]any
		if err := json.Unmarshal([]byte(c.args), &args); err != nil {
			t.Fatal(err)
		}
		// Twice: the order must not depend on map iteration.
		for range 2 {
			err := newSchema(json.RawMessage(c.schema)).validate("t", args)
			ue, ok := err.(*utcp.Error)
			if !ok || ue.Code != utcp.CodeInvalidArguments {
				t.Fatalf("%s: %v, want invalid_arguments", c.args, err)
			}
			if ue.Message != c.message {
				t.Errorf("%s:\n got %s\nwant %s", c.args, ue.Message, c.message)
			}
			var paths []string
			for _, p := range ue.Details["errors"].([]problem) {
				paths = append(paths, p.InstancePath)
			}
			if !slices.Equal(paths, c.paths) || ue.Details["problems"] != len(c.paths) {
				t.Errorf("%s: details paths %q (%v problems), want %q", c.args, paths, ue.Details["problems"], c.paths)
			}
		}
	}

	// Many problems: the message shows ten and counts the rest.
	props, req := map[string]any{}, []string{}
	for i := range 15 {
		props[fmt.Sprintf("p%02d", i)] = map[string]any{"type": "string"}
		req = append(req, fmt.Sprintf("p%02d", i))
	}
	raw, _ := json.Marshal(map[string]any{"type": "object", "properties": props, "required": req})
	err := newSchema(raw).validate("t", map[string]any{})
	ue := err.(*utcp.Error)
	if !strings.HasSuffix(ue.Message, "/p09: required but missing; and 5 more (details.errors)") || len(ue.Details["errors"].([]problem)) != 15 {
		t.Errorf("15 problems: %s", ue.Message)
	}
}
