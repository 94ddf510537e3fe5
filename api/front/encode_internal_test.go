package front

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// appendJSON must write exactly what encoding/json writes (with
// SetEscapeHTML(false)), and fail where it fails.
func TestAppendJSONMatchesEncodingJSON(t *testing.T) {
	cyclic := map[string]any{}
	cyclic["self"] = cyclic
	deep := any("leaf")
	for range 100 {
		deep = []any{deep}
	}
	values := []any{
		nil, true, false, "", "plain", `quote " and \ backslash`, "<b>&amp;</b>", "tab\tnew\nline\r\b\f\x00\x1f\x7f",
		"ü ✓ 😀", "bad \xff utf8", "\u2028\u2029", json.Number("12"), json.Number("-1.5e-3"), json.Number(""),
		json.Number("1 "), json.Number("NaN"), json.Number("0x1"), 3.0, 1e21, 1e-7, float32(0.1), 42, int64(-7), uint8(3),
		math.NaN(), math.Inf(1), map[string]any(nil), []any(nil), map[string]any{}, []any{},
		map[string]any{"b": 1, "a": []any{"x", nil, map[string]any{"z": json.Number("2"), "ä": true, "A": "<>"}}, "": "empty key", "k\"ey": 1},
		[]any{json.RawMessage(`{"raw" : true}`), []string{"typed"}, map[string]string{"m": "v"}, struct{ X int }{1}},
		map[string]any{"many": strings.Split("q w e r t y u i o p a s d f g h j k l z x c v b n m", " ")},
		map[string]any{"n": []any{json.Number("1"), json.Number("bad")}},
		cyclic, deep,
	}
	many := map[string]any{}
	for _, k := range strings.Split("q w e r t y u i o p a s d f g h j k l z x c v b n m", " ") {
		many[k] = k
	}
	values = append(values, many)
	for _, v := range values {
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		wantErr := enc.Encode(v)
		var got bytes.Buffer
		gotErr := appendJSON(&got, v, 0)
		if (wantErr == nil) != (gotErr == nil) || (wantErr != nil && wantErr.Error() != gotErr.Error()) {
			t.Errorf("%#v: error %v, want %v", v, gotErr, wantErr)
			continue
		}
		if wantErr == nil && got.String()+"\n" != want.String() {
			t.Errorf("%#v:\n got %s\nwant %s", v, got.String(), want.String())
		}
	}
}
