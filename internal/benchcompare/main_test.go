package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// TestMain lets the test binary play the harness's helper roles (the
// tool server, the bare hop and the bare MCP hop), as the harness's own
// executable does.
func TestMain(m *testing.M) {
	if runRole() {
		return
	}
	os.Exit(m.Run())
}

// TestRESTRound runs one tiny round of the REST part on a fresh build of
// utcpd: the tool server, the bare hop and both daemons start, every
// target answers 200 to every call, and the tables are printed. It
// asserts no figure: timings belong in docs/benchmarks.md.
func TestRESTRound(t *testing.T) {
	if testing.Short() {
		t.Skip("builds utcpd and starts two daemons")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var out bytes.Buffer
	err := run(ctx, options{rounds: 1, duration: 200 * time.Millisecond, only: "rest", loadgen: "builtin", out: &out})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{"| " + tDirect + " |", "| " + tHop + " |", "| " + tDefault + " |", "| " + tLean + " |",
		"default / bare hop, c=32", "| utcpd-default | rest |", "load average",
		"CPU µs per call", "| " + tDirect + " | 32 |", "| " + tHop + " | 1 |", "| " + tLean + " | 32 |"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "| – |") {
		t.Errorf("a target has no figure:\n%s", out.String())
	}
}

func TestParseHey(t *testing.T) {
	ok := []byte(`
Summary:
  Total:	2.0003 secs
  Slowest:	0.0113 secs
  Fastest:	0.0001 secs
  Average:	0.0003 secs
  Requests/sec:	3000.1234

Status code distribution:
  [200]	6000 responses
`)
	m, err := parseHey(ok)
	if err != nil || m.rate < 2999 || m.rate > 3000 {
		t.Fatalf("parseHey = %v, %v; want 6000/2.0003 s", m.rate, err)
	}
	for name, out := range map[string]string{
		"status":  "  Total:\t1.0 secs\nStatus code distribution:\n  [200]\t10 responses\n  [502]\t3 responses\n",
		"errors":  "  Total:\t1.0 secs\nStatus code distribution:\n\nError distribution:\n  [4903]\tGet \"http://127.0.0.1:1/\": connection refused\n",
		"nothing": "  Total:\t1.0 secs\n",
		"garbage": "flag provided but not defined",
	} {
		if _, err := parseHey([]byte(out)); err == nil {
			t.Errorf("%s: parseHey accepted %q", name, out)
		}
	}
}
