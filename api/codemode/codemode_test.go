package codemode

import (
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// check asserts a run's outcome: wantType "" means success with result
// JSON want; otherwise the error type and a substring of the message.
func check(t *testing.T, e *testEnv, code, wantType, want string) *Response {
	t.Helper()
	res := e.run(t, code)
	if wantType == "" {
		if res.Error != nil {
			t.Fatalf("%s\n  failed: %+v", code, res.Error)
		}
		if got := jsonOf(t, res.Result); want != "" && got != want {
			t.Fatalf("%s\n  result %s, want %s", code, got, want)
		}
		return res
	}
	if res.Error == nil {
		t.Fatalf("%s\n  succeeded with %s, want %s", code, jsonOf(t, res.Result), wantType)
	}
	if string(res.Error.Type) != wantType || !strings.Contains(res.Error.Message, want) {
		t.Fatalf("%s\n  error %s %q, want %s containing %q", code, res.Error.Type, res.Error.Message, wantType, want)
	}
	return res
}

// healthy proves the runner still works after a hostile run.
func healthy(t *testing.T, e *testEnv) {
	t.Helper()
	check(t, e, `return call_tool("demo.add", {a = 1, b = 2}).sum`, "", "3")
}

func TestResultsAndConversion(t *testing.T) {
	e := newTestEnv(t, Options{})
	for _, c := range []struct{ code, want string }{
		{`return 1`, `1`},
		{`return 1.5`, `1.5`},
		{`return`, `null`},
		{`return nil`, `null`},
		{`return 1, "a", true`, `[1,"a",true]`},
		{`return {1, 2, {x = "y"}}`, `[1,2,{"x":"y"}]`},
		{`return {}`, `{}`},
		{`return {[1] = "a", [3] = "c"}`, `{"1":"a","3":"c"}`},
		{`return {a = json.null}`, `{"a":null}`},
		{`return json.decode('{"a":[1,2,{"b":null}],"c":"d"}')`, `{"a":[1,2,{}],"c":"d"}`},
		{`return json.encode({a = {1, 2}})`, `"{\"a\":[1,2]}"`},
		{`return "a" .. 1 .. "b" .. 2.5`, `"a1b2.5"`},
		{`local mt = {__concat = function(a, b) return "cat" end} return setmetatable({}, mt) .. "x"`, `"cat"`},
		{`return ("abc"):upper(), string.format("%5.2f|%s", 3.14159, "x"), ("a,b"):gsub(",", ";")`, `["ABC"," 3.14|x","a;b",1]`},
		{`local t = {} for w in ("a b c"):gmatch("%a") do t[#t+1] = w end return table.concat(t, "-")`, `"a-b-c"`},
		{`return math.floor(3.7), math.max(1, 5), type(math.random())`, `[3,5,"number"]`},
		{`local x = math.random(3) local y = math.random(5, 6) return x >= 1 and x <= 3 and y >= 5 and y <= 6, (pcall(math.random, -2^62, 2^62))`, `[true,false]`},
		{`return select("#", ...)`, `0`},
	} {
		check(t, e, c.code, "", c.want)
	}
	check(t, e, `return function() end`, "runtime_error", "JSON")
	check(t, e, `local t = {} t.t = t return t`, "runtime_error", "nested")
	check(t, e, `return 0/0`, "runtime_error", "JSON")
}

func TestPrintAndLogCap(t *testing.T) {
	e := newTestEnv(t, Options{MaxLogBytes: 100})
	res := check(t, e, `print("a", 1, nil, true) print({} ~= nil) return 1`, "", "1")
	if got := jsonOf(t, res.Logs); got != `["a\t1\tnil\ttrue","true"]` {
		t.Fatalf("logs %s", got)
	}
	res = check(t, e, `for i = 1, 1000 do print(("x"):rep(30)) end return 1`, "", "1")
	if len(res.Logs) != 4 || !strings.Contains(res.Logs[3], "dropped") {
		t.Fatalf("capped logs %q", res.Logs)
	}
	res = check(t, e, `print("before") error("boom")`, "runtime_error", "boom")
	if jsonOf(t, res.Error.Logs) != `["before"]` {
		t.Fatalf("error logs %q", res.Error.Logs)
	}
}

func TestSyntaxErrors(t *testing.T) {
	e := newTestEnv(t, Options{})
	for _, code := range []string{`x = `, `return (`, `local function end`, `goto nowhere`} {
		res := check(t, e, code, "syntax_error", "")
		if res.Error.Stage != StageCompile {
			t.Fatalf("%s: stage %s", code, res.Error.Stage)
		}
	}
	deep := strings.Repeat("{", 5000) + "1" + strings.Repeat("}", 5000)
	check(t, e, "return "+deep, "syntax_error", "nested")
	check(t, e, "return "+strings.Repeat("(", 5000)+"1"+strings.Repeat(")", 5000), "", "1")
	// A long but flat chain is fine.
	check(t, e, "return 0"+strings.Repeat("+1", 500), "", "500")
	check(t, e, `error("x", 0)`, "runtime_error", "x")
	if res := check(t, e, `local x = nil; return x.y`, "runtime_error", "codemode:1"); res.Error.Stage != StageExecute {
		t.Fatal(res.Error.Stage)
	}
}

// TestEscapes tries to reach the host through every door the issue
// lists; each must fail inside the sandbox.
func TestEscapes(t *testing.T) {
	e := newTestEnv(t, Options{})
	nils := []string{"os", "io", "debug", "package", "coroutine", "channel", "load", "loadstring", "loadfile", "dofile",
		"require", "module", "getfenv", "setfenv", "collectgarbage", "newproxy", "_printregs", "_ENV", "gcinfo", "string.dump", "string.gfind"}
	for _, name := range nils {
		check(t, e, "return "+name+" == nil", "", "true")
	}
	for _, c := range []struct{ code, typ, msg string }{
		{`os.execute("id")`, "runtime_error", "nil"},
		{`io.open("/etc/passwd")`, "runtime_error", "nil"},
		{`load("return 1")()`, "runtime_error", "non-function"},
		{`return string.dump(print)`, "runtime_error", "non-function"},
		{`return getmetatable("").__index`, "runtime_error", "boolean"},
		{`setmetatable("", {})`, "runtime_error", "protected metatable"},
		{`return coroutine.wrap(function() while true do end end)()`, "runtime_error", "nil"},
		{`return rawget(_G, "os")`, "", "null"},
		{`return rawget(string, "dump")`, "", "null"},
		{`return ("x").dump`, "", "null"},
		{`return _G._G.os`, "", "null"},
		{`return type(getfenv)`, "", `"nil"`},
		{`return select(2, pcall(function() return debug.getregistry() end)) ~= nil`, "", "true"},
	} {
		check(t, e, c.code, c.typ, c.msg)
	}
	// Changing the shared-looking tables only changes this run's copies.
	check(t, e, `rawset(_G, "string", nil) _ENV = {} setmetatable(_G, {__index = function() return 1 end}) return x`, "", "1")
	check(t, e, `string.upper = nil return string.lower("A")`, "", `"a"`)
	check(t, e, `return string.upper("a"), type(string), getmetatable("")`, "", `["A","table",false]`)
	healthy(t, e)
}

// TestNoStateLeaks sets globals, changes libraries and metatables in one
// run and looks for them in the next.
func TestNoStateLeaks(t *testing.T) {
	e := newTestEnv(t, Options{})
	check(t, e, `leaked = 42; string.upper = function() return "pwned" end; table.insert = nil; math.pi = 3
		setmetatable(_G, {__index = function() return "meta" end}); math.randomseed(7); return 1`, "", "1")
	check(t, e, `return leaked, string.upper("a"), type(table.insert), math.pi > 3.14, rawget(_G, "anything")`, "", `[null,"A","function",true,null]`)
	check(t, e, `return tostring(undefined_global)`, "", `"nil"`)
	// Each run has its own generator: a seed is not inherited.
	seeded := jsonOf(t, check(t, e, `math.randomseed(7) return math.random(1e9)`, "", "").Result)
	if again := jsonOf(t, check(t, e, `math.randomseed(7) return math.random(1e9)`, "", "").Result); again != seeded {
		t.Fatalf("same seed, different numbers: %s %s", seeded, again)
	}
	if next := jsonOf(t, check(t, e, `return math.random(1e9)`, "", "").Result); next == seeded {
		t.Fatalf("an unseeded run drew the seeded number %s", next)
	}
}

func TestInstructionLimit(t *testing.T) {
	e := newTestEnv(t, Options{MaxInstructions: 1_000_000})
	check(t, e, `while true do end`, "instruction_limit", "1000000")
	// pcall cannot swallow the kill, nor can xpcall's handler.
	check(t, e, `while true do pcall(function() while true do end end) end`, "instruction_limit", "")
	check(t, e, `xpcall(function() while true do end end, function() while true do end end) return 1`, "instruction_limit", "")
	check(t, e, `local ok = pcall(function() while true do end end) return ok`, "instruction_limit", "")
	check(t, e, `table.sort({3, 2, 1, 5, 4, 6, 8, 7}, function(a, b) while true do end end)`, "instruction_limit", "")
	healthy(t, e)
}

func TestTimeout(t *testing.T) {
	e := newTestEnv(t, Options{})
	start := time.Now()
	res := e.runReq(t, Request{Code: `while true do end`, TimeoutMS: 200})
	if res.Error == nil || res.Error.Type != Timeout {
		t.Fatalf("%+v", res.Error)
	}
	// A tool call in flight is cut at the deadline too.
	res = e.runReq(t, Request{Code: `call_tool("demo.sleep", {ms = 10000})`, TimeoutMS: 200})
	if res.Error == nil || res.Error.Type != Timeout {
		t.Fatalf("%+v", res.Error)
	}
	if len(res.ToolCalls) != 1 || res.ToolCalls[0].OK {
		t.Fatalf("tool calls %+v", res.ToolCalls)
	}
	if d := time.Since(start); d > 8*time.Second {
		t.Fatalf("the timeouts took %v", d)
	}
	healthy(t, e)
}

func TestMemoryLimit(t *testing.T) {
	e := newTestEnv(t, Options{MemoryLimit: 8 << 20})
	for _, code := range []string{
		`local s = "x" for i = 1, 40 do s = s .. s end return #s`,
		`return string.rep("x", 1e9)`,
		`return ("x"):rep(2^40)`,
		`local s = ("x"):rep(1e6) local t = {} for i = 1, 100 do t[i] = s .. i end return #t`,
		`local t = {} for i = 1, 1e8 do t[i] = i end`,
		`local t = {} for i = 1, 1e8 do t[i] = {} end`,
		`local t = {} for i = 1, 1e8 do t["k" .. i] = true end`,
		`local t = {} local s = ("x"):rep(1e5) for i = 1, 1e4 do t[i] = s:upper() end`,
		`local s = ("x"):rep(1e5) return s:gsub("x", s)`,
		`local s = ("x"):rep(1e5) return s:gsub("x", function() return s end)`,
		`local t = {} for i = 1, 1000 do t[i] = ("x"):rep(1e5) end return table.concat(t)`,
		`return string.format("%s%s%s%s%s%s%s%s%s%s", ("x"):rep(1e6), ("x"):rep(1e6), ("x"):rep(1e6), ("x"):rep(1e6), ("x"):rep(1e6), ("x"):rep(1e6), ("x"):rep(1e6), ("x"):rep(1e6), ("x"):rep(1e6), ("x"):rep(1e6))`,
		`local ok = pcall(string.rep, "x", 1e9) return ok`,
	} {
		check(t, e, code, "memory_limit", "")
	}
	check(t, e, `return string.format("%999999d", 1)`, "runtime_error", "too long")
	check(t, e, `return ("x"):rep(1e6):byte(1, -1)`, "memory_limit", "")
	check(t, e, `local t = setmetatable({}, {}) getmetatable(t).__index = t return t.x`, "runtime_error", "")
	check(t, e, `print(("x"):rep(4e6)) return 1`, "", "1")
	check(t, e, `return unpack({}, 1, 1e8)`, "memory_limit", "")
	// Sharing one string is counted once.
	check(t, e, `local s = ("x"):rep(1e6) local t = {} for i = 1, 100 do t[i] = s end return #t`, "", "100")
	healthy(t, e)
}

func TestDeepRecursion(t *testing.T) {
	e := newTestEnv(t, Options{})
	check(t, e, `local function f(n) return 1 + f(n + 1) end return f(1)`, "runtime_error", "stack overflow")
	res := check(t, e, `local function f() return pcall(f) end return (select(-1, f())):find("stack overflow") ~= nil`, "", `true`)
	_ = res
	check(t, e, `local function f() local ok, err = pcall(f) if not ok then error(err, 0) end end f()`, "runtime_error", "overflow")
	check(t, e, `local t = setmetatable({}, {}) getmetatable(t).__index = function(t, k) return t[k] end return t.x`, "runtime_error", "overflow")
	healthy(t, e)
}

func TestToolCalls(t *testing.T) {
	e := newTestEnv(t, Options{})
	res := check(t, e, `local a = call_tool("demo.add", {a = 2, b = 3}) local b = call_tool("demo.add", {a = a.sum, b = 10}) return b.sum`, "", "15")
	if len(res.ToolCalls) != 2 || !res.ToolCalls[0].OK || res.ToolCalls[1].Tool != "demo.add" {
		t.Fatalf("tool calls %+v", res.ToolCalls)
	}
	// The gateway records each call with the caller's principal and front.
	for range 2 {
		select {
		case rec := <-e.records:
			if rec.Principal != "tester" || rec.Front != FrontName || rec.Qualified != "demo.add" {
				t.Fatalf("record %+v", rec)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no call record")
		}
	}
	check(t, e, `local ok, err = pcall(call_tool, "demo.fail", {message = "boom"}) return ok, err.code, err.tool, type(err.message)`, "", `[false,"tool_error","demo.fail","string"]`)
	check(t, e, `local ok, err = pcall(call_tool, "nope.nothing", {}) return err.code`, "", `"tool_not_found"`)
	check(t, e, `local ok, err = pcall(call_tool, "demo.add", {a = "x"}) return err.code`, "", `"invalid_arguments"`)
	check(t, e, `call_tool("demo.add", {1, 2})`, "runtime_error", "not a list")
	check(t, e, `call_tool("demo.fail", {message = "boom"})`, "runtime_error", "call_tool(demo.fail): tool_error")
	check(t, e, `return #list_tools(), search_tools("sum", 1)[1].name`, "", `[5,"demo.add"]`)
}

func TestToolCallLimit(t *testing.T) {
	e := newTestEnv(t, Options{})
	res := e.runReq(t, Request{Code: `for i = 1, 1000 do pcall(call_tool, "demo.add", {a = i, b = 1}) end return "done"`, MaxToolCalls: 5})
	if res.Error == nil || res.Error.Type != ToolCallLimit {
		t.Fatalf("%+v", res.Error)
	}
	if len(res.ToolCalls) != 5 {
		t.Fatalf("%d tool calls ran, want 5", len(res.ToolCalls))
	}
	healthy(t, e)
}

// TestConcurrentRuns runs programs in parallel (under -race) and checks
// each saw only its own globals.
func TestConcurrentRuns(t *testing.T) {
	e := newTestEnv(t, Options{})
	errs := make(chan string, 16)
	for i := range 16 {
		go func() {
			res, err := e.r.Run(t.Context(), Caller{}, Request{Code: `x = (x or 0) + ` + itoa(i) + ` return x, call_tool("demo.add", {a = x, b = 0}).sum`})
			switch {
			case err != nil:
				errs <- err.Error()
			case res.Error != nil:
				errs <- res.Error.Message
			default:
				if got, want := jsonOf(t, res.Result), "["+itoa(i)+","+itoa(i)+"]"; got != want {
					errs <- got + " want " + want
				} else {
					errs <- ""
				}
			}
		}()
	}
	for range 16 {
		if s := <-errs; s != "" {
			t.Error(s)
		}
	}
}

func TestRequestValidation(t *testing.T) {
	e := newTestEnv(t, Options{MaxCodeBytes: 100})
	for _, req := range []Request{{}, {Code: strings.Repeat("x", 101)}, {Code: "return 1", TimeoutMS: -1}, {Code: "return 1", MaxToolCalls: -1}} {
		if _, err := e.r.Run(t.Context(), Caller{}, req); err == nil {
			t.Errorf("%+v accepted", req)
		}
	}
}

func TestInterfaces(t *testing.T) {
	e := newTestEnv(t, Options{})
	in := BuildInterfaces(e.r.SelectTools(t.Context(), "", 0, nil))
	if len(in.Tools) != 5 || !strings.HasPrefix(in.Text, "-- utcpd CodeMode") {
		t.Fatalf("%+v", in)
	}
	var add string
	for _, ti := range in.Tools {
		if ti.Name == "demo.add" {
			add = ti.Interface
		}
	}
	for _, want := range []string{"-- demo.add: Add returns", "-- args: {a: number, b: number}", `call_tool("demo.add", args)`} {
		if !strings.Contains(add, want) {
			t.Errorf("demo.add interface lacks %q:\n%s", want, add)
		}
	}
}

// TestValueStack fills the value stack without a library shortcut.
func TestValueStack(t *testing.T) {
	e := newTestEnv(t, Options{})
	check(t, e, `local t = {} for i = 1, 300000 do t[i] = i end return select("#", unpack(t, 1, 200000))`, "", "200000")
	check(t, e, `local s = ("x"):rep(200000) return select("#", s:byte(1, -1))`, "", "200000")
	check(t, e, `local function f(...) return select("#", ...) end local t = {} for i = 1, 300000 do t[i] = i end return f(unpack(t))`, "memory_limit", "value stack")
	healthy(t, e)
}

// TestSlots fills the only run slot and checks that the next run waits,
// then gives up with unavailable, and that the slot is free afterwards.
func TestSlots(t *testing.T) {
	e := newTestEnv(t, Options{MaxConcurrent: 1})
	done := make(chan *Response)
	go func() {
		res, _ := e.r.Run(t.Context(), Caller{}, Request{Code: `call_tool("demo.sleep", {ms = 1000}) return 1`})
		done <- res
	}()
	// Wait until the first run holds the slot.
	for len(e.r.sem) == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	_, err := e.r.Run(t.Context(), Caller{}, Request{Code: `return 2`, TimeoutMS: 50})
	if code := codeOf(err); err == nil || code != "unavailable" {
		t.Fatalf("second run: %v (%s)", err, code)
	}
	if res := <-done; res == nil || res.Error != nil {
		t.Fatalf("first run: %+v", res)
	}
	healthy(t, e)
}

// TestNoGoroutineLeft checks that hostile runs leave no goroutine behind
// once Run has returned (HTTP keep-alive connections of the demo
// backend aside).
func TestNoGoroutineLeft(t *testing.T) {
	e := newTestEnv(t, Options{MaxInstructions: 1_000_000, MemoryLimit: 8 << 20})
	healthy(t, e) // opens the keep-alive connection to the backend
	ignore := goleak.IgnoreCurrent()
	for _, req := range []Request{
		{Code: `while true do end`},
		{Code: `local s = "x" for i = 1, 40 do s = s .. s end`},
		{Code: `call_tool("demo.sleep", {ms = 10000})`, TimeoutMS: 100},
		{Code: `for i = 1, 100 do pcall(call_tool, "demo.add", {a = 1, b = 1}) end`, MaxToolCalls: 3},
		{Code: `local function f() return f() + 1 end f()`},
		{Code: `x = `},
	} {
		if _, err := e.r.Run(t.Context(), Caller{}, req); err != nil {
			t.Fatal(err)
		}
	}
	if err := goleak.Find(ignore, goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"), goleak.IgnoreTopFunction("internal/poll.runtime_pollWait")); err != nil {
		t.Fatal(err)
	}
}

// TestGuardApplies checks that call_tool goes through the guard chain as
// the caller: the guard sees the principal and its denial reaches the
// program as an error it can catch.
func TestGuardApplies(t *testing.T) {
	e := newGuardedEnv(t, Options{}, denyGuard{tool: "demo.echo", principal: "tester"})
	check(t, e, `local ok, err = pcall(call_tool, "demo.echo", {x = 1}) return ok, err.code`, "", `[false,"guard_denied"]`)
	res, err := e.r.Run(t.Context(), Caller{Principal: "someone-else"}, Request{Code: `return call_tool("demo.echo", {x = "y"}).x`})
	if err != nil || res.Error != nil || jsonOf(t, res.Result) != `"y"` {
		t.Fatalf("%v %+v", err, res)
	}
	healthy(t, e)
}
