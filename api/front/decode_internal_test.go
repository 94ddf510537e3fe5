package front

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/utcpd/utcpd/api/httpx"
)

// decodeArguments must give exactly what httpx.DecodeStrict gives, or
// leave the body to it.
func TestDecodeArgumentsMatchesDecodeStrict(t *testing.T) {
	cases := []struct {
		body string
		fast bool // the quick path must take it
	}{
		{`{}`, true},
		{` { } `, true},
		{`{"arguments":null}`, true},
		{`{"arguments":{}}`, true},
		{`{"arguments":{"a":1,"b":2}}`, true},
		{"\t{\n\"arguments\" : { \"a\" : -0.5e+3 , \"s\":\"ü ✓ <b>\", \"t\":true,\"f\":false,\"n\":null,\"l\":[],\"o\":{},\"x\":[1,[2,{\"y\":\"z\"}]] } }\r\n", true},
		{`{"arguments":{"dup":1,"dup":2}}`, false},
		{`{"arguments":{"o":{"k":1,"k":2}}}`, false},
		{`{"arguments":{"big":123456789012345678901234567890,"e":1E9,"z":0}}`, true},
		{`{"arguments":{"s":"esc\"aped"}}`, false},
		{`{"arguments":{"s":"\u00fc"}}`, false},
		{"{\"arguments\":{\"s\":\"bad \xff\"}}", false},
		{"{\"arguments\":{\"s\":\"ctl \x01\"}}", false},
		{`{"Arguments":{"a":1}}`, false},
		{`{"arguments":{"a":1},"extra":1}`, false},
		{`{"arguments":{"a":1},"arguments":{"b":2}}`, false},
		{`{"arguments":[1]}`, false},
		{`{"arguments":"x"}`, false},
		{`{"arguments":{"a":01}}`, false},
		{`{"arguments":{"a":-}}`, false},
		{`{"arguments":{"a":1.}}`, false},
		{`{"arguments":{"a":1e}}`, false},
		{`{"arguments":{"a":.5}}`, false},
		{`{"arguments":{"a":tru}}`, false},
		{`{"arguments":{"a":1,}}`, false},
		{`{"arguments":{"a":[1,]}}`, false},
		{`{"arguments":{"a":1}} x`, false},
		{`{"arguments":{"a":1}}{}`, false},
		{`{"arguments":{"a":1}`, false},
		{"{\"arguments\":{\"a\":1}}\n", true},
		{`{"arguments":{"a":1} }`, true},
		{`{"arguments": {"a":1}}`, true},
		{`{"arguments":{"a":"}"},"b":{}}`, false},
		{`{"arguments":{"a":{}},"b":}`, false},
		{`{"arguments":1}`, false},
		{`{"arguments":}`, false},
		{`{"arguments":{"a":1}}}`, false},
		{`[]`, false},
		{`null`, false},
		{strings.Repeat(`{"arguments":`, 1) + strings.Repeat(`{"a":`, 100) + `1` + strings.Repeat(`}`, 101), false},
	}
	for _, c := range cases {
		var req CallRequest
		wantErr := httpx.DecodeStrict([]byte(c.body), &req)
		got, ok := decodeArguments([]byte(c.body))
		if ok != c.fast {
			t.Errorf("%q: quick path %v, want %v", c.body, ok, c.fast)
		}
		if !ok {
			continue
		}
		if wantErr != nil {
			t.Errorf("%q: quick path accepted what DecodeStrict refuses: %v", c.body, wantErr)
			continue
		}
		if diff := cmp.Diff(req.Arguments, got); diff != "" {
			t.Errorf("%q: arguments (-DecodeStrict +quick):\n%s", c.body, diff)
		}
		if (req.Arguments == nil) != (got == nil) {
			t.Errorf("%q: nil arguments %v, want %v", c.body, got == nil, req.Arguments == nil)
		}
	}
}
