package codemode

import (
	"fmt"
	"strings"
	"testing"
	"time"

	lua "github.com/yuin/gopher-lua"
)

// patternCorpus are ordinary uses of the pattern functions; each is an
// expression whose values are compared between gopher-lua's own string
// library and the sandbox's matcher.
var patternCorpus = []string{
	`string.find("hello world", "wor")`,
	`string.find("hello world", "o", 6)`,
	`string.find("hello world", "o", -3)`,
	`string.find("hello world", "l+")`,
	`string.find("hello world", "(l+)(o)")`,
	`string.find("hello", "()ll()")`,
	`string.find("a.b", ".", 1, true)`,
	`string.find("a+b", "+", 1, true)`,
	`string.find("abc", "^b")`,
	`string.find("abc", "^a")`,
	`string.find("abc", "c$")`,
	`string.find("abc", "b$")`,
	`string.find("a$c", "$c")`,
	`string.find("  x", "^%s*")`,
	`string.find("key = value", "(%w+)%s*=%s*(%w+)")`,
	`string.find("f(a(b)c)d", "%b()")`,
	`string.find("hello", "l*")`,
	`string.find("hello", "x*")`,
	`string.find("hello", "[aeiou]")`,
	`string.find("hello", "[^aeiou]+", 2)`,
	`string.find("x]y", "[]]")`,
	`string.find("a-b", "[a%-]+")`,
	`string.find("0x1F", "%x+", 3)`,
	`string.find("abcabc", "(abc)%1")`,
	`string.find("aaa", "a-b")`,
	`string.find("aaab", "a-b")`,
	`string.find("ab", "a?b")`,
	`string.find("b", "a?b")`,
	`string.match("2024-01-15", "(%d+)-(%d+)-(%d+)")`,
	`string.match("  trim me  ", "^%s*(.-)%s*$")`,
	`string.match("hello", ".-")`,
	`string.match("hello", "(h)(e)(l)(l)(o)")`,
	`string.match("hello", "()e()")`,
	`string.match("[[nested]]", "%[(%b[])%]")`,
	`string.match("x=1, y=2", "y=(%d)")`,
	`string.match("hello", "l", -2)`,
	`string.match("\0a\0", "%z")`,
	`string.match("tab\there", "%c")`,
	`string.match("Mixed123_", "%u%l+%d+%p")`,
	`string.match("abc", "%A*")`,
	`string.match("abc123", "%D+")`,
	`string.match("hello world", "%S+$")`,
	`string.match("a,b,,c", "([^,]*),([^,]*),([^,]*)")`,
	`string.gsub("hello world", "o", "0")`,
	`string.gsub("hello world", "o", "0", 1)`,
	`string.gsub("hello world", "(%w+)", "<%1>")`,
	`string.gsub("hello world", "%w+", "%0 %0")`,
	`string.gsub("hello", "", "-")`,
	`string.gsub("abc", "%w", "%%")`,
	`string.gsub("hello world", "(%w+) (%w+)", "%2 %1")`,
	`string.gsub("$name is $age", "%$(%w+)", {name = "Ann", age = 7})`,
	`string.gsub("$name is $unknown", "%$(%w+)", {name = "Ann"})`,
	`string.gsub("1 2 3", "%d", function(d) return d * 2 end)`,
	`string.gsub("a b c", "%a", function(c) if c == "b" then return false end return c:upper() end)`,
	`string.gsub("abc", "^a", "x")`,
	`string.gsub("aaa", "^a", "x")`,
	`string.gsub("  x  ", "^%s+", "")`,
	`string.gsub("a,b;c", "[,;]", " ")`,
	`string.gsub("f(x) + g(y)", "%b()", "[]")`,
	`string.gsub("hello", "l+", function() end)`,
	`string.gsub("abc", ".", {a = 1, b = false})`,
	`string.gsub("hello world", "()o", "%1")`,
	`string.gsub("", "x*", "y")`,
	`string.gsub("abc", "b*", "-")`,
	`(function() local t = {} for w in string.gmatch("one two  three", "%a+") do t[#t+1] = w end return unpack(t) end)()`,
	`(function() local t = {} for k, v in string.gmatch("a=1, b=2", "(%w+)=(%w+)") do t[#t+1] = k .. ":" .. v end return unpack(t) end)()`,
	`(function() local t = {} for p in string.gmatch("abc", "()") do t[#t+1] = p end return unpack(t) end)()`,
	`(function() local n = 0 for w in string.gmatch("abc", "x*") do n = n + 1 end return n end)()`,
	`(function() local t = {} for w in string.gmatch("a1b22c333", "%d+") do t[#t+1] = w end return table.concat(t, ",") end)()`,
	`(function() local t = {} for w in ("k1=v1;k2=v2"):gmatch("[^;]+") do t[#t+1] = w end return unpack(t) end)()`,
}

