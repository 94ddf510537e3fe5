package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// parsePointer splits an RFC 6901 JSON Pointer into its unescaped
// reference tokens. "" is the whole document; any other pointer starts
// with '/'. In a token "~1" is '/' and "~0" is '~'; any other '~' is an
// error.
func parsePointer(p string) ([]string, error) {
	if p == "" {
		return nil, nil
	}
	if p[0] != '/' {
		return nil, fmt.Errorf("invalid JSON pointer %q: it must be empty or start with '/'", p)
	}
	parts := strings.Split(p[1:], "/")
	for i, t := range parts {
		if !strings.Contains(t, "~") {
			continue
		}
		var b strings.Builder
		for j := 0; j < len(t); j++ {
			if t[j] != '~' {
				b.WriteByte(t[j])
				continue
			}
			if j+1 < len(t) && (t[j+1] == '0' || t[j+1] == '1') {
				if t[j+1] == '0' {
					b.WriteByte('~')
				} else {
					b.WriteByte('/')
				}
				j++
				continue
			}
			return nil, fmt.Errorf("invalid JSON pointer %q: '~' must be followed by 0 or 1", p)
		}
		parts[i] = b.String()
	}
	return parts, nil
}

// resolve evaluates a parsed pointer against doc. ok is false when a
// member or element does not exist. Values of Go types other than the
// ones encoding/json decodes into are looked at through their JSON form.
func resolve(doc any, tokens []string) (v any, ok bool) {
	v = doc
	for _, tok := range tokens {
		switch c := v.(type) {
		case map[string]any:
			if v, ok = c[tok]; !ok {
				return nil, false
			}
		case []any:
			i, ok := arrayIndex(tok, len(c))
			if !ok {
				return nil, false
			}
			v = c[i]
		default:
			n, ok := normalize(c)
			if !ok {
				return nil, false
			}
			switch n.(type) {
			case map[string]any, []any:
			default:
				return nil, false // a scalar has no members
			}
			if v, ok = resolve(n, []string{tok}); !ok {
				return nil, false
			}
		}
	}
	return v, true
}

// arrayIndex parses an RFC 6901 array index: "0" or digits without a
// leading zero, below n. "-" (past the end) never resolves.
func arrayIndex(tok string, n int) (int, bool) {
	if tok == "" || len(tok) > 1 && tok[0] == '0' {
		return 0, false
	}
	i := 0
	for j := 0; j < len(tok); j++ {
		c := tok[j]
		if c < '0' || c > '9' {
			return 0, false
		}
		i = i*10 + int(c-'0')
		if i >= n {
			return 0, false
		}
	}
	return i, true
}

// normalize turns a value of any Go type into the form encoding/json
// decodes JSON into (with UseNumber): map[string]any, []any, string,
// json.Number, bool or nil. ok is false for values that have no JSON
// form, and for values already in that form.
func normalize(v any) (any, bool) {
	switch v.(type) {
	case map[string]any, []any, string, json.Number, bool, nil:
		return nil, false
	}
	b, err := marshal(v)
	if err != nil {
		return nil, false
	}
	n, err := decodeValue(b)
	if err != nil {
		return nil, false
	}
	return n, true
}

// marshal encodes v as compact JSON without HTML escaping.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	if len(b) == 0 {
		return nil, errors.New("empty encoding")
	}
	return b, nil
}
