package utcpmanual

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/utcpd/utcpd/utcp"
)

const argsSchema = `{"type":"object","properties":{
 "i":{"type":"integer"}, "n":{"type":"number"}, "b":{"type":"boolean"}, "s":{"type":"string"},
 "is":{"type":"array","items":{"type":"integer"}}, "ss":{"type":"array","items":{"type":"string"}},
 "tuple":{"type":"array","prefixItems":[{"type":"integer"},{"type":"string"}]},
 "o":{"type":"object","properties":{"x":{"type":"integer"},"list":{"type":"array","items":{"type":"object","properties":{"on":{"type":"boolean"}}}},"m":{"type":"object","additionalProperties":{"type":"number"}}}},
 "either":{"type":["integer","string"]}, "opt":{"type":["string","null"]}, "nul":{"type":["boolean","null"]},
 "any":{"anyOf":[{"type":"integer"},{"type":"boolean"}]}, "color":{"enum":["red",1]},
 "ref":{"$ref":"#/$defs/p"}, "weird[k]":{"type":"integer"}
},"$defs":{"p":{"type":"object","properties":{"x":{"type":"number"}}}}}`

// TestDecodeArgs checks the query-to-arguments rules one by one.
func TestDecodeArgs(t *testing.T) {
	s := parseSchema(json.RawMessage(argsSchema))
	for _, c := range []struct {
		name, query, want string
	}{
		{"integer", "i=42", `{"i":42}`},
		{"big integer", "i=1e%2B21", `{"i":1e+21}`},
		{"not a number stays a string", "i=abc", `{"i":"abc"}`},
		{"number", "n=-1.5E3", `{"n":-1.5E3}`},
		{"boolean", "b=true", `{"b":true}`},
		{"boolean any case", "b=FALSE", `{"b":false}`},
		{"string keeps digits", "s=0012", `{"s":"0012"}`},
		{"string with + and spaces", "s=a%2Bb+c", `{"s":"a+b c"}`},
		{"empty string", "s=", `{"s":""}`},
		{"axios array", "is%5B%5D=1&is%5B%5D=2", `{"is":[1,2]}`},
		{"repeated key array", "ss=a&ss=b", `{"ss":["a","b"]}`},
		{"one value for an array", "is=5", `{"is":[5]}`},
		{"JSON array text", "is=%5B1%2C2%5D", `{"is":[1,2]}`},
		{"tuple items", "tuple%5B%5D=1&tuple%5B%5D=1", `{"tuple":[1,"1"]}`},
		{"nested object", "o%5Bx%5D=3&o%5Bm%5D%5Bk%5D=2.5", `{"o":{"x":3,"m":{"k":2.5}}}`},
		{"array of objects by index", "o%5Blist%5D%5B0%5D%5Bon%5D=true&o%5Blist%5D%5B2%5D%5Bon%5D=false", `{"o":{"list":[{"on":true},null,{"on":false}]}}`},
		{"JSON object text", "o=%7B%22x%22%3A1%7D", `{"o":{"x":1}}`},
		{"first fitting type", "either=7", `{"either":7}`},
		{"then string", "either=seven", `{"either":"seven"}`},
		{"string before null", "opt=null", `{"opt":"null"}`},
		{"null without string", "nul=null", `{"nul":null}`},
		{"anyOf types", "any=true", `{"any":true}`},
		{"enum kinds", "color=1", `{"color":1}`},
		{"ref", "ref%5Bx%5D=2", `{"ref":{"x":2}}`},
		{"declared name with brackets", "weird%5Bk%5D=5", `{"weird[k]":5}`},
		{"undeclared stays string", "zzz=5", `{"zzz":"5"}`},
		{"undeclared nested indices are an array", "u%5B0%5D=a&u%5B1%5D=b", `{"u":["a","b"]}`},
		{"undeclared sparse indices are an object", "u%5B0%5D=a&u%5B5%5D=b", `{"u":{"0":"a","5":"b"}}`},
		{"undeclared brackets", "u%5Ba%5D%5Bb%5D=1", `{"u":{"a":{"b":"1"}}}`},
		{"not brackets", "a%5Bb=1&c%5D=2", `{"a[b":"1","c]":"2"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			q, err := url.ParseQuery(c.query)
			if err != nil {
				t.Fatal(err)
			}
			got, err := decodeArgs(q, s)
			if err != nil {
				t.Fatalf("decodeArgs: %v", err)
			}
			var want map[string]any
			dec := json.NewDecoder(strings.NewReader(c.want))
			dec.UseNumber()
			if err := dec.Decode(&want); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	if got, err := decodeArgs(url.Values{}, s); got != nil || err != nil {
		t.Errorf("no query: %v %v", got, err)
	}
}

// TestDecodeArgsErrors checks the query strings that cannot be read.
func TestDecodeArgsErrors(t *testing.T) {
	s := parseSchema(json.RawMessage(argsSchema))
	deep := "x" + strings.Repeat("%5Ba%5D", maxKeyDepth+1) + "=1"
	for _, query := range []string{
		"i=1&i=2",                      // a scalar twice
		"o=1&o%5Bx%5D=2",               // a value and nested keys
		"o%5Bx%5D=2&o%5Bx%5D%5By%5D=3", // nested under a value
		"o%5B%5D%5Bx%5D=1",             // [] before the end
		deep,                           // too deep
	} {
		q, _ := url.ParseQuery(query)
		_, err := decodeArgs(q, s)
		if utcp.CodeOf(err) != utcp.CodeInvalidRequest {
			t.Errorf("%s: %v, want invalid_request", query, err)
		}
	}
	// A huge index is an object key, not a giant array.
	q, _ := url.ParseQuery("is%5B99999999%5D=1")
	got, err := decodeArgs(q, s)
	if err != nil || len(got["is"].(map[string]any)) != 1 {
		t.Errorf("huge index: %v %v", got, err)
	}
}

// TestBodyField checks which argument a tool's template sends as the
// body.
func TestBodyField(t *testing.T) {
	for _, c := range []struct{ inputs, want string }{
		{``, "body"},
		{`{"type":"object"}`, "body"},
		{`{"properties":{"q":{"type":"string"},"filter":{"type":"object"},"b":{"type":"object"}}}`, "b"},
		{`{"properties":{"list":{"type":"array"},"zz":{"type":["object","null"]}}}`, "zz"},
		{`{"properties":{"list":{"type":"array"},"s":{"type":"string"}}}`, "list"},
		{`{"properties":{"mixed":{"type":["object","string"]}}}`, "body"},
		{`{"properties":{"$cfg":{"type":"object"},"body":{"type":"string"},"_body":{"type":"integer"}}}`, "__body"},
		{`{"properties":{"p":{"$ref":"#/$defs/x"}},"$defs":{"x":{"type":"object"}}}`, "p"},
		{`{"properties":{"p":{"properties":{"a":{}}}}}`, "p"},
	} {
		if got := BodyField(json.RawMessage(c.inputs)); got != c.want {
			t.Errorf("BodyField(%s) = %q, want %q", c.inputs, got, c.want)
		}
	}
}

// TestClientSchema checks the schema clean-up for the clients' models.
func TestClientSchema(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{``, `{}`},
		{`true`, `{}`},
		{`false`, `{"not":{}}`},
		{`[1]`, `{}`},
		{`{"type":"object","properties":{"a":{"type":"integer"}}}`, `{"type":"object","properties":{"a":{"type":"integer"}}}`},
		{`{"properties":{"a":true,"b":false,"c":1}}`, `{"properties":{"a":{},"b":{"not":{}},"c":{}}}`},
		{`{"items":true}`, `{"items":{}}`},
		{`{"items":[true,{"type":"x"}]}`, `{"items":[{},{}]}`},
		{`{"type":"object","required":true,"minimum":"1","title":3,"additionalProperties":{"type":7},"enum":1}`, `{"type":"object","additionalProperties":{}}`},
		{`{"type":["string",1]}`, `{}`},
		{`{"description":"<b>&</b>","maximum":1.50}`, `{"description":"<b>&</b>","maximum":1.50}`},
	} {
		got := clientSchema(json.RawMessage(c.in))
		var g, w any
		if json.Unmarshal(got, &g) != nil || json.Unmarshal([]byte(c.want), &w) != nil || !cmp.Equal(g, w) {
			t.Errorf("clientSchema(%s) = %s, want %s", c.in, got, c.want)
		}
	}
	// Unchanged schemas are returned as they are, byte for byte.
	in := json.RawMessage(`{"type": "object",   "maximum": 1.50}`)
	if got := clientSchema(in); !bytes.Equal(got, in) {
		t.Errorf("an unchanged schema was re-encoded: %s", got)
	}
}

// TestBaseURL checks the request-derived base URL and the refusal of a
// Host that cannot be one.
func TestBaseURL(t *testing.T) {
	h := &Handler{}
	r := httptest.NewRequest("GET", "http://[::1]:8787/utcp", nil)
	if got, err := h.baseURL(r); err != nil || got != "http://[::1]:8787" {
		t.Errorf("baseURL %q %v", got, err)
	}
	r.Host = "evil.example/${X}"
	if _, err := h.baseURL(r); utcp.CodeOf(err) != utcp.CodeInvalidRequest {
		t.Errorf("a bad Host: %v", err)
	}
	r = httptest.NewRequest("GET", "https://gw.example.com/utcp", nil)
	if got, _ := h.baseURL(r); got != "https://gw.example.com" {
		t.Errorf("TLS baseURL %q", got)
	}
}

// TestETagMatches checks If-None-Match parsing.
func TestETagMatches(t *testing.T) {
	const tag = `"abc"`
	for header, want := range map[string]bool{"": false, tag: true, "W/" + tag: true, `"x", "abc"`: true, "*": true, `"abcd"`: false, "abc": false} {
		if got := etagMatches(header, tag); got != want {
			t.Errorf("etagMatches(%q) = %v", header, got)
		}
	}
}

// FuzzDecodeArgs checks that no query string panics the decoder and that
// every success is a JSON-encodable argument map.
func FuzzDecodeArgs(f *testing.F) {
	for _, seed := range []string{"i=1", "o%5Bx%5D=2", "is%5B%5D=1&is%5B%5D=x", "o%5Blist%5D%5B3%5D%5Bon%5D=true", "a%5Bb%5D%5B%5D=1", "ref%5Bx%5D=q"} {
		f.Add(seed)
	}
	s := parseSchema(json.RawMessage(argsSchema))
	f.Fuzz(func(t *testing.T, query string) {
		q, err := url.ParseQuery(query)
		if err != nil {
			return
		}
		args, err := decodeArgs(q, s)
		if err != nil {
			if utcp.CodeOf(err) != utcp.CodeInvalidRequest {
				t.Fatalf("error without invalid_request: %v", err)
			}
			return
		}
		if _, err := json.Marshal(args); err != nil {
			t.Fatalf("arguments do not encode: %v", err)
		}
	})
}
