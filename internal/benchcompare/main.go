// Command benchcompare measures utcpd's own cost side by side with the
// floor and with another gateway, in one interleaved run on this machine
// (issue 17; figures in docs/benchmarks.md):
//
//	make bench-compare
//	go run ./internal/benchcompare -rounds 5 -duration 5s -only rest
//
// It builds utcpd from the tree and starts, on loopback:
//
//   - a minimal Go tool server (GET /add?a=1&b=2, and its UTCP manual);
//   - a bare hop, the floor of any HTTP-to-HTTP gateway: POST in, GET to
//     the tool, copy the answer back;
//   - a bare MCP hop, the floor of any Streamable HTTP MCP front over a
//     stdio server: each POST /mcp body one line to server-everything's
//     stdin, the line with the same id back as application/json
//     (mcphop.go);
//   - utcpd serve in its default configuration (SQLite data dir under a
//     temporary HOME, info logs to a file, audit on) and a lean one with
//     --data-dir "" (no store, audit in memory), each with the tool server
//     as manual "bench" and, for the MCP part, server-everything over
//     stdio as manual "ev";
//   - supergateway in its SSE mode (its fastest) in front of
//     server-everything over stdio.
//
// The REST part drives, with hey (from PATH, else the pinned version
// installed into a temporary GOBIN; -loadgen builtin uses the closed-loop
// generator of internal/loadgen instead), the tool directly, the bare hop
// and both daemons' REST fronts; the MCP part drives, with the go-sdk
// client on one session, server-everything over stdio directly, the bare
// MCP hop and both daemons' /mcp (Streamable HTTP, protocol 2025-11-25,
// JSON answers), supergateway (SSE) and `utcpd mcp` (the stdio front).
// Every round runs every target once, at concurrency 1 and 32 (A B C D,
// A B C D, ...), so that the machine's other load falls on all of them
// alike. The
// npm packages are the versions internal/e2e/testdata/peer pins, from its
// node_modules when installed, else installed with npm ci into a temporary
// prefix. The tables give calls/s (min–max over the rounds), the ratios
// the goals are stated in, the mean added at concurrency 1, the CPU time
// per call (utime+stime from /proc, min–max over the rounds) of the
// process serving each target, of the process behind it (the tool server;
// the MCP server its child) and of the load generator (hey's rusage, or
// this process for internal/loadgen and the go-sdk client), to show where
// the machine's CPU goes, the daemons' peak RSS (from /proc) and the load
// average seen during the run.
//
// Flags: -rounds N (default 3), -duration D per target and round (default
// 5s), -only rest|mcp (default both), -loadgen hey|builtin, -keep (leave
// the temporary folder with the logs), -pprof ADDR (the default daemon
// serves its profiles there: go tool pprof http://ADDR/debug/pprof/profile
// during the run).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// options of one comparison run.
type options struct {
	rounds   int
	duration time.Duration
	only     string // "", "rest" or "mcp"
	loadgen  string // "hey" or "builtin"
	keep     bool
	pprof    string // --pprof-listen of the default daemon
	out      io.Writer
}

func main() {
	if runRole() {
		return
	}
	var o options
	flag.IntVar(&o.rounds, "rounds", 3, "interleaved rounds")
	flag.DurationVar(&o.duration, "duration", 5*time.Second, "length of one target's run in a round")
	flag.StringVar(&o.only, "only", "", "run only the rest or the mcp part")
	flag.StringVar(&o.loadgen, "loadgen", "hey", "REST load generator: hey or builtin")
	flag.BoolVar(&o.keep, "keep", false, "keep the temporary folder (logs, data dirs)")
	flag.StringVar(&o.pprof, "pprof", "", "serve the default daemon's profiles on this loopback address (utcpd serve --pprof-listen), to profile it under the run's load")
	flag.Parse()
	o.out = os.Stdout
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "benchcompare:", err)
		os.Exit(1)
	}
}

// concurrencies are the two the goals are stated at.
var concurrencies = []int{1, 32}

// series are the measurements of one target at one concurrency.
type series map[string][]float64 // "name/c" -> calls/s per round

func (s series) add(name string, c int, rate float64) {
	k := fmt.Sprintf("%s/%d", name, c)
	s[k] = append(s[k], rate)
}

