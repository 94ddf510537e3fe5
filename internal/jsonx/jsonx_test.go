package jsonx_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/utcpd/utcpd/internal/jsonx"
)

// DecodeValue must give what json.Valid and a json.Decoder (UseNumber)
// give for a whole value, whichever path it takes, and refuse what they
// refuse.
func TestDecodeValueMatchesEncodingJSON(t *testing.T) {
	for _, in := range []string{
		`{}`, `[]`, ` {"a" : [1, -2.5e+3, true, null, "ü"]} `, `{"a":"esc\"aped"}`, `{"k":1,"k":2}`,
		`[1,2,]`, `{"a":1}}`, `{"a":1} x`, `[1] [2]`, `12`, ` -0.5 `, `1.`, `"s"`, `"\u00fc"`, `true`, `tru`,
		`null`, `nul`, ``, `   `, `x`,
	} {
		got, ok := jsonx.DecodeValue([]byte(in))
		var want any
		wantOK := json.Valid(bytes.TrimSpace([]byte(in))) && len(bytes.TrimSpace([]byte(in))) > 0
		if wantOK {
			dec := json.NewDecoder(bytes.NewReader([]byte(in)))
			dec.UseNumber()
			if err := dec.Decode(&want); err != nil {
				t.Fatalf("%q: %v", in, err)
			}
		}
		if ok != wantOK {
			t.Errorf("%q: ok %v, want %v", in, ok, wantOK)
			continue
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%q: (-encoding/json +DecodeValue)\n%s", in, diff)
		}
	}
}
