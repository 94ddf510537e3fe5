// Package glob is the name pattern every part of utcpd matches names
// with: the policy guard's rules, API key scopes, toolsets and rate
// limits. One syntax, one matcher, compiled once.
package glob

import (
	"strings"
	"unicode/utf8"
)

// Glob is a compiled name pattern. '*' matches any run of characters,
// dots included, and '?' exactly one character; every other character
// matches itself, case-sensitively. There are no character classes and no
// escapes. So "billing.*" matches "billing.charge" and
// "billing.sub.refund", "*.delete" matches every tool named delete in any
// manual, and a pattern without wildcards matches only that exact name.
// The zero Glob matches only "".
type Glob struct {
	pattern string
	kind    globKind
	lit     string // globExact, globPrefix: the literal; globSuffix: the suffix
}

type globKind uint8

const (
	globExact   globKind = iota // no wildcards
	globPrefix                  // literal then one trailing '*'
	globSuffix                  // one leading '*' then a literal
	globAny                     // "*"
	globGeneral                 // anything else
)

// Compile compiles pattern. Every pattern is valid.
func Compile(pattern string) Glob {
	g := Glob{pattern: pattern, kind: globGeneral}
	stars := strings.Count(pattern, "*")
	qs := strings.Count(pattern, "?")
	switch {
	case stars == 0 && qs == 0:
		g.kind, g.lit = globExact, pattern
	case qs == 0 && stars == len(pattern):
		g.kind = globAny
	case qs == 0 && stars == 1 && strings.HasSuffix(pattern, "*"):
		g.kind, g.lit = globPrefix, pattern[:len(pattern)-1]
	case qs == 0 && stars == 1 && strings.HasPrefix(pattern, "*"):
		g.kind, g.lit = globSuffix, pattern[1:]
	}
	return g
}

// String returns the pattern.
func (g Glob) String() string { return g.pattern }

// Literal reports whether the pattern has no wildcards, so that it matches
// exactly one name (the pattern itself).
func (g Glob) Literal() bool { return g.kind == globExact }

// Prefix returns the pattern's literal prefix: every name it matches
// starts with it.
func (g Glob) Prefix() string {
	if i := strings.IndexAny(g.pattern, "*?"); i >= 0 {
		return g.pattern[:i]
	}
	return g.pattern
}

// Covers reports whether the pattern matches every name that starts with
// prefix ("*", or "lit*" where prefix starts with lit): a manual a scope
// excludes whole, say.
func (g Glob) Covers(prefix string) bool {
	return g.kind == globAny || g.kind == globPrefix && strings.HasPrefix(prefix, g.lit)
}

// Match reports whether name matches the pattern.
func (g Glob) Match(name string) bool {
	switch g.kind {
	case globExact:
		return name == g.lit
	case globAny:
		return true
	case globPrefix:
		return strings.HasPrefix(name, g.lit)
	case globSuffix:
		return strings.HasSuffix(name, g.lit)
	}
	return matchGeneral(g.pattern, name)
}

// matchGeneral matches with the usual single-backtrack algorithm: on a
// mismatch, the last '*' absorbs one more character. Its cost is
// O(len(pattern)·len(name)) at worst, with no allocation or recursion.
func matchGeneral(p, s string) bool {
	pi, si := 0, 0
	starP, starS := -1, 0
	for si < len(s) {
		if pi < len(p) {
			switch p[pi] {
			case '*':
				starP, starS = pi, si
				pi++
				continue
			case '?':
				_, n := utf8.DecodeRuneInString(s[si:])
				pi++
				si += n
				continue
			default:
				if p[pi] == s[si] {
					pi++
					si++
					continue
				}
			}
		}
		if starP < 0 {
			return false
		}
		// Backtrack: the star takes one more character.
		_, n := utf8.DecodeRuneInString(s[starS:])
		starS += n
		pi, si = starP+1, starS
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

// Globs is a list of patterns; a name matches the list when it matches
// any of them.
type Globs []Glob

// CompileAll compiles patterns.
func CompileAll(patterns []string) Globs {
	out := make(Globs, len(patterns))
	for i, p := range patterns {
		out[i] = Compile(p)
	}
	return out
}

// Match reports whether name matches any pattern of gs.
func (gs Globs) Match(name string) bool {
	for _, g := range gs {
		if g.Match(name) {
			return true
		}
	}
	return false
}