func (s series) get(name string, c int) []float64 { return s[fmt.Sprintf("%s/%d", name, c)] }

// sampler records the peak RSS of the daemons and the load average range
// while it runs.
type sampler struct {
	mu           sync.Mutex
	pids         map[string]int
	peak         map[string]float64 // "daemon/part" -> MB
	part         string
	loadLo, load float64
}

func newSampler() *sampler {
	return &sampler{pids: map[string]int{}, peak: map[string]float64{}, loadLo: -1}
}

func (s *sampler) setPart(p string) { s.mu.Lock(); s.part = p; s.mu.Unlock() }

func (s *sampler) sample() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, pid := range s.pids {
		rss, _ := rssMB(pid)
		k := name + "/" + s.part
		s.peak[k] = max(s.peak[k], rss)
	}
	l := loadAvg()
	if s.loadLo < 0 || l < s.loadLo {
		s.loadLo = l
	}
	s.load = max(s.load, l)
}

func (s *sampler) loop(ctx context.Context) {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.sample()
		}
	}
}

func run(ctx context.Context, o options) error {
	if o.rounds < 1 || o.duration <= 0 {
		return fmt.Errorf("-rounds and -duration must be positive")
	}
	if o.only != "" && o.only != "rest" && o.only != "mcp" {
		return fmt.Errorf("-only %q: want rest or mcp", o.only)
	}
	if o.loadgen != "hey" && o.loadgen != "builtin" {
		return fmt.Errorf("-loadgen %q: want hey or builtin", o.loadgen)
	}
	doREST, doMCP := o.only != "mcp", o.only != "rest"
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "utcpd-benchcompare-")
	if err != nil {
		return err
	}
	if o.keep {
		fmt.Fprintf(o.out, "logs and data in %s\n", tmp)
	} else {
		defer os.RemoveAll(tmp)
	}
	var procs []*proc
	defer func() {
		for _, p := range slices.Backward(procs) {
			p.stop()
		}
	}()

	bin, err := buildDaemon(root, tmp)
	if err != nil {
		return err
	}
	var hey string
	if doREST && o.loadgen == "hey" {
		if hey, err = findHey(ctx, tmp); err != nil {
			return err
		}
	}
	var p peers
	if doMCP {
		if p, err = installPeers(root, tmp); err != nil {
			return err
		}
	}
	tool, err := selfRole(tmp, "tool")
	if err != nil {
		return err
	}
	procs = append(procs, tool)
	addURL := "http://" + tool.addr + "/add?a=1&b=2"
	hop, err := selfRole(tmp, "hop", "BENCHCOMPARE_TARGET="+addURL)
	if err != nil {
		return err
	}
	procs = append(procs, hop)
	cfg := filepath.Join(tmp, "utcpd.json")
	if err := writeConfig(cfg, tool.addr, p.node, p.everything); err != nil {
		return err
	}
	daemons := map[string]*daemon{}
	smp := newSampler()
	var defaultFlags []string // data under $HOME/.local/state/utcpd
	if o.pprof != "" {
		defaultFlags = []string{"--pprof-listen", o.pprof}
	}
	for _, d := range []struct {
		name  string
		flags []string
	}{
		{"utcpd-default", defaultFlags},
		{"utcpd-lean", []string{"--data-dir", ""}}, // no store
	} {
		dir := filepath.Join(tmp, d.name)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		dm, err := startDaemon(bin, dir, d.name, cfg, d.flags...)
		if err != nil {
			return err
		}
		procs = append(procs, dm.proc)
		daemons[d.name] = dm
		smp.pids[d.name] = dm.cmd.Process.Pid
	}
	sctx, cancel := context.WithCancel(ctx)
	sampled := make(chan struct{})
	stopSampling := func() { cancel(); <-sampled }
	go func() { defer close(sampled); smp.loop(sctx) }()
	defer func() {
		if sctx.Err() == nil {
			stopSampling()
		}
	}()

	var gens []string
	if doREST {
		gens = append(gens, map[bool]string{true: "hey", false: "internal/loadgen"}[hey != ""]+" (REST)")
	}
	if doMCP {
		gens = append(gens, "the go-sdk client (MCP)")
	}
	fmt.Fprintf(o.out, "utcpd built from %s; %d round(s) of %v per target; load generators %s\n",
		root, o.rounds, o.duration, strings.Join(gens, ", "))
	fmt.Fprintf(o.out, "load average at start: %s\n", strings.TrimSpace(readFile("/proc/loadavg")))

	if doREST {
		smp.setPart("rest")
		res, cpu, err := restPart(ctx, o, hey, addURL, tool, hop, daemons, doMCP)
		if err != nil {
			return err
		}
		printREST(o.out, res, cpu, doMCP, hey != "")
	}
	if doMCP {
		smp.setPart("mcp")
		res, cpu, err := mcpPart(ctx, o, p, bin, cfg, tmp, daemons, &procs)
		if err != nil {
			return err
		}
		printMCP(o.out, res, cpu)
	}
	stopSampling() // the sampler's goroutine has ended: its fields are ours to read
	smp.sample()
	fmt.Fprintln(o.out)
	fmt.Fprintln(o.out, "| daemon | part | peak RSS |")
	fmt.Fprintln(o.out, "| --- | --- | --: |")
	for _, name := range []string{"utcpd-default", "utcpd-lean"} {
		for _, part := range []string{"rest", "mcp"} {
			if v, ok := smp.peak[name+"/"+part]; ok {
				fmt.Fprintf(o.out, "| %s | %s | %.1f MB |\n", name, part, v)
			}
		}
	}
	for _, name := range []string{"utcpd-default", "utcpd-lean"} {
		fmt.Fprintf(o.out, "\n%s audit records: %s", name, auditCounters(daemons[name].base))
	}
	fmt.Fprintln(o.out)
	fmt.Fprintf(o.out, "\nload average (1 min) during the run: %.2f–%.2f; at the end: %s\n", smp.loadLo, smp.load,
		strings.TrimSpace(readFile("/proc/loadavg")))
	return nil
}