// luaValues evaluates expr in L and renders its values.
func luaValues(L *lua.LState, expr string) string {
	if err := L.DoString("return " + expr); err != nil {
		return "error"
	}
	var parts []string
	for i := 1; i <= L.GetTop(); i++ {
		v := L.Get(i)
		parts = append(parts, fmt.Sprintf("%s:%s", v.Type(), v.String()))
	}
	L.SetTop(0)
	return strings.Join(parts, " ")
}

// TestPatternsMatchGopherLua compares the sandbox's find, match, gmatch
// and gsub with gopher-lua's on the corpus.
func TestPatternsMatchGopherLua(t *testing.T) {
	ref := lua.NewState()
	defer ref.Close()
	e := newTestEnv(t, Options{})
	for _, expr := range patternCorpus {
		want := luaValues(ref, expr)
		res := e.run(t, `local function render(...) local out = {} for i = 1, select("#", ...) do local v = select(i, ...) out[i] = type(v) .. ":" .. tostring(v) end return table.concat(out, " ") end return render(`+expr+`)`)
		if res.Error != nil {
			t.Errorf("%s: %v (gopher-lua: %s)", expr, res.Error, want)
			continue
		}
		if got := res.Result.(string); got != want {
			t.Errorf("%s\n  sandbox    %s\n  gopher-lua %s", expr, got, want)
		}
	}
}

// TestPatternsLua51 covers Lua 5.1 behaviour where gopher-lua's own
// library differs, and the matcher's errors.
func TestPatternsLua51(t *testing.T) {
	e := newTestEnv(t, Options{})
	for _, c := range []struct{ code, want string }{
		{`return (string.gsub("abc", "b", "%x"))`, `"axc"`},                           // % before a non-digit is that character
		{`return (string.gsub("abc", "b", 5))`, `"a5c"`},                              // a number replacement
		{`return string.find("abc", "", 10)`, `[4,3]`},                                // init past the end is clamped (5.1)
		{`return string.find("abc", "b", -10)`, `[2,2]`},                              // init before the start is 1
		{`local n = 0 for w in ("^a^a"):gmatch("^a") do n = n + 1 end return n`, `2`}, // '^' is literal in gmatch
		{`return select("#", ("abc"):gmatch("."))`, `1`},                              // gmatch returns only its iterator
		{`return string.match("hello", "()ll()")`, `[3,5]`},
		{`return (string.gsub("hello", "(l)(l)", "%2%1"))`, `"hello"`},
		// gopher-lua's own frontier and empty-pattern find differ from Lua 5.1 here.
		{`return string.find("THE (quick) fox", "%f[%a]%a+")`, `[1,3]`},
		{`return string.find("THE (quick) fox", "%f[%l]%a+")`, `[6,10]`},
		{`return string.gsub("THE (quick) fox", "%f[%a]%a+", "W")`, `["W (W) W",3]`},
		{`return string.find("abc", "", 2)`, `[2,1]`},
		{`return string.find("x", "%f[%a]")`, `[1,0]`},
		{`return string.match("hello world", "%f[%w]%w+$")`, `"world"`},
		{`return select("#", string.match("no digits", "%d+"))`, `1`}, // one nil, as in 5.1
	} {
		check(t, e, c.code, "", c.want)
	}
	for _, c := range []struct{ code, msg string }{
		{`string.find("a", "%")`, "ends with '%'"},
		{`string.find("a", "[a")`, "missing ']'"},
		{`string.find("a", "(a")`, "unfinished capture"},
		{`string.find("a", "(a))")`, "invalid pattern capture"},
		{`string.gsub("abc", ".", {b = true})`, "invalid replacement value (a boolean)"},
		{`string.find("a", "%1")`, "invalid capture index"},
		{`string.find("a", "%f")`, "missing '['"},
		{`string.find("a", "%b")`, "unbalanced pattern"},
		{`string.gsub("a", "a", "%2")`, "invalid capture index"},
		{`string.gsub("a", "a", {a = {}})`, "invalid replacement value (a table)"},
		{`string.gsub("a", "a", true)`, "string/function/table expected"},
		{`string.find(("a"):rep(33), ("(a)"):rep(33))`, "too many captures"},
		{`string.find(("a"):rep(300), ("a?"):rep(300))`, "pattern too complex"},
	} {
		check(t, e, c.code, "runtime_error", c.msg)
	}
	healthy(t, e)
}

