package codemode

import (
	"math/rand/v2"
	"slices"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// libFuncs are gopher-lua's library functions the sandbox uses, read once
// from a scratch state: Go functions only, so nothing is shared between
// runs but code. Every run builds its own tables and function values.
type libFuncs struct {
	base, str, tab, math map[string]lua.LGFunction
	mathConst            map[string]lua.LNumber
	// Closures and their upvalue functions.
	ipairs, ipairsAux, pairs, pairsAux lua.LGFunction
}

// The functions a program gets. Not listed, so absent: collectgarbage,
// dofile, getfenv, setfenv, load, loadfile, loadstring, module, require,
// newproxy, _printregs, print (replaced), string.dump, string.gfind,
// math.random and math.randomseed (replaced), and every other library.
var (
	keptBase   = []string{"assert", "error", "next", "pcall", "rawequal", "rawget", "rawset", "select", "tonumber", "tostring", "type", "unpack", "xpcall", "getmetatable", "setmetatable"}
	keptString = []string{"byte", "len", "sub", "char", "find", "format", "gsub", "lower", "match", "rep", "reverse", "upper"}
	keptTable  = []string{"concat", "getn", "insert", "maxn", "remove", "sort"}
)

var lib = readLib()

func readLib() *libFuncs {
	L := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer L.Close()
	lua.OpenBase(L)
	lua.OpenString(L)
	lua.OpenTable(L)
	lua.OpenMath(L)
	g := L.G.Global
	fn := func(t *lua.LTable, name string) *lua.LFunction { return t.RawGetString(name).(*lua.LFunction) }
	up := func(f *lua.LFunction) lua.LGFunction { return f.Upvalues[0].Value().(*lua.LFunction).GFunction }
	l := &libFuncs{base: map[string]lua.LGFunction{}, str: map[string]lua.LGFunction{}, tab: map[string]lua.LGFunction{},
		math: map[string]lua.LGFunction{}, mathConst: map[string]lua.LNumber{}}
	for _, n := range keptBase {
		l.base[n] = fn(g, n).GFunction
	}
	str := g.RawGetString("string").(*lua.LTable)
	for _, n := range keptString {
		l.str[n] = fn(str, n).GFunction
	}
	tab := g.RawGetString("table").(*lua.LTable)
	for _, n := range keptTable {
		l.tab[n] = fn(tab, n).GFunction
	}
	math := g.RawGetString("math").(*lua.LTable)
	math.ForEach(func(k, v lua.LValue) {
		switch x := v.(type) {
		case *lua.LFunction:
			if k.String() != "random" && k.String() != "randomseed" {
				l.math[k.String()] = x.GFunction
			}
		case lua.LNumber:
			l.mathConst[k.String()] = x
		}
	})
	ip, pa := fn(g, "ipairs"), fn(g, "pairs")
	l.ipairs, l.ipairsAux = ip.GFunction, up(ip)
	l.pairs, l.pairsAux = pa.GFunction, up(pa)
	return l
}

// wrapped are the checked replacements, by table and name.
var wrapped = map[string]map[string]lua.LGFunction{
	"_G": {"unpack": baseUnpack, "print": basePrint},
	"string": {"rep": strRep, "byte": strByte, "format": strFormat, "char": strChar, "find": strFind, "match": strMatch, "gsub": strGsub, "gmatch": strGmatch,
		"upper": strSameSize("upper"), "lower": strSameSize("lower"), "reverse": strSameSize("reverse")},
	"table": {"concat": tabConcat},
	"math":  {"random": mathRandom, "randomseed": mathRandomseed},
	"json":  {"encode": jsonEncode, "decode": jsonDecode},
}

// runOf is the run a state belongs to (its context is the run's hook).
func runOf(L *lua.LState) *run { return L.Context().(*hook).rn }

// openLibs installs the sandbox's globals in L and returns the checked
// concatenation function the compiled program receives.
func (rn *run) openLibs(L *lua.LState) *lua.LFunction {
	g := L.G.Global
	g.RawSetString("_G", g)
	g.RawSetString("_VERSION", lua.LString(lua.LuaVersion))
	fill := func(t *lua.LTable, name string, names []string, orig map[string]lua.LGFunction) {
		w := wrapped[name]
		for _, n := range names {
			f := orig[n]
			if wf, ok := w[n]; ok {
				f = wf
			}
			t.RawSetString(n, L.NewFunction(f))
		}
		for _, n := range sortedFuncs(w) {
			if t.RawGetString(n) == lua.LNil {
				t.RawSetString(n, L.NewFunction(w[n]))
			}
		}
	}
	fill(g, "_G", keptBase, lib.base)
	g.RawSetString("ipairs", L.NewClosure(lib.ipairs, L.NewFunction(lib.ipairsAux)))
	g.RawSetString("pairs", L.NewClosure(lib.pairs, L.NewFunction(lib.pairsAux)))
	g.RawSetString("call_tool", L.NewFunction(callTool))
	g.RawSetString("search_tools", L.NewFunction(searchTools))
	g.RawSetString("list_tools", L.NewFunction(listTools))

	str := L.CreateTable(0, len(keptString)+1)
	fill(str, "string", keptString, lib.str)
	g.RawSetString("string", str)
	mt := L.CreateTable(0, 2)
	mt.RawSetString("__index", str)
	mt.RawSetString("__metatable", lua.LFalse)
	L.SetMetatable(lua.LString(""), mt)

	tab := L.CreateTable(0, len(keptTable))
	fill(tab, "table", keptTable, lib.tab)
	g.RawSetString("table", tab)

	math := L.CreateTable(0, len(lib.math)+len(lib.mathConst)+2)
	for _, n := range sortedFuncs(lib.math) {
		math.RawSetString(n, L.NewFunction(lib.math[n]))
	}
	for n, v := range lib.mathConst {
		math.RawSetString(n, v)
	}
	fill(math, "math", nil, nil)
	g.RawSetString("math", math)
	rn.rng = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))

	rn.null = L.NewUserData()
	nullMt := L.CreateTable(0, 2)
	nullMt.RawSetString("__tostring", L.NewFunction(nullString))
	nullMt.RawSetString("__metatable", lua.LFalse)
	rn.null.Metatable = nullMt
	js := L.CreateTable(0, 3)
	fill(js, "json", nil, nil)
	js.RawSetString("null", rn.null)
	g.RawSetString("json", js)

	rn.toolErrMt = L.CreateTable(0, 1)
	rn.toolErrMt.RawSetString("__tostring", L.NewFunction(toolErrString))
	return L.NewFunction(concat)
}

