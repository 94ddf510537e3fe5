package daemon

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/utcp"
)

// apiKeysInvalid is the message of an api_keys value that is not an
// array of keys.
const apiKeysInvalid = `must be an array of keys: strings, or objects such as {"name": "ci-bot", "key_env": "CI_BOT_KEY", "tools": ["github.*"]}`

// apiKeyFields are the keys of a named API key object, in the order
// messages list them.
var apiKeyFields = []string{"name", "key_env", "key_sha256", "tools", "manuals", "tags", "toolsets", "rate_limit", "max_concurrent"}

// readAPIKeys reads the gateway section's api_keys array: each entry a
// plain key (a string: trimmed, empty ones dropped; its principal is
// "key:<8 hex>" and it may call every tool) or a named key object
//
//	{"name": "ci-bot", "key_env": "CI_BOT_KEY" | "key_sha256": "<64 hex>",
//	 "tools": ["github.*", "!github.repos/delete"], "manuals": [...],
//	 "tags": [...], "toolsets": [...], "rate_limit": "5/s", "max_concurrent": 4}
//
// with exactly one of key_env and key_sha256, a valid name
// (gateway.ValidKeyName) used once, and valid globs (gateway.NewScope).
// Unlike the gateway section's, an unknown key in an object is an error:
// a misspelt "tools" must not give a key every tool. key_env is not read
// here (ResolveAPIKeys does, at start). The message names the entry by
// its index and name, never a key or a digest.
func readAPIKeys(v json.RawMessage) (plain []string, named []gateway.APIKey, msg string) {
	var entries []json.RawMessage
	if json.Unmarshal(v, &entries) != nil {
		return nil, nil, apiKeysInvalid
	}
	seen := map[string]int{}
	for i, e := range entries {
		e = bytes.TrimSpace(e)
		if len(e) > 0 && e[0] == '"' {
			var s string
			if json.Unmarshal(e, &s) != nil {
				return nil, nil, apiKeysInvalid
			}
			if s = strings.TrimSpace(s); s != "" {
				plain = append(plain, s)
			}
			continue
		}
		k, err := readAPIKey(e)
		if err != nil {
			where := fmt.Sprintf("[%d]", i)
			if k.Name != "" {
				where += fmt.Sprintf(" (%q)", k.Name)
			}
			return nil, nil, where + ": " + err.Error()
		}
		if j, dup := seen[k.Name]; dup {
			return nil, nil, fmt.Sprintf("[%d]: the name %q is already the name of [%d]; names must be unique", i, k.Name, j)
		}
		seen[k.Name] = i
		named = append(named, k)
	}
	return plain, named, ""
}

