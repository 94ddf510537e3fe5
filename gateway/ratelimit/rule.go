// Package ratelimit enforces the gateway's call rates and concurrency
// caps (gateway.rate_limits): token buckets and in-flight counters, one
// per Rule, consulted by the gateway after a call's arguments are
// validated and before it is dispatched, for tool calls from every front
// and for MCP resource reads and prompt gets.
//
// A Limiter is safe for concurrent use. A call costs one lookup of the
// rules that match it (cached by principal, manual and name), one short
// critical section per matching rate rule and one atomic add per
// matching concurrency cap; no lock is shared between rules.
//
// On a single daemon the buckets are in memory. Replicas sharing
// PostgreSQL pass a SharedStore: each replica then leases a share of a
// rule's bucket at a time (Share tokens) and serves calls from its share
// without a query per call (see Options.Shared).
package ratelimit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/utcpd/utcpd/internal/glob"
	"github.com/utcpd/utcpd/utcp"
)

// Rule is one entry of gateway.rate_limits. It matches a call when each
// of Principal, Tools and Manuals is empty or matches (a glob: '*' any
// run of characters, dots included, '?' one character; anything else
// literal). Every matching rule applies: a call goes through only when
// each of them admits it.
//
// A rule's budget is shared by every call it matches (one bucket and one
// counter per rule, not per principal): to limit each API key on its own,
// write one rule per key.
type Rule struct {
	// Name labels the rule in metrics, errors and the audit log; default
	// its index in the list ("0", "1", ...). Names are unique.
	Name string `json:"name,omitempty"`
	// Principal matches the caller: "key:<8 hex>" for an API key, a
	// named key's name, "" for an anonymous caller. Empty matches every
	// caller.
	Principal string `json:"principal,omitempty"`
	// Tools matches the qualified tool name ("github.repos_get"), the
	// utcpd prompt name, or the utcpd resource URI.
	Tools string `json:"tools,omitempty"`
	// Manuals matches the manual's name.
	Manuals string `json:"manuals,omitempty"`
	// Rate is "<n>/<unit>", unit s, m or h ("5/s", "100/m",
	// "1000/h"): the bucket refills at n tokens per unit. Empty: no rate,
	// only MaxConcurrent.
	Rate string `json:"rate,omitempty"`
	// Burst is the bucket's capacity, the calls admitted at once after a
	// quiet spell; default n of Rate.
	Burst int `json:"burst,omitempty"`
	// MaxConcurrent caps the matching calls in flight at once (per
	// daemon process); 0 is no cap.
	MaxConcurrent int `json:"max_concurrent,omitempty"`
}

