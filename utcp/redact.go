package utcp

import (
	"encoding/json"
	"regexp"
	"strings"
)

// Redacted replaces secret values in output.
const Redacted = "[redacted]"

// onlyVariables matches a string made only of ${VAR} / $VAR references
// and literal text that is not itself a credential, e.g. "Bearer ${TOKEN}".
var variableRef = regexp.MustCompile(`\$\{[A-Za-z0-9_]+\}|\$[A-Za-z0-9_]+`)

// Redact returns a copy of the JSON document raw with the values of
// secret-looking fields (SecretName) replaced by Redacted, and every other
// string redacted by value (RedactText: secret URL query values, user
// info and DSN passwords, token shapes). A value that is only variable
// references (with at most a short prefix such as "Bearer ") is kept,
// because it names a variable rather than holding a secret. Values under
// the keys var_name, location, auth_type, token_url, ownership and
// grant_type describe auth and are kept too (still redacted by value).
// Invalid JSON is returned as Redacted.
func Redact(raw json.RawMessage) json.RawMessage {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		b, _ := json.Marshal(Redacted)
		return b
	}
	out, err := json.Marshal(redactValue(v, false))
	if err != nil {
		b, _ := json.Marshal(Redacted)
		return b
	}
	return out
}

var authDescriptors = map[string]bool{
	"var_name": true, "location": true, "auth_type": true, "token_url": true, "token_endpoint": true,
	"ownership": true, "grant_type": true, "scope": true, "client_id": true, "username": true, "prefix": true,
	"device_authorization_endpoint": true, "authorization_endpoint": true, "auth_tools": false,
}

func redactValue(v any, secret bool) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, val := range x {
			s := secret
			if authDescriptors[k] {
				s = false
			} else if SecretName(k) {
				s = true
			}
			out[k] = redactValue(val, s)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, val := range x {
			out[i] = redactValue(val, secret)
		}
		return out
	case string:
		if secret && !onlyVariables(x) {
			return Redacted
		}
		return RedactText(x)
	case nil, bool:
		return x
	default:
		if secret {
			return Redacted
		}
		return x
	}
}

func onlyVariables(s string) bool {
	if !variableRef.MatchString(s) {
		return s == ""
	}
	rest := strings.TrimSpace(variableRef.ReplaceAllString(s, ""))
	return len(rest) <= 12 && !strings.ContainsAny(rest, "=:")
}
