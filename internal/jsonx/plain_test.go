package jsonx_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/utcpd/utcpd/internal/jsonx"
)

// DecodePlain must decode exactly as encoding/json (UseNumber) does,
// or decline.
func TestDecodePlainMatchesEncodingJSON(t *testing.T) {
	cases := []struct {
		in    string
		plain bool // DecodePlain must take it
	}{
		{`{}`, true}, {`[]`, true}, {` {"a" : [1, -2.5e+3, 0, 1E9, true, false, null, "ü ✓ <b>", {}, []]} `, true},
		{`"s"`, true}, {`12`, true}, {`null`, true}, {`true`, true},
		{`{"a":{"b":{"c":[[["deep"]]]}}}`, true},
		{`{"k":1,"k":2}`, false}, {`{"a":"esc\"aped"}`, false}, {`"\u00fc"`, false}, {"\"bad \xff\"", false}, {"\"ctl \x01\"", false},
		{`{"a":01}`, false}, {`-`, false}, {`1.`, false}, {`.5`, false}, {`1e`, false}, {`tru`, false}, {`{"a":1,}`, false}, {`[1,]`, false},
		{`{"a":1} x`, false}, {`{} {}`, false}, {`{"a":1`, false}, {``, false}, {`   `, false},
		{strings.Repeat(`[`, 100) + strings.Repeat(`]`, 100), false},
	}
	for _, c := range cases {
		got, ok := jsonx.DecodePlain([]byte(c.in))
		if ok != c.plain {
			t.Errorf("%q: plain %v, want %v", c.in, ok, c.plain)
		}
		if !ok {
			continue
		}
		dec := json.NewDecoder(bytes.NewReader([]byte(c.in)))
		dec.UseNumber()
		var want any
		if err := dec.Decode(&want); err != nil {
			t.Errorf("%q: accepted what encoding/json refuses: %v", c.in, err)
			continue
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%q (-encoding/json +plain):\n%s", c.in, diff)
		}
	}
}