// ruleKeys are Rule's JSON keys, for unknown-key hints.
var ruleKeys = []string{"name", "principal", "tools", "manuals", "rate", "burst", "max_concurrent"}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,80}$`)

// KeyRulePrefix starts the names of the rules the daemon makes of named
// API keys' rate_limit and max_concurrent ("apikey:ci-bot"); the
// configuration's rules may not use it (ParseRules).
const KeyRulePrefix = "apikey:"

// ParseRate parses "<n>/<period>" into tokens per second and n: the
// period s, m or h (also sec, second, min, minute, hour), or a positive
// Go duration ("20/10s", "1/1h30m").
func ParseRate(s string) (perSecond float64, n int, err error) {
	n, per, err := ParseCount(s)
	if err != nil {
		return 0, 0, err
	}
	return float64(n) / per.Seconds(), n, nil
}

// ParseCount parses "<n>/<period>" as ParseRate does, into n and the
// period.
func ParseCount(s string) (n int, per time.Duration, err error) {
	num, unit, ok := strings.Cut(strings.TrimSpace(s), "/")
	if !ok {
		return 0, 0, fmt.Errorf("rate %q is not <n>/<unit> such as \"100/m\"", s)
	}
	n, err = strconv.Atoi(strings.TrimSpace(num))
	if err != nil || n <= 0 {
		return 0, 0, fmt.Errorf("rate %q: the count must be a positive integer", s)
	}
	switch strings.TrimSpace(unit) {
	case "s", "sec", "second":
		per = time.Second
	case "m", "min", "minute":
		per = time.Minute
	case "h", "hour":
		per = time.Hour
	default:
		per, err = time.ParseDuration(strings.TrimSpace(unit))
		if err != nil || per <= 0 {
			return 0, 0, fmt.Errorf("rate %q: the period must be s, m, h or a duration such as 10s", s)
		}
	}
	return n, per, nil
}

// Validate checks the rules: each has a rate or a max_concurrent, a
// well-formed rate, non-negative burst and max_concurrent, a burst only
// with a rate, and a unique well-formed name. The error names the first
// bad rule by index ("rate_limits[2]: ...").
func Validate(rules []Rule) error {
	names := map[string]int{}
	for i, r := range rules {
		at := fmt.Sprintf("rate_limits[%d]", i)
		if r.Rate == "" && r.MaxConcurrent == 0 {
			return fmt.Errorf("%s: needs a \"rate\" (such as \"100/m\") or a \"max_concurrent\"", at)
		}
		if r.Rate != "" {
			if _, _, err := ParseRate(r.Rate); err != nil {
				return fmt.Errorf("%s: %w", at, err)
			}
		}
		if r.Burst < 0 {
			return fmt.Errorf("%s: burst must be a positive integer", at)
		}
		if r.Burst > 0 && r.Rate == "" {
			return fmt.Errorf("%s: burst needs a rate", at)
		}
		if r.MaxConcurrent < 0 {
			return fmt.Errorf("%s: max_concurrent must be a positive integer (0: no cap)", at)
		}
		label := r.label(i)
		if r.Name != "" && !nameRE.MatchString(r.Name) {
			return fmt.Errorf("%s: name %q must be 1 to 80 letters, digits, '_', '.', ':' or '-'", at, r.Name)
		}
		if j, dup := names[label]; dup {
			return fmt.Errorf("%s: name %q is also the name of rate_limits[%d]", at, label, j)
		}
		names[label] = i
	}
	return nil
}

// ParseRules decodes a gateway.rate_limits array and validates it. An
// unknown key in a rule is an error naming the closest known key (a
// misspelt limit would silently not apply).
func ParseRules(data []byte) ([]Rule, error) {
	var raws []json.RawMessage
	if err := json.Unmarshal(data, &raws); err != nil {
		return nil, errors.New("must be an array of rule objects such as {\"tools\": \"github.*\", \"rate\": \"100/m\"}")
	}
	rules := make([]Rule, len(raws))
	for i, raw := range raws {
		var keys map[string]json.RawMessage
		if err := json.Unmarshal(raw, &keys); err != nil || keys == nil {
			return nil, fmt.Errorf("rate_limits[%d]: must be an object", i)
		}
		for k := range keys {
			if !contains(ruleKeys, k) {
				hint := ""
				if c := utcp.Closest(k, ruleKeys, 1); len(c) > 0 {
					hint = fmt.Sprintf(" (did you mean %q?)", c[0])
				}
				return nil, fmt.Errorf("rate_limits[%d]: unknown field %q%s", i, k, hint)
			}
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		if err := dec.Decode(&rules[i]); err != nil {
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) {
				return nil, fmt.Errorf("rate_limits[%d].%s: must be %s", i, te.Field, kindName(te.Type.Kind().String()))
			}
			return nil, fmt.Errorf("rate_limits[%d]: %v", i, err)
		}
	}
	for i, r := range rules {
		if strings.HasPrefix(r.Name, KeyRulePrefix) {
			return nil, fmt.Errorf("rate_limits[%d]: name %q: names starting with %q are the named API keys' own rules", i, r.Name, KeyRulePrefix)
		}
	}
	if err := Validate(rules); err != nil {
		return nil, err
	}
	return rules, nil
}

func kindName(k string) string {
	if k == "int" {
		return "an integer"
	}
	return "a " + k
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// label is the rule's name, else its index.
func (r Rule) label(i int) string {
	if r.Name != "" {
		return r.Name
	}
	return strconv.Itoa(i)
}

// burst is the rule's bucket capacity (Burst, else n of Rate).
func (r Rule) burst() float64 {
	if r.Burst > 0 {
		return float64(r.Burst)
	}
	_, n, _ := ParseRate(r.Rate)
	return float64(n)
}

// Share is how many tokens a replica leases from a rule's shared bucket
// at a time: an eighth of the burst, at least 1.
func Share(burst float64) float64 { return math.Max(1, math.Ceil(burst/8)) }

// match reports whether the glob pattern p matches s ("" matches
// everything; otherwise internal/glob: '*' any run, '?' one character).
// The limiter caches its matches per call site, so compiling here is not
// on the hot path.
func match(p, s string) bool {
	return p == "" || glob.Compile(p).Match(s)
}
