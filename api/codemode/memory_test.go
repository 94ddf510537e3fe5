package codemode

import (
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	lua "github.com/yuin/gopher-lua"
)

// heapAfterGC is the live heap after two collections.
func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestMemoryModelCalibrated builds values of each shape in a plain
// gopher-lua state, measures the heap they hold (runtime.ReadMemStats
// after GC) and compares the sizer's estimate of them: the model must
// stay within 0.8× and 1.5× of the real cost per shape.
func TestMemoryModelCalibrated(t *testing.T) {
	if !tableLayoutOK || !swissOK {
		t.Fatalf("layout checks failed: table %v, maps %v (update memlayout.go for this gopher-lua or Go)", tableLayoutOK, swissOK)
	}
	shapes := []struct {
		name, code string
		n          int
	}{
		{"empty table", `for i = 1, N do T[i] = {} end`, 20000},
		{"table, one field set", `for i = 1, N do local x = {} x.n = true T[i] = x end`, 20000},
		{"table constructor {n=true}", `for i = 1, N do T[i] = {n = true} end`, 20000},
		{"table, 8 string keys", `for i = 1, N do local x = {} for j = 1, 8 do x["k" .. j] = true end T[i] = x end`, 5000},
		{"table, 33 string keys", `for i = 1, N do local x = {} for j = 1, 33 do x["k" .. j] = true end T[i] = x end`, 2000},
		{"string keys (per key)", `local x = {} for j = 1, N do x["k" .. j] = true end T[1] = x`, 200000},
		{"number keys (per key)", `local x = {} for j = 1, N do x[j + 0.5] = true end T[1] = x`, 200000},
		{"array of booleans (per slot)", `local x = {} for j = 1, N do x[j] = true end T[1] = x`, 1000000},
		{"array of numbers (per slot)", `local x = {} for j = 1, N do x[j] = j + 0.5 end T[1] = x`, 1000000},
		{"closure, one upvalue", `for i = 1, N do local a = i T[i] = function() return a end end`, 20000},
		{"closure, no upvalue", `for i = 1, N do T[i] = function() return 1 end end`, 20000},
		{"string of ~104 bytes", `for i = 1, N do T[i] = string.rep("x", 100) .. i end`, 20000},
		{"table chain (per link)", `local c = {} T[1] = c for i = 1, N do c.n = {} c = c.n end`, 20000},
		{"deleted keys (per key)", `local x = {} for j = 1, N do x[j + 0.5] = true x[j + 0.5] = nil end T[1] = x`, 200000},
	}
	for _, s := range shapes {
		L := lua.NewState(lua.Options{SkipOpenLibs: true})
		lua.OpenString(L)
		T := L.NewTable()
		L.SetGlobal("T", T)
		L.SetGlobal("N", lua.LNumber(s.n))
		fn, err := L.LoadString(s.code)
		if err != nil {
			t.Fatal(err)
		}
		before := heapAfterGC()
		L.Push(fn)
		if err := L.PCall(0, 0, nil); err != nil {
			t.Fatal(err)
		}
		after := heapAfterGC()
		sz := sizer{tables: map[*lua.LTable]struct{}{}, funcs: map[*lua.LFunction]struct{}{}, strs: map[*byte]struct{}{}, limit: 1 << 40}
		sz.push(T)
		sz.drain()
		real, model := float64(after-before)/float64(s.n), float64(sz.total)/float64(s.n)
		t.Logf("%-30s measured %7.1f B, model %7.1f B (%.2f×)", s.name, real, model, model/real)
		if model < 0.8*real || model > 1.5*real {
			t.Errorf("%s: model %.1f B is not within 0.8–1.5× of the measured %.1f B", s.name, model, real)
		}
		runtime.KeepAlive(T)
		L.Close()
	}
}