// auditCounters reads the daemon's audit counters from /metrics: every
// call's record written, none dropped or failed, is what a run must show.
func auditCounters(base string) string {
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var parts []string
	for line := range strings.SplitSeq(string(body), "\n") {
		for _, k := range []string{"written", "dropped", "failed"} {
			if v, ok := strings.CutPrefix(line, "utcpd_audit_records_"+k+"_total "); ok {
				parts = append(parts, k+" "+v)
			}
		}
	}
	return strings.Join(parts, ", ")
}

func readFile(p string) string {
	data, _ := os.ReadFile(p)
	return string(data)
}

// REST target names.
const (
	tDirect   = "tool directly"
	tHop      = "bare hop"
	tDefault  = "utcpd REST, default config"
	tLean     = `utcpd REST, --data-dir ""`
	tStdioRST = "utcpd REST → server-everything (stdio)"
)

func restPart(ctx context.Context, o options, hey, addURL string, tool, hop *proc, daemons map[string]*daemon, withStdio bool) (series, cpuSeries, error) {
	body := `{"arguments":{"a":1,"b":2}}`
	toolPID := tool.cmd.Process.Pid
	dflt, lean := daemons["utcpd-default"], daemons["utcpd-lean"]
	targets := []httpTarget{
		{tDirect, "GET", addURL, "", cpuOf{toolPID, -1}},
		{tHop, "POST", "http://" + hop.addr + "/", body, cpuOf{hop.cmd.Process.Pid, toolPID}},
		{tDefault, "POST", dflt.base + "/v1/tools/bench.add/call", body, cpuOf{dflt.cmd.Process.Pid, toolPID}},
		{tLean, "POST", lean.base + "/v1/tools/bench.add/call", body, cpuOf{lean.cmd.Process.Pid, toolPID}},
	}
	if withStdio {
		// Behind it: the daemon's server-everything child.
		targets = append(targets, httpTarget{tStdioRST, "POST", dflt.base + "/v1/tools/ev.everything.echo/call",
			`{"arguments":{"message":"hi"}}`, cpuOf{dflt.cmd.Process.Pid, 0}})
	}
	warm := min(o.duration/4, time.Second)
	for _, t := range targets {
		if _, err := httpLoad(ctx, hey, t, 32, warm); err != nil {
			return nil, nil, fmt.Errorf("warming up %s: %w", t.name, err)
		}
	}
	res, cpu := series{}, cpuSeries{}
	for r := range o.rounds {
		for _, c := range concurrencies {
			for _, t := range targets {
				w := t.cpu.watch()
				before := w.snap()
				m, err := httpLoad(ctx, hey, t, c, o.duration)
				if err != nil {
					return nil, nil, err
				}
				cpu.add(t.name, c, w, before, w.snap(), m)
				res.add(t.name, c, m.rate)
				fmt.Fprintf(os.Stderr, "round %d c=%d %-40s %8.0f calls/s\n", r+1, c, t.name, m.rate)
			}
		}
	}
	return res, cpu, nil
}

