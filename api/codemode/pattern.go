package codemode

import (
	lua "github.com/yuin/gopher-lua"
)

// Lua 5.1 patterns, matched by backtracking over the subject as Lua's
// own string library does, but interruptible: every step (an attempt at
// a pattern position, one character of an expansion, of a backtrack or
// of a %b scan) counts, and every patternCheckEvery steps the count is
// charged to the run's instruction budget and the deadline is checked,
// so a pathological pattern stops within microseconds of its run's
// deadline instead of running on inside Go.

const (
	// maxCaptures is Lua's LUA_MAXCAPTURES.
	maxCaptures = 32
	// maxMatchDepth bounds the matcher's recursion (each quantifier,
	// optional item and capture in the pattern's path nests one level),
	// like Lua 5.2's MAXCCALLS; past it the match fails with "pattern
	// too complex" instead of growing the Go stack.
	maxMatchDepth = 200
	// patternCheckEvery is how many steps pass between two checks.
	patternCheckEvery = 1024
)

// Capture lengths with a special meaning.
const (
	capUnfinished = -1
	capPosition   = -2
)

// matcher is one match attempt's state over src with pat.
type matcher struct {
	L        *lua.LState
	h        *hook // nil: no budget (tests of the matcher alone)
	src, pat string
	level    int
	start    [maxCaptures]int
	length   [maxCaptures]int
	depth    int
	steps    int64
}

func newMatcher(L *lua.LState, h *hook, src, pat string) *matcher {
	return &matcher{L: L, h: h, src: src, pat: pat}
}

func (m *matcher) fail(msg string) {
	m.L.RaiseError("%s", msg)
}

// step counts one unit of work.
func (m *matcher) step() {
	m.steps++
	if m.steps%patternCheckEvery == 0 && m.h != nil {
		m.h.spend(m.L, patternCheckEvery)
	}
}

// settle charges the steps not charged yet (at the end of a call).
func (m *matcher) settle() {
	if m.h != nil {
		m.h.steps += m.steps % patternCheckEvery
	}
	m.steps = 0
}

// reset prepares a new attempt at another subject position.
func (m *matcher) reset() {
	m.level = 0
	m.depth = 0
}

// match tries pat[p:] at src[s:] and returns the end of the match, or
// -1.
func (m *matcher) match(s, p int) int {
	m.depth++
	if m.depth > maxMatchDepth {
		m.fail("pattern too complex")
	}
	r := m.doMatch(s, p)
	m.depth--
	return r
}

func (m *matcher) doMatch(s, p int) int {
	src, pat := m.src, m.pat
	for {
		m.step()
		if p == len(pat) {
			return s
		}
		switch pat[p] {
		case '(':
			if p+1 < len(pat) && pat[p+1] == ')' {
				return m.openCapture(s, p+2, capPosition)
			}
			return m.openCapture(s, p+1, capUnfinished)
		case ')':
			return m.closeCapture(s, p+1)
		case '$':
			if p+1 == len(pat) {
				if s == len(src) {
					return s
				}
				return -1
			}
		case '%':
			if p+1 < len(pat) {
				switch c := pat[p+1]; {
				case c == 'b':
					if s = m.balance(s, p+2); s == -1 {
						return -1
					}
					p += 4
					continue
				case c == 'f':
					p += 2
					if p >= len(pat) || pat[p] != '[' {
						m.fail("missing '[' after '%f' in pattern")
					}
					ep := m.classEnd(p)
					var prev, cur byte
					if s > 0 {
						prev = src[s-1]
					}
					if s < len(src) {
						cur = src[s]
					}
					if m.inSet(prev, p, ep-1) || !m.inSet(cur, p, ep-1) {
						return -1
					}
					p = ep
					continue
				case c >= '0' && c <= '9':
					if s = m.backref(s, c); s == -1 {
						return -1
					}
					p += 2
					continue
				}
			}
		}
		// A single-character item, maybe with a quantifier.
		ep := m.classEnd(p)
		ok := s < len(src) && m.single(src[s], p, ep)
		if ep < len(pat) {
			switch pat[ep] {
			case '?':
				if ok {
					if r := m.match(s+1, ep+1); r != -1 {
						return r
					}
				}
				p = ep + 1
				continue
			case '*':
				return m.maxExpand(s, p, ep)
			case '+':
				if !ok {
					return -1
				}
				return m.maxExpand(s+1, p, ep)
			case '-':
				return m.minExpand(s, p, ep)
			}
		}
		if !ok {
			return -1
		}
		s++
		p = ep
	}
}

// maxExpand matches as many repetitions of the item pat[p:ep] as there
// are from s, then gives them back one at a time until the rest
// matches.
func (m *matcher) maxExpand(s, p, ep int) int {
	i := 0
	for s+i < len(m.src) && m.single(m.src[s+i], p, ep) {
		m.step()
		i++
	}
	for ; i >= 0; i-- {
		if r := m.match(s+i, ep+1); r != -1 {
			return r
		}
	}
	return -1
}

// minExpand matches as few repetitions as let the rest match.
func (m *matcher) minExpand(s, p, ep int) int {
	for {
		if r := m.match(s, ep+1); r != -1 {
			return r
		}
		if s < len(m.src) && m.single(m.src[s], p, ep) {
			s++
			continue
		}
		return -1
	}
}

func (m *matcher) openCapture(s, p, what int) int {
	if m.level >= maxCaptures {
		m.fail("too many captures")
	}
	m.start[m.level], m.length[m.level] = s, what
	m.level++
	r := m.match(s, p)
	if r == -1 {
		m.level--
	}
	return r
}

