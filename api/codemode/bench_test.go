package codemode

import (
	"context"
	"testing"
)

// BenchmarkStartup is CodeMode's overhead per run: create the sandboxed
// state, run `return 1` (compiled once, then taken from the Runner's
// cache), close the state; Run's own work (validation, the run
// goroutine, the answer) included.
func BenchmarkStartup(b *testing.B) {
	e := newTestEnv(b, Options{})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		res, err := e.r.Run(ctx, Caller{}, Request{Code: "return 1"})
		if err != nil || res.Error != nil {
			b.Fatal(err, res.Error)
		}
	}
}

// BenchmarkToolCall is one run making one call_tool through the gateway
// to the demo HTTP server.
func BenchmarkToolCall(b *testing.B) {
	e := newTestEnv(b, Options{})
	ctx := context.Background()
	for b.Loop() {
		res, err := e.r.Run(ctx, Caller{}, Request{Code: `return call_tool("demo.add", {a = 1, b = 2}).sum`})
		if err != nil || res.Error != nil {
			b.Fatal(err, res.Error)
		}
	}
}

// BenchmarkLoop is a CPU-bound loop of 1e6 iterations (instruction
// counting and memory walks included).
func BenchmarkLoop(b *testing.B) {
	e := newTestEnv(b, Options{})
	ctx := context.Background()
	for b.Loop() {
		res, err := e.r.Run(ctx, Caller{}, Request{Code: `local s = 0 for i = 1, 1e6 do s = s + i % 7 end return s`})
		if err != nil || res.Error != nil {
			b.Fatal(err, res.Error)
		}
	}
}

// BenchmarkStartupUncached is BenchmarkStartup with a different program
// each time, so every run also parses and compiles.
func BenchmarkStartupUncached(b *testing.B) {
	e := newTestEnv(b, Options{})
	ctx := context.Background()
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		i++
		res, err := e.r.Run(ctx, Caller{}, Request{Code: "return " + itoa(i)})
		if err != nil || res.Error != nil {
			b.Fatal(err, res.Error)
		}
	}
}
