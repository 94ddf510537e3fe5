package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"
)

// clkTck is USER_HZ, the unit of utime and stime in /proc/PID/stat: 100
// on every Linux architecture this harness runs on (getconf CLK_TCK).
const clkTck = 100

// cpuTime is the CPU time (utime + stime, fields 14 and 15 of
// /proc/PID/stat; every thread, not the children) pid has used, 0 where
// it cannot be read (the process is gone). pid 0 is this process.
func cpuTime(pid int) time.Duration {
	p := "/proc/self/stat"
	if pid != 0 {
		p = "/proc/" + strconv.Itoa(pid) + "/stat"
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces and parentheses: the
	// fields after it start after its last ')'. That is field 3, so utime
	// and stime are the 12th and 13th from there.
	f := bytes.Fields(data[bytes.LastIndexByte(data, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(string(f[11]), 10, 64)
	st, _ := strconv.ParseInt(string(f[12]), 10, 64)
	return time.Duration(ut+st) * time.Second / clkTck
}

// descendants are the processes under pid (its children, theirs, ...),
// found by scanning /proc for their parent.
func descendants(pid int) []int {
	dir, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	parent := map[int]int{}
	for _, e := range dir {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		f := bytes.Fields(data[bytes.LastIndexByte(data, ')')+1:])
		if len(f) < 2 {
			continue
		}
		pp, _ := strconv.Atoi(string(f[1])) // field 4, ppid
		parent[p] = pp
	}
	var out []int
	under := map[int]bool{pid: true}
	for changed := true; changed; { // a few levels at most
		changed = false
		for p, pp := range parent {
			if under[pp] && !under[p] {
				under[p] = true
				out = append(out, p)
				changed = true
			}
		}
	}
	return out
}

// cpuOf names the processes whose CPU a target's calls cost: the one
// serving the target, and the one behind it (the tool server, the MCP
// server). behind 0 means the serving process's descendants, whichever
// they are (the MCP server a gateway started, through a shell or not);
// -1 means none.
type cpuOf struct {
	serve, behind int
}

// cpuWatch is a cpuOf resolved to pids for one measurement.
type cpuWatch struct {
	serve, behind []int
}

func (c cpuOf) watch() cpuWatch {
	w := cpuWatch{serve: []int{c.serve}}
	switch {
	case c.behind > 0:
		w.behind = []int{c.behind}
	case c.behind == 0:
		w.behind = descendants(c.serve)
	}
	return w
}

// cpuSnap is the CPU used so far by a watch's processes.
type cpuSnap struct{ serve, behind time.Duration }

func sumCPU(pids []int) time.Duration {
	var d time.Duration
	for _, p := range pids {
		d += cpuTime(p)
	}
	return d
}

func (w cpuWatch) snap() cpuSnap { return cpuSnap{sumCPU(w.serve), sumCPU(w.behind)} }

// cpuSample is one measurement's CPU µs per call; behind is negative when
// no process is behind the serving one.
type cpuSample struct{ serve, behind, load float64 }

// cpuSeries are the samples of one target at one concurrency per round.
type cpuSeries map[string][]cpuSample // "name/c"

// add records a measurement: the watch's snapshots before and after it,
// and the load generator's CPU in m.
func (s cpuSeries) add(name string, c int, w cpuWatch, before, after cpuSnap, m measurement) {
	if m.calls == 0 {
		return
	}
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(m.calls) }
	cs := cpuSample{serve: per(after.serve - before.serve), behind: -1, load: per(m.loadCPU)}
	if len(w.behind) > 0 {
		cs.behind = per(after.behind - before.behind)
	}
	k := fmt.Sprintf("%s/%d", name, c)
	s[k] = append(s[k], cs)
}

// printCPU prints the CPU table of a part, behind naming its middle column.
func printCPU(w io.Writer, cpu cpuSeries, names []string, behind, load string) {
	fmt.Fprintf(w, "\nCPU µs per call (utime+stime from /proc at %d Hz, min–max over rounds; load generator: %s)\n\n", clkTck, load)
	fmt.Fprintf(w, "| path | c | serving process | %s | load generator |\n", behind)
	fmt.Fprintln(w, "| --- | --: | --: | --: | --: |")
	for _, n := range names {
		for _, c := range concurrencies {
			var sv, bh, ld []float64
			for _, s := range cpu[fmt.Sprintf("%s/%d", n, c)] {
				sv, ld = append(sv, s.serve), append(ld, s.load)
				if s.behind >= 0 {
					bh = append(bh, s.behind)
				}
			}
			bcell := span(bh, "%.0f")
			if len(sv) > 0 && len(bh) == 0 {
				bcell = "none" // "–" is a missing figure
			}
			fmt.Fprintf(w, "| %s | %d | %s | %s | %s |\n", n, c, span(sv, "%.0f"), bcell, span(ld, "%.0f"))
		}
	}
}
