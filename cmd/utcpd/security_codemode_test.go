package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// procStatusKB reads a field such as VmRSS (in kB) from /proc/<pid>/status.
func procStatusKB(t *testing.T, pid int, field string) int64 {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// procCPU is the process's user + system CPU time from /proc/<pid>/stat.
func procCPU(t *testing.T, pid int) time.Duration {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		t.Fatal(err)
	}
	// The fields after the command name (which is in parentheses).
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / 100 // USER_HZ
}

// TestSecurityCodeModeBombs replays the CodeMode bombs of issue 14
// against the real binary: each answers with its limit error, the
// pattern bomb stops using CPU once it has answered, /healthz keeps
// answering meanwhile, the daemon's RSS stays bounded, and a normal
// program runs afterwards.
func TestSecurityCodeModeBombs(t *testing.T) {
	d := startDaemon(t, daemonOpts{env: []string{"UTCPD_ADMIN_TOKEN=" + randomToken(t)}})
	pid := d.cmd.Process.Pid
	t.Logf("RSS at start: %d MiB", procStatusKB(t, pid, "VmRSS")>>10)

	// /healthz is polled all along; every answer must come, and quickly.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var slowest time.Duration
	var healthErrs []string
	wg.Add(1)
	go func() {
		defer wg.Done()
		client := &http.Client{Timeout: 5 * time.Second}
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			start := time.Now()
			resp, err := client.Get(d.URL + "/healthz")
			took := time.Since(start)
			mu.Lock()
			slowest = max(slowest, took)
			if err != nil {
				healthErrs = append(healthErrs, err.Error())
			} else {
				if resp.StatusCode != http.StatusOK {
					healthErrs = append(healthErrs, resp.Status)
				}
				resp.Body.Close()
			}
			mu.Unlock()
		}
	}()

	run := func(code string, timeoutMS int) map[string]any {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"code": code, "timeout_ms": timeoutMS})
		status, data := request(t, "POST", d.URL+"/v1/codemode", "", string(body))
		if status != http.StatusOK {
			t.Fatalf("%s: %d %s", code, status, data)
		}
		var out map[string]any
		if err := json.Unmarshal(data, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	errType := func(out map[string]any) string {
		e, _ := out["error"].(map[string]any)
		s, _ := e["type"].(string)
		return s
	}

	var peakRSS int64
	for _, c := range []struct {
		name, code string
		timeoutMS  int
		want       []string
	}{
		// The matching steps count as instructions too: at 1 s the
		// deadline comes first, with a longer timeout the budget would.
		{"pattern", `return string.rep("a",2e5):find(".-.-.-.-b")`, 1000, []string{"timeout"}},
		{"pattern in pcall", `local s = string.rep("a",2e5) while true do pcall(string.find, s, ".-.-.-.-b") end`, 1000, []string{"timeout"}},
		// On a loaded machine (or under -race) the 10 s deadline may still
		// come before the instruction budget: either stops the run.
		{"pattern, budget", `return string.rep("a",2e5):find(".-.-.-.-b")`, 10000, []string{"instruction_limit", "timeout"}},
		// The memory bombs get a deadline far beyond what they need (under
		// a second on a quiet machine), so that on a loaded one the
		// memory cap, not the clock, still stops them.
		{"table chain", `local h={} local c=h for i=1,1e7 do c.n={} c=c.n end return h ~= nil`, 25000, []string{"memory_limit"}},
		{"table chain (issue)", `local c={} for i=1,1e7 do c.n={} c=c.n end`, 2000, []string{"timeout", "instruction_limit"}},
		{"big array", `local t={} for i=1,1e9 do t[i]=i end`, 25000, []string{"memory_limit"}},
		{"closures", `local t={} for i=1,1e8 do local x=i t[i]=function() return x end end`, 25000, []string{"memory_limit"}},
		{"concatenation", `local s="x" local t={} for i=1,1e8 do s=s.."y" t[#t+1]=s end`, 25000, []string{"memory_limit"}},
		{"table.concat", `local t={} for i=1,1e4 do t[i]=("x"):rep(1e4) end local u={} for i=1,100 do u[i]=table.concat(t) end`, 25000, []string{"memory_limit"}},
	} {
		timeout := time.Duration(c.timeoutMS) * time.Millisecond
		cpu0 := procCPU(t, pid)
		start := time.Now()
		out := run(c.code, c.timeoutMS)
		took := time.Since(start)
		if got := errType(out); !contains(c.want, got) {
			t.Errorf("%s: answer %v, want an error of type %v", c.name, out, c.want)
		}
		if took > timeout+3*time.Second {
			t.Errorf("%s: answered after %v", c.name, took)
		}
		// Once answered, the run must not go on burning CPU: the
		// daemon's CPU over the next second stays well under a core.
		cpu1 := procCPU(t, pid)
		time.Sleep(time.Second)
		idle := procCPU(t, pid) - cpu1
		rss := procStatusKB(t, pid, "VmRSS")
		peakRSS = max(peakRSS, rss)
		t.Logf("%-20s %-17s answered in %5v, CPU %5v during, %4v in the second after; RSS %d MiB",
			c.name, errType(out), took.Round(time.Millisecond), (cpu1 - cpu0).Round(10*time.Millisecond), idle, rss>>10)
		if idle > 500*time.Millisecond {
			t.Errorf("%s: the daemon used %v of CPU in the second after answering", c.name, idle)
		}
	}
	close(stop)
	wg.Wait()
	hwm := procStatusKB(t, pid, "VmHWM")
	t.Logf("peak RSS %d MiB (VmHWM), slowest /healthz %v", hwm>>10, slowest)
	if len(healthErrs) > 0 {
		t.Errorf("/healthz failed during the bombs: %v", healthErrs)
	}
	if slowest > 2*time.Second {
		t.Errorf("/healthz took %v during the bombs", slowest)
	}
	// 64 MiB per run; a run at its cap can hold about twice that in
	// heap (live data plus garbage) before it is stopped. The race
	// detector's shadow memory multiplies what the heap touches, so the
	// race-enabled daemon gets a looser bound (before the limits held, the
	// table chain alone grew a plain build to 1.7 GB).
	limit := int64(400 << 10)
	if raceEnabled {
		limit = 1 << 20
	}
	if hwm > limit {
		t.Errorf("the daemon's RSS peaked at %d MiB (limit %d MiB)", hwm>>10, limit>>10)
	}
	if out := run(`return 1 + 1`, 2000); out["result"] != float64(2) {
		t.Errorf("a normal program after the bombs: %v", out)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
