package jsonx_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/utcpd/utcpd/internal/jsonx"
)

// TestEachField: the fields of an object as encoding/json sees them,
// whatever the spacing, strings and nesting; refused when a key has an
// escape or repeats, or the value is no object.
func TestEachField(t *testing.T) {
	for _, in := range []string{
		`{}`, ` { } `, `{"a":1}`, `{ "a" : "x\"}]" , "b" : [1, {"c": [true, null]}], "d" : -1.5e3 , "e": {} }`,
		`{"s":"\\","t":"ü","n":null,"f":false}`, `{"deep":` + strings.Repeat("[", 50) + strings.Repeat("]", 50) + `}`,
	} {
		var want map[string]json.RawMessage
		if err := json.Unmarshal([]byte(in), &want); err != nil {
			t.Fatal(err)
		}
		got := map[string]json.RawMessage{}
		if !jsonx.EachField([]byte(in), jsonx.SkipSpace([]byte(in), 0), func(k, v []byte) bool {
			got[string(k)] = append(json.RawMessage(nil), v...)
			return true
		}) {
			t.Errorf("%s: refused", in)
			continue
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-encoding/json +EachField):\n%s", in, diff)
		}
	}
	for _, in := range []string{`{"a":1,"a":2}`, `{"a\u0062":1}`, `[1]`, `"s"`, `{"a":1`} {
		if jsonx.EachField([]byte(in), 0, func(k, v []byte) bool { return true }) {
			t.Errorf("%s: accepted", in)
		}
	}
	stopped := 0
	if jsonx.EachField([]byte(`{"a":1,"b":2}`), 0, func(k, v []byte) bool { stopped++; return false }) || stopped != 1 {
		t.Errorf("EachField went on after fn said false (%d calls)", stopped)
	}
}

// TestEachElement and SkipValue: the elements of an array, and a
// value's end and depth.
func TestEachElement(t *testing.T) {
	in := []byte(` [ 1 , "a,]" , [2, [3]] , {"k":"}"} , true ] `)
	var got []string
	if !jsonx.EachElement(in, jsonx.SkipSpace(in, 0), func(v []byte) bool { got = append(got, string(v)); return true }) {
		t.Fatal("refused")
	}
	want := []string{`1`, `"a,]"`, `[2, [3]]`, `{"k":"}"}`, `true`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("elements (-want +got):\n%s", diff)
	}
	if jsonx.EachElement([]byte(`{}`), 0, func([]byte) bool { return true }) {
		t.Error("an object taken for an array")
	}
	for in, wantDepth := range map[string]int{`12`: 0, `"x"`: 0, `[[{}]]`: 3, `{"a":[1]}`: 2} {
		end, depth := jsonx.SkipValue([]byte(in+" ,"), 0)
		if end != len(in) || depth != wantDepth {
			t.Errorf("SkipValue(%s) = %d, %d; want %d, %d", in, end, depth, len(in), wantDepth)
		}
	}
	if s, ok := jsonx.PlainString([]byte(`"abc"`)); !ok || string(s) != "abc" {
		t.Errorf("PlainString: %q %v", s, ok)
	}
	if _, ok := jsonx.PlainString([]byte(`"a\"c"`)); ok {
		t.Error("PlainString took an escape")
	}
}

func TestTextBlock(t *testing.T) {
	for in, want := range map[string]string{
		`{"type":"text","text":"hi"}`:         "hi",
		`{"text":"hi","type":"text"}`:         "hi",
		`{"type":"text","text":"a\"b\u00e9"}`: "a\"bé",
		`{"type":"text","text":""}`:           "",
	} {
		if got, ok := jsonx.TextBlock([]byte(in)); !ok || got != want {
			t.Errorf("TextBlock(%s) = %q, %v; want %q", in, got, ok, want)
		}
	}
	for _, in := range []string{
		`{"type":"image","data":"x"}`,
		`{"type":"text","text":"hi","annotations":{}}`,
		`{"type":"text","text":1}`,
		`{"type":"text"}`,
		`[]`,
	} {
		if got, ok := jsonx.TextBlock([]byte(in)); ok {
			t.Errorf("TextBlock(%s) = %q, true; want false", in, got)
		}
	}
}

// TestUnescaped: for every byte, and a few strings, Unescaped says true
// exactly when encoding/json writes the string unchanged between quotes,
// with HTML escaping (json.Marshal) and without (SetEscapeHTML(false)).
func TestUnescaped(t *testing.T) {
	encode := func(s string, html bool) string {
		var b strings.Builder
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(html)
		if err := enc.Encode(s); err != nil {
			t.Fatal(err)
		}
		return strings.TrimSuffix(b.String(), "\n")
	}
	inputs := []string{"", "tools/call", "demo.add", "a b-c_d", "é", "\u2028", "x\x7f", "<a&b>"}
	for c := 0; c < 0x100; c++ {
		inputs = append(inputs, string([]byte{'a', byte(c)}))
	}
	for _, s := range inputs {
		for _, html := range []bool{true, false} {
			asIs := encode(s, html) == `"`+s+`"`
			if got := jsonx.Unescaped(s, html); got && !asIs {
				t.Errorf("Unescaped(%q, %v) = true, but encoding/json writes %s", s, html, encode(s, html))
			} else if !got && asIs && s[len(s)-1] < 0x80 {
				t.Errorf("Unescaped(%q, %v) = false for a string encoding/json writes as it is", s, html)
			}
		}
	}
}

// TestPlainText: the text of a plain string is what json.Unmarshal
// reads; anything it would read otherwise (an escape, invalid UTF-8) or
// not as a string is declined.
func TestPlainText(t *testing.T) {
	for _, c := range []struct {
		in   string
		want string
		ok   bool
	}{
		{`"tools/call"`, "tools/call", true}, {`""`, "", true}, {`"é <b>"`, "é <b>", true},
		{`"a\u0062"`, "", false}, {"\"\xff\"", "", false}, {`7`, "", false}, {`null`, "", false}, {`"`, "", false},
	} {
		got, ok := jsonx.PlainText([]byte(c.in))
		if got != c.want || ok != c.ok {
			t.Errorf("PlainText(%s) = %q, %v; want %q, %v", c.in, got, ok, c.want, c.ok)
		}
		if ok {
			var u string
			if err := json.Unmarshal([]byte(c.in), &u); err != nil || u != got {
				t.Errorf("PlainText(%s) = %q, json.Unmarshal %q (%v)", c.in, got, u, err)
			}
		}
	}
}
