package codemode

import (
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// patternSubject caps the subject of the pattern functions (find without
// plain, match, gmatch, gsub): their matching runs inside Go, where
// neither the instruction budget nor the deadline can stop it, and gmatch
// and gsub collect every match up front.
func (rn *run) patternSubject() int {
	return int(min(1<<20, rn.memLimit/64))
}

// The string functions that build strings or run patterns, checked
// before the originals (package lib) run.
func strRep(L *lua.LState) int {
	rn := runOf(L)
	s, n := L.CheckString(1), L.CheckInt64(2)
	if n > 0 && len(s) > 0 {
		if n > rn.memLimit/int64(len(s)) {
			rn.charge(L, -1)
		}
		rn.charge(L, n*int64(len(s)))
	}
	return lib.str["rep"](L)
}

// strByte refuses, up front, more results than the value stack holds.
func strByte(L *lua.LState) int {
	rn := runOf(L)
	s := L.CheckString(1)
	i := L.OptInt64(2, 1)
	j := L.OptInt64(3, i)
	n := int64(len(s))
	if i < 0 {
		i += n + 1
	}
	if j < 0 {
		j += n + 1
	}
	if min(j, n)-max(i, 1)+1 > int64(rn.r.opts.MaxRegistrySlots) {
		rn.kill(killMemory, "string.byte: too many values for the Lua value stack")
		L.RaiseError("%s", rn.killMsg)
	}
	return lib.str["byte"](L)
}

func strFormat(L *lua.LState) int {
	runOf(L).checkFormat(L)
	return lib.str["format"](L)
}

func strSameSize(name string) lua.LGFunction {
	orig := lib.str[name]
	return func(L *lua.LState) int {
		runOf(L).charge(L, int64(len(L.CheckString(1))))
		return orig(L)
	}
}

func strChar(L *lua.LState) int {
	runOf(L).charge(L, int64(L.GetTop()))
	return lib.str["char"](L)
}

func strFind(L *lua.LState) int {
	if !lua.LVAsBool(L.Get(4)) {
		runOf(L).checkSubject(L)
	}
	return lib.str["find"](L)
}

func strMatch(L *lua.LState) int {
	runOf(L).checkSubject(L)
	return lib.str["match"](L)
}

// strGmatch is a closure over gopher-lua's gmatch iterator (upvalue 1),
// as the original is.
func strGmatch(L *lua.LState) int {
	runOf(L).checkSubject(L)
	return lib.gmatch(L)
}

func strGsub(L *lua.LState) int {
	runOf(L).checkGsub(L)
	return lib.str["gsub"](L)
}

func tabConcat(L *lua.LState) int {
	runOf(L).chargeTableConcat(L)
	return lib.tab["concat"](L)
}

// checkSubject refuses a pattern subject over the cap.
func (rn *run) checkSubject(L *lua.LState) {
	if s := L.CheckString(1); len(s) > rn.patternSubject() {
		L.ArgError(1, "subject too long for pattern matching (the sandbox's cap is "+itoa(rn.patternSubject())+" bytes)")
	}
}

// checkGsub charges gsub's result. With a string replacement the bound is
// exact enough: every match (at most len(s)+1, or n) is replaced by the
// replacement with each %-capture at most len(s). A function or table
// replacement is wrapped so that each replacement value is charged as it
// comes.
func (rn *run) checkGsub(L *lua.LState) {
	rn.checkSubject(L)
	s := L.CheckString(1)
	L.CheckString(2)
	matches := int64(len(s)) + 1
	if L.GetTop() >= 4 && L.Get(4) != lua.LNil {
		if n := L.CheckInt64(4); n >= 0 && n < matches {
			matches = n
		}
	}
	switch repl := L.Get(3).(type) {
	case lua.LString:
		per := int64(len(repl)) + int64(strings.Count(string(repl), "%"))*int64(len(s))
		bound := int64(len(s)) + matches*per
		if per > 0 && matches > rn.memLimit/per {
			bound = -1
		}
		rn.charge(L, bound)
	case lua.LNumber:
		rn.charge(L, int64(len(s))+matches*int64(len(repl.String())))
	case *lua.LFunction:
		rn.charge(L, int64(len(s)))
		total := int64(len(s))
		L.Replace(3, L.NewFunction(func(L *lua.LState) int {
			n := L.GetTop()
			L.Push(repl)
			for i := 1; i <= n; i++ {
				L.Push(L.Get(i))
			}
			L.Call(n, 1)
			rn.chargeReplacement(L, L.Get(-1), &total)
			return 1
		}))
	case *lua.LTable:
		rn.charge(L, int64(len(s)))
		total := int64(len(s))
		L.Replace(3, L.NewFunction(func(L *lua.LState) int {
			v := L.GetTable(repl, L.Get(1))
			rn.chargeReplacement(L, v, &total)
			L.Push(v)
			return 1
		}))
	}
}

// chargeReplacement adds a replacement value's length to the result's
// running total. gsub holds every replacement until it builds the
// result, where no walk can see them, so the total itself must stay
// within what the estimate leaves.
func (rn *run) chargeReplacement(L *lua.LState, v lua.LValue, total *int64) {
	if !lua.LVCanConvToString(v) {
		return
	}
	*total += int64(len(lua.LVAsString(v)))
	if rn.memEst+*total > rn.memLimit {
		rn.charge(L, -1)
	}
}

// checkFormat refuses a width or precision over two digits (as Lua 5.1
// does) and charges the format's result: the format plus every argument's
// string length plus 99 bytes of padding per directive.
func (rn *run) checkFormat(L *lua.LState) {
	f := L.CheckString(1)
	directives := int64(0)
	for i := 0; i < len(f); i++ {
		if f[i] != '%' {
			continue
		}
		i++
		if i < len(f) && f[i] == '%' {
			continue
		}
		for i < len(f) && strings.IndexByte("-+ #0", f[i]) >= 0 {
			i++
		}
		digits := 0
		for i < len(f) && f[i] >= '0' && f[i] <= '9' {
			i++
			digits++
		}
		if i < len(f) && f[i] == '.' {
			i++
			p := 0
			for i < len(f) && f[i] >= '0' && f[i] <= '9' {
				i++
				p++
			}
			digits = max(digits, p)
		}
		if digits > 2 {
			L.RaiseError("invalid format (width or precision too long)")
		}
		directives++
	}
	size := int64(len(f)) + 99*directives
	for i := 2; i <= L.GetTop(); i++ {
		v := L.Get(i)
		if s, ok := v.(lua.LString); ok {
			size += 2 * int64(len(s)) // %q may escape
		} else {
			size += 32
		}
	}
	rn.charge(L, size)
}

// chargeTableConcat charges table.concat's result: the sum of the
// elements' and separators' lengths.
func (rn *run) chargeTableConcat(L *lua.LState) {
	t := L.CheckTable(1)
	sep := int64(len(L.OptString(2, "")))
	n := t.Len()
	i, j := L.OptInt(3, 1), L.OptInt(4, n)
	i, j = max(i, 1), min(j, n)
	var total int64
	for k := i; k <= j; k++ {
		if v := t.RawGetInt(k); lua.LVCanConvToString(v) {
			total += int64(len(lua.LVAsString(v))) + sep
		}
		if total > rn.memLimit {
			break
		}
	}
	rn.charge(L, total)
}