// readAPIKey reads one named key object (see readAPIKeys). The key it
// returns with an error holds the name when there was a usable one.
func readAPIKey(e json.RawMessage) (gateway.APIKey, error) {
	var k gateway.APIKey
	var obj map[string]json.RawMessage
	if json.Unmarshal(e, &obj) != nil || obj == nil {
		return k, fmt.Errorf(`must be a string (a plain key) or an object such as {"name": "ci-bot", "key_env": "CI_BOT_KEY", "tools": ["github.*"]}`)
	}
	str := func(key string) (string, bool, error) {
		raw, ok := obj[key]
		if !ok || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
			return "", false, nil
		}
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return "", true, fmt.Errorf("%s must be a string", key)
		}
		return strings.TrimSpace(s), true, nil
	}
	list := func(key string) ([]string, error) {
		raw, ok := obj[key]
		if !ok || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
			return nil, nil
		}
		var l []string
		if json.Unmarshal(raw, &l) != nil {
			return nil, fmt.Errorf("%s must be an array of strings", key)
		}
		for i, s := range l {
			if l[i] = strings.TrimSpace(s); l[i] == "" {
				return nil, fmt.Errorf("%s[%d] must not be empty", key, i)
			}
		}
		return l, nil
	}

	name, has, err := str("name")
	switch {
	case err != nil:
		return k, err
	case !has || name == "":
		return k, fmt.Errorf(`a named key needs a "name" (its principal in audit, policies and metrics)`)
	case !gateway.ValidKeyName(name):
		return k, fmt.Errorf(`the name %q is not valid: 1 to 64 of A-Z a-z 0-9 _ - ., starting with a letter or digit, and not "cli", "stdio" or "utcpd..."`, name)
	}
	k.Name = name
	for _, key := range slices.Sorted(maps.Keys(obj)) {
		if !slices.Contains(apiKeyFields, key) {
			hint := ""
			if c := utcp.Closest(key, apiKeyFields, 1); len(c) > 0 {
				hint = fmt.Sprintf(" (did you mean %q?)", c[0])
			}
			return k, fmt.Errorf("unknown field %q%s; a named key has %s", key, hint, strings.Join(apiKeyFields, ", "))
		}
	}
	env, hasEnv, err := str("key_env")
	if err != nil {
		return k, err
	}
	sum, hasSum, err := str("key_sha256")
	if err != nil {
		return k, err
	}
	switch {
	case hasEnv && hasSum:
		return k, fmt.Errorf("key_env and key_sha256 are both set; give exactly one")
	case !hasEnv && !hasSum:
		return k, fmt.Errorf(`give exactly one of key_env (the environment variable holding the key) and key_sha256 (the hex SHA-256 of the key)`)
	case hasEnv && !validEnvName(env):
		return k, fmt.Errorf("key_env %q is not an environment variable name", env)
	case hasSum:
		if b, err := hex.DecodeString(sum); err != nil || len(b) != 32 {
			return k, fmt.Errorf("key_sha256 must be 64 hex digits (the SHA-256 of the key, e.g. from `printf %%s \"$KEY\" | sha256sum`)")
		}
	}
	k.KeyEnv, k.SHA256 = env, strings.ToLower(sum)

	tools, err := list("tools")
	if err != nil {
		return k, err
	}
	manuals, err := list("manuals")
	if err != nil {
		return k, err
	}
	tags, err := list("tags")
	if err != nil {
		return k, err
	}
	if k.Scope, err = gateway.NewScope(tools, manuals, tags); err != nil {
		return k, err
	}
	if k.Toolsets, err = list("toolsets"); err != nil {
		return k, err
	}
	rate, hasRate, err := str("rate_limit")
	if err != nil {
		return k, err
	}
	if hasRate {
		r, err := gateway.ParseRateLimit(rate)
		if err != nil {
			return k, err
		}
		k.RateLimit = &r
	}
	if raw, ok := obj["max_concurrent"]; ok && !bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		if json.Unmarshal(raw, &k.MaxConcurrent) != nil || k.MaxConcurrent <= 0 {
			return k, fmt.Errorf("max_concurrent must be a positive integer")
		}
	}
	return k, nil
}

// validEnvName reports whether s is a portable environment variable
// name: letters, digits and _, not starting with a digit.
func validEnvName(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// ResolveAPIKeys returns the named keys of s with each key_env read
// through lookup (os.LookupEnv at start). It fails, naming the key and
// the variable but never a value, on a variable that is unset or empty,
// and on a key whose value is also another key's (two principals for
// one token).
func ResolveAPIKeys(s *Settings, lookup func(string) (string, bool)) ([]gateway.APIKey, error) {
	out := slices.Clone(s.NamedKeys)
	digests := map[[32]byte]bool{}
	for _, p := range s.APIKeys {
		k := gateway.PlainKey(p)
		d, _ := k.Digest()
		digests[d] = true
	}
	for i := range out {
		if err := out[i].ResolveEnv(lookup); err != nil {
			return nil, fmt.Errorf("gateway.api_keys: %w", err)
		}
		d, _ := out[i].Digest()
		if digests[d] {
			return nil, fmt.Errorf("gateway.api_keys: API key %q has the same key as another entry; each key must be distinct", out[i].Name)
		}
		digests[d] = true
	}
	return out, nil
}