// peakHeap samples HeapAlloc (allocated heap objects, collected or not)
// every 2 ms while f runs and returns its peak growth over the live heap
// before f (after a GC).
func peakHeap(f func()) (growth uint64) {
	base := heapAfterGC()
	var peak atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			if m.HeapAlloc > peak.Load() {
				peak.Store(m.HeapAlloc)
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	f()
	close(stop)
	<-sampled
	if p := peak.Load(); p > base {
		return p - base
	}
	return 0
}

// TestMemoryBombs runs allocation bombs against a 64 MiB cap: each must
// fail with memory_limit and a normal call must work afterwards. The
// table chain (the issue's bomb) must not grow the process heap by more
// than twice the cap. For the others the bound is 2.5×: a run stopped at
// its cap holds about the cap in live data, and Go's collector (GOGC
// 100) lets garbage grow to the live heap's size before it runs, so the
// peak of live data plus garbage is near twice the cap by itself.
func TestMemoryBombs(t *testing.T) {
	const limit = 64 << 20
	e := newTestEnv(t, Options{MemoryLimit: limit, MaxInstructions: 1 << 40, DefaultTimeout: 60 * time.Second})
	for i, c := range []struct{ name, code string }{
		{"table chain", `local head = {} local c = head for i = 1, 1e7 do c.n = {} c = c.n end return head ~= nil`},
		{"tables with one field", `local t = {} for i = 1, 1e7 do t[i] = {n = i} end`},
		{"big array", `local t = {} for i = 1, 1e9 do t[i] = i end`},
		{"closures", `local t = {} for i = 1, 1e8 do local x = i t[i] = function() return x end end`},
		{"string keys", `local t = {} for i = 1, 1e8 do t["k" .. i] = i end`},
		{"deleted keys", `local t = {} for i = 1, 1e9 do t[i + 0.5] = true t[i + 0.5] = nil end`},
		{"concatenation loop", `local s = "x" local t = {} for i = 1, 1e8 do s = s .. "y" t[#t + 1] = s end`},
		{"table.concat", `local t = {} for i = 1, 1e4 do t[i] = ("x"):rep(1e4) end local u = {} for i = 1, 100 do u[i] = table.concat(t) end`},
		{"gsub growth", `local s = ("x"):rep(1e5) local t = {} for i = 1, 1e4 do t[i] = s:gsub("x", "yy") end`},
	} {
		var res *Response
		growth := peakHeap(func() { res = e.runReq(t, Request{Code: c.code, TimeoutMS: 60000}) })
		t.Logf("%-22s heap growth %4d MiB, %v", c.name, growth>>20, res.Error)
		if res.Error == nil || res.Error.Type != MemoryLimit {
			t.Errorf("%s: %+v, want memory_limit", c.name, res.Error)
		}
		bound := uint64(2 * limit)
		if i > 0 {
			bound = 5 * limit / 2
		}
		if growth > bound {
			t.Errorf("%s: the heap grew by %d MiB, over %d MiB (cap %d MiB)", c.name, growth>>20, bound>>20, limit>>20)
		}
		healthy(t, e)
	}
}

// TestIssueTableChain is the table chain exactly as the issue gave it:
// the chain's head is garbage, so the run holds little; it must end
// with a limit and keep the heap bounded meanwhile.
func TestIssueTableChain(t *testing.T) {
	const limit = 64 << 20
	e := newTestEnv(t, Options{MemoryLimit: limit, MaxInstructions: 5_000_000})
	var res *Response
	growth := peakHeap(func() { res = e.run(t, `local c={} for i=1,1e7 do c.n={} c=c.n end`) })
	t.Logf("heap growth %d MiB, %v", growth>>20, res.Error)
	if res.Error == nil || (res.Error.Type != InstructionLimit && res.Error.Type != Timeout) {
		t.Fatalf("%+v, want instruction_limit (or a timeout on a slow machine)", res.Error)
	}
	if growth > 2*limit {
		t.Fatalf("the heap grew by %d MiB", growth>>20)
	}
	healthy(t, e)
}

// TestTotalMemoryCap holds memory in one run while another asks for
// more than the Runner's total allows.
func TestTotalMemoryCap(t *testing.T) {
	e := newTestEnv(t, Options{MemoryLimit: 8 << 20, MaxTotalMemory: 12 << 20})
	held := make(chan *Response)
	go func() {
		res, _ := e.r.Run(t.Context(), Caller{}, Request{Code: `local s = ("x"):rep(6e6) call_tool("demo.sleep", {ms = 1500}) return #s`})
		held <- res
	}()
	deadline := time.Now().Add(5 * time.Second)
	for e.r.total.Load() < 6e6 {
		if time.Now().After(deadline) {
			t.Fatal("the first run never held its memory")
		}
		time.Sleep(5 * time.Millisecond)
	}
	res := check(t, e, `local s = ("y"):rep(7e6) return #s`, "memory_limit", "all CodeMode runs together")
	if res.Error.Stage != StageExecute {
		t.Fatalf("stage %s", res.Error.Stage)
	}
	if res := <-held; res == nil || res.Error != nil || jsonOf(t, res.Result) != "6000000" {
		t.Fatalf("first run: %+v", res)
	}
	if got := e.r.total.Load(); got != 0 {
		t.Fatalf("the total is %d after every run ended", got)
	}
	check(t, e, `local s = ("y"):rep(7e6) return #s`, "", "7000000")
	healthy(t, e)
	if _, err := New(Options{Tools: e.g, MemoryLimit: 8 << 20, MaxTotalMemory: 4 << 20}); err == nil || !strings.Contains(err.Error(), "MaxTotalMemory") {
		t.Fatalf("a total below the per-run cap: %v", err)
	}
}
