package codemode

import (
	"strings"

	lua "github.com/yuin/gopher-lua"
)

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

func tabConcat(L *lua.LState) int {
	runOf(L).chargeTableConcat(L)
	return lib.tab["concat"](L)
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