// slotReleased waits until no run holds a slot and returns how long
// that took from start.
func slotReleased(t *testing.T, r *Runner, start time.Time, within time.Duration) time.Duration {
	t.Helper()
	for len(r.sem) > 0 {
		if time.Since(start) > within {
			t.Fatalf("the run still holds its slot %v after it started", time.Since(start))
		}
		time.Sleep(time.Millisecond)
	}
	return time.Since(start)
}

// TestPatternBombStopsAtDeadline runs the pattern bomb and its
// relatives: the answer is a timeout (or the instruction budget, for a
// bomb that reaches it first), and the run's goroutine gives its slot
// back at the deadline, not when the matching would have ended (about
// 20 s on gopher-lua's matcher). Asserted loosely (timeout + 2 s) for a
// loaded machine; BenchmarkPatternBomb measures the real figure.
func TestPatternBombStopsAtDeadline(t *testing.T) {
	e := newTestEnv(t, Options{MaxConcurrent: 2})
	for _, code := range []string{
		`return string.rep("a", 2e5):find(".-.-.-.-b")`,
		`local s = string.rep("a", 2e5) while true do pcall(string.find, s, ".-.-.-.-b") end`,
		`local s = string.rep("a", 2e5) for w in s:gmatch("a-a-a-a-b") do end`,
		`local s = string.rep("a", 2e5) return s:gsub(".-.-.-b", "x")`,
		`return string.rep("(", 1e5):match("%b()")`,
	} {
		const timeout = 300 * time.Millisecond
		start := time.Now()
		res := e.runReq(t, Request{Code: code, TimeoutMS: timeout.Milliseconds()})
		if res.Error == nil || (res.Error.Type != Timeout && res.Error.Type != InstructionLimit) {
			t.Fatalf("%s: %+v, want a timeout", code, res.Error)
		}
		took := slotReleased(t, e.r, start, timeout+2*time.Second)
		t.Logf("%s: slot released %v after the start (timeout %v)", code, took, timeout)
		healthy(t, e)
	}
}

// TestPatternStepsCountAsInstructions: matching steps are charged to the
// instruction budget.
func TestPatternStepsCountAsInstructions(t *testing.T) {
	e := newTestEnv(t, Options{MaxInstructions: 5_000_000})
	check(t, e, `return string.rep("a", 2e5):find(".-.-.-.-b")`, "instruction_limit", "pattern matching")
	// An ordinary match over a long subject stays well inside it.
	check(t, e, `local s = ("ab"):rep(1e5) return select(2, s:gsub("a(b)", "%1"))`, "", "100000")
	healthy(t, e)
}

// BenchmarkPatternBomb measures how long after its deadline the issue's
// pattern bomb gives its run slot back (reported as ms-after-timeout).
func BenchmarkPatternBomb(b *testing.B) {
	e := newTestEnv(b, Options{})
	const timeout = 500 * time.Millisecond
	var worst time.Duration
	for b.Loop() {
		start := time.Now()
		res, err := e.r.Run(b.Context(), Caller{}, Request{Code: `return string.rep("a", 2e5):find(".-.-.-.-b")`, TimeoutMS: timeout.Milliseconds()})
		if err != nil || res.Error == nil || res.Error.Type != Timeout {
			b.Fatal(err, res)
		}
		for len(e.r.sem) > 0 {
			time.Sleep(100 * time.Microsecond)
		}
		worst = max(worst, time.Since(start)-timeout)
	}
	b.ReportMetric(float64(worst.Microseconds())/1000, "ms-after-timeout")
}
