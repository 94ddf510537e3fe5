package llm

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// MaxNameLen is the longest function name the providers accept.
const MaxNameLen = 64

// Names maps qualified tool names (manual.tool) to the function names the
// providers accept (^[a-zA-Z0-9_-]{1,64}$) and back.
//
// The rule, applied to each qualified name q:
//
//   - Plain form: when q consists of [A-Za-z0-9_.-] only, contains no "__"
//     and no "_" next to a ".", and is at most 64 characters once every
//     "." is written "__", its function name is q with "." → "__"
//     ("weather.get_forecast" → "weather__get_forecast"). Such a name
//     decodes without a table: "__" → ".".
//   - Hashed form: every other name (an existing "__", "_." or "._",
//     another character, or too long) is escaped: its plain rendering
//     (other characters → "_"), cut to fit, then "___" and the first 8 hex
//     digits of SHA-256(q). A plain form never contains "___", so the two
//     forms never meet; the hash is stable, so a name maps the same way
//     whatever else is registered.
//   - Collisions (two hashed names sharing 32 bits of hash) are detected
//     and the later names, in sorted order, get 16 hex digits instead.
//
// The reverse map (Qualified) is computed from the same tool set, so a
// model's call of an exported name always finds its tool.
type Names struct {
	toProvider  map[string]string
	toQualified map[string]string
}

// NewNames computes the mapping of the given qualified names. Duplicates
// are ignored.
func NewNames(qualified []string) *Names {
	n := &Names{toProvider: make(map[string]string, len(qualified)), toQualified: make(map[string]string, len(qualified))}
	var late []string
	for _, q := range qualified {
		if _, ok := n.toProvider[q]; ok {
			continue
		}
		p := FunctionName(q)
		if other, taken := n.toQualified[p]; taken && other != q {
			late = append(late, q)
			continue
		}
		n.toProvider[q] = p
		n.toQualified[p] = q
	}
	for _, q := range late {
		p := hashedName(q, 16)
		for i := 0; ; i++ {
			if _, taken := n.toQualified[p]; !taken {
				break
			}
			p = hashedName(q+strings.Repeat("\x00", i+1), 16)
		}
		n.toProvider[q] = p
		n.toQualified[p] = q
	}
	return n
}

// Provider returns the function name of qualified name q. A name outside
// the set gets FunctionName(q).
func (n *Names) Provider(q string) string {
	if p, ok := n.toProvider[q]; ok {
		return p
	}
	return FunctionName(q)
}

// Qualified returns the qualified name of function name p, and whether p
// names a tool of the set or is a plain form (decoded "__" → ".").
func (n *Names) Qualified(p string) (string, bool) {
	if q, ok := n.toQualified[p]; ok {
		return q, true
	}
	if p == "" || strings.Contains(p, "___") || !validName(p) {
		return "", false
	}
	return strings.ReplaceAll(p, "__", "."), true
}

// Len returns the number of names in the set.
func (n *Names) Len() int { return len(n.toProvider) }

// FunctionName returns the function name of qualified name q by the rule
// of Names, without collision handling.
func FunctionName(q string) string {
	if plain(q) {
		return strings.ReplaceAll(q, ".", "__")
	}
	return hashedName(q, 8)
}

// plain reports whether q has a plain form.
func plain(q string) bool {
	if q == "" || len(q)+strings.Count(q, ".") > MaxNameLen {
		return false
	}
	if strings.Contains(q, "__") || strings.Contains(q, "_.") || strings.Contains(q, "._") || strings.Contains(q, "..") {
		return false
	}
	for i := 0; i < len(q); i++ {
		c := q[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// hashedName is the hashed form with digits hex digits of hash.
func hashedName(q string, digits int) string {
	sum := sha256.Sum256([]byte(q))
	suffix := "___" + hex.EncodeToString(sum[:])[:digits]
	var b strings.Builder
	b.Grow(MaxNameLen)
	limit := MaxNameLen - len(suffix)
	for i := 0; i < len(q) && b.Len() < limit; i++ {
		c := q[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_':
			b.WriteByte(c)
		case c == '.':
			if b.Len()+2 <= limit {
				b.WriteString("__")
			} else {
				b.WriteByte('_')
			}
		default:
			b.WriteByte('_')
		}
	}
	b.WriteString(suffix)
	return b.String()
}

// validName reports whether p matches ^[a-zA-Z0-9_-]{1,64}$.
func validName(p string) bool {
	if len(p) == 0 || len(p) > MaxNameLen {
		return false
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}