// MCP target names.
const (
	mDirect  = "server-everything over stdio, directly"
	mHop     = "bare MCP hop (Streamable HTTP → stdio)"
	mSuper   = "supergateway 4.0.0 SSE"
	mDefault = "utcpd /mcp, default config"
	mLean    = `utcpd /mcp, --data-dir ""`
	mStdio   = "utcpd mcp (stdio front), default config"
)

func mcpPart(ctx context.Context, o options, p peers, bin, cfg, tmp string, daemons map[string]*daemon, procs *[]*proc) (series, cpuSeries, error) {
	client := mcp.NewClient(&mcp.Implementation{Name: "utcpd-benchcompare", Version: "1"}, nil)
	connect := func(name string, tr mcp.Transport, pv string) (*mcp.ClientSession, error) {
		// ctx, not one with a deadline: the SSE transport's stream
		// lives as long as the context Connect was given.
		var so *mcp.ClientSessionOptions
		if pv != "" {
			so = &mcp.ClientSessionOptions{ProtocolVersion: pv}
		}
		s, err := client.Connect(ctx, tr, so)
		if err != nil {
			return nil, fmt.Errorf("connecting to %s: %w", name, err)
		}
		return s, nil
	}
	var sessions []*mcp.ClientSession
	defer func() {
		for _, s := range sessions {
			_ = s.Close()
		}
	}()
	var targets []mcpTarget
	// The HTTP targets' clients pool as many connections as there are
	// callers, as hey does: with http.DefaultClient (what the go-sdk
	// transports use by default) two idle connections a host are kept, so
	// at concurrency 32 most calls would open and close a connection, a
	// cost of the load generator that every HTTP target would pay alike.
	pooled := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, MaxIdleConns: 256}}
	defer pooled.CloseIdleConnections()
	// add connects to a target served by the process pid (0: the command
	// of tr, known once connected), the MCP server being pid's descendants.
	add := func(name, tool string, tr mcp.Transport, pv string, pid int) error {
		s, err := connect(name, tr, pv)
		if err != nil {
			return err
		}
		if ct, ok := tr.(*mcp.CommandTransport); ok {
			pid = ct.Command.Process.Pid
		}
		sessions = append(sessions, s)
		targets = append(targets, mcpTarget{name: name, sess: s, tool: tool, cpu: cpuOf{pid, 0}})
		return nil
	}
	if err := add(mDirect, "echo", &mcp.CommandTransport{Command: exec.Command(p.node, p.everything, "stdio")}, "", 0); err != nil {
		return nil, nil, err
	}
	argv, err := json.Marshal([]string{p.node, p.everything, "stdio"})
	if err != nil {
		return nil, nil, err
	}
	hop, err := selfRole(tmp, "mcphop", mcpServerEnv+"="+string(argv))
	if err != nil {
		return nil, nil, err
	}
	*procs = append(*procs, hop)
	// Protocol 2025-11-25 and JSON answers, as utcpd's /mcp.
	hopTr := &mcp.StreamableClientTransport{Endpoint: "http://" + hop.addr + "/mcp", MaxRetries: -1, HTTPClient: pooled}
	if err := add(mHop, "echo", hopTr, "2025-11-25", hop.cmd.Process.Pid); err != nil {
		return nil, nil, err
	}
	sg, sse, err := startSupergateway(p, tmp)
	if err != nil {
		return nil, nil, err
	}
	*procs = append(*procs, sg)
	if err := add(mSuper, "echo", &mcp.SSEClientTransport{Endpoint: sse, HTTPClient: pooled}, "", sg.cmd.Process.Pid); err != nil {
		return nil, nil, err
	}
	for _, d := range []struct{ name, daemon string }{{mDefault, "utcpd-default"}, {mLean, "utcpd-lean"}} {
		// Protocol 2025-11-25: one session, as supergateway's.
		tr := &mcp.StreamableClientTransport{Endpoint: daemons[d.daemon].base + "/mcp", MaxRetries: -1, HTTPClient: pooled}
		if err := add(d.name, "ev.everything.echo", tr, "2025-11-25", daemons[d.daemon].cmd.Process.Pid); err != nil {
			return nil, nil, err
		}
	}
	stdio := exec.Command(bin, "mcp", "--config", cfg)
	stdio.Dir = filepath.Join(tmp, "utcpd-default")
	stdio.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + stdio.Dir}
	// Protocol 2025-11-25, as /mcp: at 2026-07-28 (the go-sdk client's
	// default) every request carries per-request metadata only the SDK
	// serves.
	if err := add(mStdio, "ev.everything.echo", &mcp.CommandTransport{Command: stdio}, "2025-11-25", 0); err != nil {
		return nil, nil, err
	}
	warm := min(o.duration/4, time.Second)
	for _, t := range targets {
		if _, err := mcpLoad(ctx, t, 32, warm); err != nil {
			return nil, nil, fmt.Errorf("warming up %s: %w", t.name, err)
		}
	}
	res, cpu := series{}, cpuSeries{}
	for r := range o.rounds {
		for _, c := range concurrencies {
			for _, t := range targets {
				w := t.cpu.watch()
				before := w.snap()
				m, err := mcpLoad(ctx, t, c, o.duration)
				if err != nil {
					return nil, nil, err
				}
				cpu.add(t.name, c, w, before, w.snap(), m)
				res.add(t.name, c, m.rate)
				fmt.Fprintf(os.Stderr, "round %d c=%d %-40s %8.0f calls/s\n", r+1, c, t.name, m.rate)
			}
		}
	}
	return res, cpu, nil
}

