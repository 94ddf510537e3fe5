package codemode

import (
	"strconv"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// string.find, match, gmatch and gsub over the package's own matcher
// (pattern.go): Lua 5.1's semantics, with every matching step charged to
// the run's instruction budget and the deadline checked while matching.

// patternSpecials are the characters that make find use patterns.
const patternSpecials = "^$*+?.([%-"

// gsubCheckEvery is how many bytes gsub's result may grow between two
// checks of it against the memory limit.
const gsubCheckEvery = 64 << 10

func strFind(L *lua.LState) int  { return findOrMatch(L, true) }
func strMatch(L *lua.LState) int { return findOrMatch(L, false) }

// startIndex is Lua 5.1's 0-based start for an init argument: negative
// counts from the end, clamped to [0, len].
func startIndex(init int64, n int) int {
	if init < 0 {
		init += int64(n) + 1
	}
	return int(min(max(init-1, 0), int64(n)))
}

func findOrMatch(L *lua.LState, find bool) int {
	s, pat := L.CheckString(1), L.CheckString(2)
	init := startIndex(L.OptInt64(3, 1), len(s))
	if find && (lua.LVAsBool(L.Get(4)) || !strings.ContainsAny(pat, patternSpecials)) {
		i := strings.Index(s[init:], pat)
		if i < 0 {
			L.Push(lua.LNil)
			return 1
		}
		L.Push(lua.LNumber(init + i + 1))
		L.Push(lua.LNumber(init + i + len(pat)))
		return 2
	}
	m := newMatcher(L, runOf(L).hook, s, pat)
	defer m.settle()
	p, anchor := 0, strings.HasPrefix(pat, "^")
	if anchor {
		p = 1
	}
	for st := init; ; st++ {
		m.reset()
		if e := m.match(st, p); e != -1 {
			if find {
				L.Push(lua.LNumber(st + 1))
				L.Push(lua.LNumber(e))
				return 2 + m.pushCaptures(st, e, false)
			}
			return m.pushCaptures(st, e, true)
		}
		if anchor || st >= len(s) {
			break
		}
	}
	L.Push(lua.LNil)
	return 1
}

// strGmatch returns an iterator over the matches of the pattern in s;
// as in Lua 5.1, '^' has no special meaning in gmatch. Matching is lazy:
// each call of the iterator looks for the next match.
func strGmatch(L *lua.LState) int {
	s, pat := L.CheckString(1), L.CheckString(2)
	pos := 0
	L.Push(L.NewFunction(func(L *lua.LState) int {
		m := newMatcher(L, runOf(L).hook, s, pat)
		defer m.settle()
		for ; pos <= len(s); pos++ {
			m.reset()
			if e := m.match(pos, 0); e != -1 {
				st := pos
				pos = e
				if e == st { // an empty match: go on one character later
					pos++
				}
				return m.pushCaptures(st, e, true)
			}
		}
		return 0
	}))
	return 1
}

// strGsub is string.gsub(s, pattern, repl [, n]); repl is a string (with
// %0..%9), a number, a table or a function. Its result is checked
// against the memory limit while it is built.
func strGsub(L *lua.LState) int {
	rn := runOf(L)
	src, pat := L.CheckString(1), L.CheckString(2)
	repl := L.Get(3)
	switch repl.Type() {
	case lua.LTNumber, lua.LTString, lua.LTTable, lua.LTFunction:
	default:
		L.ArgError(3, "string/function/table expected")
	}
	maxN := int64(len(src)) + 1
	if L.GetTop() >= 4 && L.Get(4) != lua.LNil {
		maxN = L.CheckInt64(4)
	}
	p, anchor := 0, strings.HasPrefix(pat, "^")
	if anchor {
		p = 1
	}
	m := newMatcher(L, rn.hook, src, pat)
	defer m.settle()
	out := gsubBuf{L: L, rn: rn}
	s, n := 0, int64(0)
loop:
	for n < maxN {
		m.reset()
		e := m.match(s, p)
		if e != -1 {
			n++
			out.replace(m, repl, s, e)
		}
		switch {
		case e != -1 && e > s:
			s = e
		case s < len(src):
			out.b.WriteByte(src[s])
			s++
		default:
			break loop // the end of the subject
		}
		if anchor {
			break
		}
	}
	out.add(src[s:])
	res := out.b.String()
	rn.charge(L, int64(len(res))+sizeString)
	L.Push(lua.LString(res))
	L.Push(lua.LNumber(n))
	return 2
}

// gsubBuf is gsub's result being built.
type gsubBuf struct {
	L       *lua.LState
	rn      *run
	b       strings.Builder
	checked int
}

// add appends s, checking the result's size against the memory limit
// before a large piece and every gsubCheckEvery bytes.
func (g *gsubBuf) add(s string) {
	if len(s) >= gsubCheckEvery {
		g.rn.hold(g.L, int64(g.b.Len()+len(s)))
	}
	g.b.WriteString(s)
	if g.b.Len()-g.checked >= gsubCheckEvery {
		g.checked = g.b.Len()
		g.rn.hold(g.L, int64(g.b.Cap()))
	}
}

// replace appends the replacement of the match src[s:e].
func (g *gsubBuf) replace(m *matcher, repl lua.LValue, s, e int) {
	L := g.L
	var v lua.LValue
	switch r := repl.(type) {
	case lua.LString:
		g.template(m, string(r), s, e)
		return
	case lua.LNumber:
		g.add(lua.LVAsString(r))
		return
	case *lua.LTable:
		v = L.GetTable(r, m.capture(0, s, e))
	case *lua.LFunction:
		L.Push(r)
		L.Call(m.pushCaptures(s, e, true), 1)
		v = L.Get(-1)
		L.Pop(1)
	}
	switch v.Type() {
	case lua.LTNil:
		g.add(m.src[s:e])
	case lua.LTBool:
		if v == lua.LFalse {
			g.add(m.src[s:e])
			return
		}
		L.RaiseError("invalid replacement value (a %s)", v.Type().String())
	case lua.LTString, lua.LTNumber:
		g.add(lua.LVAsString(v))
	default:
		L.RaiseError("invalid replacement value (a %s)", v.Type().String())
	}
}

// template appends a string replacement: %0 is the match, %1..%9 its
// captures, % before any other character that character.
func (g *gsubBuf) template(m *matcher, r string, s, e int) {
	for i := 0; i < len(r); i++ {
		j := strings.IndexByte(r[i:], '%')
		if j < 0 {
			g.add(r[i:])
			return
		}
		g.add(r[i : i+j])
		i += j + 1
		if i >= len(r) {
			g.add("%")
			return
		}
		switch c := r[i]; {
		case c == '0':
			g.add(m.src[s:e])
		case c >= '1' && c <= '9':
			switch v := m.capture(int(c-'1'), s, e).(type) {
			case lua.LString:
				g.add(string(v))
			case lua.LNumber:
				g.add(strconv.FormatInt(int64(v), 10))
			}
		default:
			g.b.WriteByte(c)
		}
	}
}