func (m *matcher) closeCapture(s, p int) int {
	l := -1
	for i := m.level - 1; i >= 0; i-- {
		if m.length[i] == capUnfinished {
			l = i
			break
		}
	}
	if l < 0 {
		m.fail("invalid pattern capture")
	}
	m.length[l] = s - m.start[l]
	r := m.match(s, p)
	if r == -1 {
		m.length[l] = capUnfinished
	}
	return r
}

// balance matches %bxy (pat[p] = x, pat[p+1] = y) at s.
func (m *matcher) balance(s, p int) int {
	if p+1 >= len(m.pat) {
		m.fail("unbalanced pattern")
	}
	if s >= len(m.src) || m.src[s] != m.pat[p] {
		return -1
	}
	open, closing := m.pat[p], m.pat[p+1]
	depth := 1
	for i := s + 1; i < len(m.src); i++ {
		m.step()
		switch m.src[i] {
		case closing:
			if depth--; depth == 0 {
				return i + 1
			}
		case open:
			depth++
		}
	}
	return -1
}

// backref matches the text of capture c ('1'..'9') again at s.
func (m *matcher) backref(s int, c byte) int {
	i := int(c - '1')
	if i < 0 || i >= m.level || m.length[i] == capUnfinished {
		m.fail("invalid capture index")
	}
	n := m.length[i]
	if n < 0 { // a position capture never matches text
		return -1
	}
	if len(m.src)-s >= n && m.src[m.start[i]:m.start[i]+n] == m.src[s:s+n] {
		m.steps += int64(n / 64)
		return s + n
	}
	return -1
}

// classEnd is the end of the single-character item at p.
func (m *matcher) classEnd(p int) int {
	pat := m.pat
	c := pat[p]
	p++
	switch c {
	case '%':
		if p >= len(pat) {
			m.fail("malformed pattern (ends with '%')")
		}
		return p + 1
	case '[':
		if p < len(pat) && pat[p] == '^' {
			p++
		}
		for { // the first character is part of the set, even ']'
			if p >= len(pat) {
				m.fail("malformed pattern (missing ']')")
			}
			c := pat[p]
			p++
			if c == '%' && p < len(pat) {
				p++
			}
			if p >= len(pat) {
				m.fail("malformed pattern (missing ']')")
			}
			if pat[p] == ']' {
				return p + 1
			}
		}
	}
	return p
}

// single reports whether c matches the item pat[p:ep].
func (m *matcher) single(c byte, p, ep int) bool {
	switch m.pat[p] {
	case '.':
		return true
	case '%':
		return matchClass(c, m.pat[p+1])
	case '[':
		return m.inSet(c, p, ep-1)
	default:
		return m.pat[p] == c
	}
}

// inSet matches c against the set pat[p] = '[' ... pat[ec] = ']'.
func (m *matcher) inSet(c byte, p, ec int) bool {
	pat := m.pat
	want := true
	p++
	if pat[p] == '^' {
		want = false
		p++
	}
	for ; p < ec; p++ {
		switch {
		case pat[p] == '%' && p+1 < ec:
			p++
			if matchClass(c, pat[p]) {
				return want
			}
		case p+2 < ec && pat[p+1] == '-':
			if pat[p] <= c && c <= pat[p+2] {
				return want
			}
			p += 2
		case pat[p] == c:
			return want
		}
	}
	return !want
}

// matchClass matches c against %cl (C locale classes; an upper-case
// class is the complement; any other character stands for itself).
func matchClass(c, cl byte) bool {
	var r bool
	switch cl | 0x20 {
	case 'a':
		r = isAlpha(c)
	case 'c':
		r = c < 32 || c == 127
	case 'd':
		r = c >= '0' && c <= '9'
	case 'l':
		r = c >= 'a' && c <= 'z'
	case 'p':
		r = isPunct(c)
	case 's':
		r = c == ' ' || (c >= '\t' && c <= '\r')
	case 'u':
		r = c >= 'A' && c <= 'Z'
	case 'w':
		r = isAlpha(c) || (c >= '0' && c <= '9')
	case 'x':
		r = (c >= '0' && c <= '9') || (c|0x20 >= 'a' && c|0x20 <= 'f')
	case 'z':
		r = c == 0
	default:
		return cl == c
	}
	if cl >= 'A' && cl <= 'Z' {
		return !r
	}
	return r
}

func isAlpha(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }

func isPunct(c byte) bool {
	return c > 32 && c < 127 && !isAlpha(c) && !(c >= '0' && c <= '9')
}

// capture is capture i of a match src[s:e] as a Lua value (the whole
// match when the pattern has no captures and i is 0).
func (m *matcher) capture(i, s, e int) lua.LValue {
	if i >= m.level {
		if i == 0 {
			return lua.LString(m.src[s:e])
		}
		m.fail("invalid capture index")
	}
	switch n := m.length[i]; n {
	case capUnfinished:
		m.fail("unfinished capture")
	case capPosition:
		return lua.LNumber(m.start[i] + 1)
	default:
		return lua.LString(m.src[m.start[i] : m.start[i]+n])
	}
	return lua.LNil
}

// pushCaptures pushes the captures of the match src[s:e] (the whole
// match if there are none and wholeIfNone) and returns their count.
func (m *matcher) pushCaptures(s, e int, wholeIfNone bool) int {
	n := m.level
	if n == 0 && wholeIfNone {
		n = 1
	}
	for i := range n {
		m.L.Push(m.capture(i, s, e))
	}
	return n
}