// span formats the min–max of xs.
func span(xs []float64, format string) string {
	if len(xs) == 0 {
		return "–"
	}
	lo, hi := slices.Min(xs), slices.Max(xs)
	if len(xs) == 1 || fmt.Sprintf(format, lo) == fmt.Sprintf(format, hi) {
		return fmt.Sprintf(format, lo)
	}
	return fmt.Sprintf(format+"–"+format, lo, hi)
}

// ratios are a[i]/b[i] per round (same round: same conditions).
func ratios(a, b []float64) []float64 {
	var out []float64
	for i := range min(len(a), len(b)) {
		if b[i] > 0 {
			out = append(out, a[i]/b[i])
		}
	}
	return out
}

// added are the mean µs a call through a adds over a call through b at
// concurrency 1, per round.
func added(a, b []float64) []float64 {
	var out []float64
	for i := range min(len(a), len(b)) {
		if a[i] > 0 && b[i] > 0 {
			out = append(out, 1e6/a[i]-1e6/b[i])
		}
	}
	return out
}

func printTable(w io.Writer, res series, names []string) {
	fmt.Fprintln(w, "| path | c=1 calls/s | c=1 mean µs | c=32 calls/s |")
	fmt.Fprintln(w, "| --- | --: | --: | --: |")
	for _, n := range names {
		var means []float64
		for _, r := range res.get(n, 1) {
			means = append(means, 1e6/r)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", n, span(res.get(n, 1), "%.0f"), span(means, "%.0f"), span(res.get(n, 32), "%.0f"))
	}
}

func printREST(w io.Writer, res series, cpu cpuSeries, withStdio, hey bool) {
	names := []string{tDirect, tHop, tDefault, tLean}
	if withStdio {
		names = append(names, tStdioRST)
	}
	fmt.Fprintln(w, "\nREST front (hey or internal/loadgen, closed loop, loopback)")
	fmt.Fprintln(w)
	printTable(w, res, names)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| measure | figure | goal |")
	fmt.Fprintln(w, "| --- | --: | --- |")
	fmt.Fprintf(w, "| default / bare hop, c=32 | %s | ≥ 0.85 |\n", span(ratios(res.get(tDefault, 32), res.get(tHop, 32)), "%.2f"))
	fmt.Fprintf(w, "| default, mean added over the bare hop, c=1 | %s µs | ≤ 50 µs |\n", span(added(res.get(tDefault, 1), res.get(tHop, 1)), "%.0f"))
	fmt.Fprintf(w, "| lean / bare hop, c=32 | %s | |\n", span(ratios(res.get(tLean, 32), res.get(tHop, 32)), "%.2f"))
	fmt.Fprintf(w, "| lean, mean added over the bare hop, c=1 | %s µs | |\n", span(added(res.get(tLean, 1), res.get(tHop, 1)), "%.0f"))
	fmt.Fprintf(w, "| default / lean, c=1 · c=32 | %s · %s | ≥ 0.90 |\n",
		span(ratios(res.get(tDefault, 1), res.get(tLean, 1)), "%.2f"), span(ratios(res.get(tDefault, 32), res.get(tLean, 32)), "%.2f"))
	fmt.Fprintf(w, "| bare hop / tool directly, c=32 | %s | |\n", span(ratios(res.get(tHop, 32), res.get(tDirect, 32)), "%.2f"))
	load := "hey's rusage"
	if !hey {
		load = "this process (internal/loadgen)"
	}
	printCPU(w, cpu, names, "behind it (tool server; server-everything for → stdio)", load)
}

func printMCP(w io.Writer, res series, cpu cpuSeries) {
	names := []string{mDirect, mHop, mSuper, mDefault, mLean, mStdio}
	fmt.Fprintln(w, "\nMCP (go-sdk client, one session, echo of server-everything over stdio)")
	fmt.Fprintln(w)
	printTable(w, res, names)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| measure | figure | goal |")
	fmt.Fprintln(w, "| --- | --: | --- |")
	fmt.Fprintf(w, "| /mcp default / direct, c=32 | %s | ≥ 0.6 |\n", span(ratios(res.get(mDefault, 32), res.get(mDirect, 32)), "%.2f"))
	fmt.Fprintf(w, "| /mcp default / supergateway SSE, c=1 · c=32 | %s · %s | ≥ 2 |\n",
		span(ratios(res.get(mDefault, 1), res.get(mSuper, 1)), "%.2f"), span(ratios(res.get(mDefault, 32), res.get(mSuper, 32)), "%.2f"))
	fmt.Fprintf(w, "| /mcp default, mean added over direct, c=1 | %s µs | ≤ 150 µs |\n", span(added(res.get(mDefault, 1), res.get(mDirect, 1)), "%.0f"))
	fmt.Fprintf(w, "| /mcp default / bare MCP hop, c=32 | %s | |\n", span(ratios(res.get(mDefault, 32), res.get(mHop, 32)), "%.2f"))
	fmt.Fprintf(w, "| /mcp default, mean added over the bare MCP hop, c=1 | %s µs | |\n", span(added(res.get(mDefault, 1), res.get(mHop, 1)), "%.0f"))
	fmt.Fprintf(w, "| bare MCP hop / direct, c=32 | %s | |\n", span(ratios(res.get(mHop, 32), res.get(mDirect, 32)), "%.2f"))
	fmt.Fprintf(w, "| /mcp default / lean, c=1 · c=32 | %s · %s | ≥ 0.90 |\n",
		span(ratios(res.get(mDefault, 1), res.get(mLean, 1)), "%.2f"), span(ratios(res.get(mDefault, 32), res.get(mLean, 32)), "%.2f"))
	fmt.Fprintf(w, "| utcpd mcp (stdio) / direct, c=32 | %s | ≥ 0.6 |\n", span(ratios(res.get(mStdio, 32), res.get(mDirect, 32)), "%.2f"))
	fmt.Fprintf(w, "| utcpd mcp (stdio), mean added over direct, c=1 | %s µs | ≤ 150 µs |\n", span(added(res.get(mStdio, 1), res.get(mDirect, 1)), "%.0f"))
	printCPU(w, cpu, names, "MCP server child", "this process (go-sdk client)")
}