func sortedFuncs(m map[string]lua.LGFunction) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func nullString(L *lua.LState) int { L.Push(lua.LString("null")); return 1 }

func toolErrString(L *lua.LState) int {
	L.Push(lua.LString(toolErrText(L.CheckTable(1))))
	return 1
}

// basePrint captures one line: the arguments through tostring, tab
// separated.
func basePrint(L *lua.LState) int {
	rn := runOf(L)
	n := L.GetTop()
	var b strings.Builder
	for i := 1; i <= n; i++ {
		if i > 1 {
			b.WriteByte('\t')
		}
		piece := L.ToStringMeta(L.Get(i)).String()
		if room := rn.logs.max + 1 - b.Len(); len(piece) > room {
			b.WriteString(piece[:room]) // over the cap: the line is dropped
			break
		}
		b.WriteString(piece)
	}
	rn.logs.add(b.String())
	return 0
}

// baseUnpack refuses a range larger than the value stack up front.
func baseUnpack(L *lua.LState) int {
	rn := runOf(L)
	t := L.CheckTable(1)
	i, j := L.OptInt64(2, 1), L.OptInt64(3, int64(t.Len()))
	if j-i+1 > int64(rn.r.opts.MaxRegistrySlots) {
		rn.kill(killMemory, "unpack: too many values for the Lua value stack")
		L.RaiseError("%s", rn.killMsg)
	}
	return lib.base["unpack"](L)
}

// concat is what the ".." operator is compiled to: the operator's
// semantics (strings and numbers concatenate, else __concat) with the
// result charged before it is built.
func concat(L *lua.LState) int {
	a, b := L.Get(1), L.Get(2)
	if lua.LVCanConvToString(a) && lua.LVCanConvToString(b) {
		sa, sb := lua.LVAsString(a), lua.LVAsString(b)
		runOf(L).charge(L, int64(len(sa))+int64(len(sb)))
		L.Push(lua.LString(sa + sb))
		return 1
	}
	op := L.GetMetaField(a, "__concat")
	if op == lua.LNil {
		op = L.GetMetaField(b, "__concat")
	}
	if op == lua.LNil {
		bad := a
		if lua.LVCanConvToString(a) {
			bad = b
		}
		L.RaiseError("attempt to concatenate a %s value", bad.Type().String())
	}
	L.Push(op)
	L.Push(a)
	L.Push(b)
	L.Call(2, 1)
	return 1
}

// mathRandom is math.random over the run's own generator.
func mathRandom(L *lua.LState) int {
	rng := runOf(L).rng
	switch L.GetTop() {
	case 0:
		L.Push(lua.LNumber(rng.Float64()))
	case 1:
		n := L.CheckInt64(1)
		if n < 1 {
			L.ArgError(1, "interval is empty")
		}
		L.Push(lua.LNumber(1 + rng.Int64N(n)))
	default:
		lo, hi := L.CheckInt64(1), L.CheckInt64(2)
		if lo > hi {
			L.ArgError(2, "interval is empty")
		}
		if hi-lo+1 <= 0 {
			L.ArgError(2, "interval is too large")
		}
		L.Push(lua.LNumber(lo + rng.Int64N(hi-lo+1)))
	}
	return 1
}

// mathRandomseed reseeds the run's generator only.
func mathRandomseed(L *lua.LState) int {
	seed := uint64(int64(L.CheckNumber(1)))
	runOf(L).rng = rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	return 0
}
