package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/utcpd/utcpd/gateway/audit"
	"github.com/utcpd/utcpd/guard"
	"github.com/utcpd/utcpd/manuals"
)

// recordingKinds is a guard registry whose kinds record the configuration
// they were built from: "answer" answers its "decision" field.
func recordingKinds(t *testing.T) (*guard.Registry, func() []string) {
	t.Helper()
	var mu sync.Mutex
	var seen []string
	reg := guard.NewRegistry()
	err := reg.Register(guard.Info{Kind: "answer", New: func(cfg json.RawMessage, _ *slog.Logger) (guard.Guard, error) {
		var c struct {
			Kind     string `json:"kind"`
			Decision string `json:"decision"`
			Secret   string `json:"secret"`
		}
		if err := json.Unmarshal(cfg, &c); err != nil {
			return nil, err
		}
		if c.Decision == "" {
			return nil, errors.New(`"decision" is required`)
		}
		mu.Lock()
		seen = append(seen, string(cfg))
		mu.Unlock()
		return guard.Func(func(context.Context, *guard.Call) (guard.Verdict, error) {
			return guard.Verdict{Decision: guard.Decision(c.Decision), Reason: "configured"}, nil
		}), nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	return reg, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
}

func resolver(t *testing.T, vars map[string]string) *manuals.Resolver {
	t.Helper()
	r, err := manuals.NewResolver(&manuals.Config{Variables: vars}, manuals.ResolverOptions{LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestLoadGuards(t *testing.T) {
	reg, seen := recordingKinds(t)
	vars := resolver(t, map[string]string{"GUARD_HMAC": "hmac-s3cr3t"})
	log := slog.New(slog.DiscardHandler)

	named, err := LoadGuards(reg, json.RawMessage(`[
		{"kind": "answer", "decision": "allow"},
		{"kind": "answer", "decision": "deny", "secret": "${GUARD_HMAC}", "price": "$$5"}
	]`), vars, log)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range named {
		names = append(names, n.Name)
	}
	if d := cmp.Diff([]string{"0:answer", "1:answer"}, names); d != "" {
		t.Errorf("names (-want +got):\n%s", d)
	}
	got := seen()
	if len(got) != 2 {
		t.Fatalf("configurations handed to the kind: %q", got)
	}
	var second map[string]string
	if err := json.Unmarshal([]byte(got[1]), &second); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(map[string]string{"kind": "answer", "decision": "deny", "secret": "hmac-s3cr3t", "price": "$5"}, second); d != "" {
		t.Errorf("the second entry as its kind got it (-want +got):\n%s", d)
	}
	v, _ := guard.NewChain(named).Evaluate(t.Context(), &guard.Call{Tool: "x"})
	if v.Decision != guard.Deny || v.Guard != "1:answer" {
		t.Errorf("chain verdict %+v", v)
	}

	for _, tc := range []struct {
		name, raw string
		want      []string
	}{
		{"unknown kind", `[{"kind":"answer","decision":"allow"},{"kind":"answr"}]`, []string{"gateway.guards[1]", `kind "answr"`, "unknown guard kind", "answer"}},
		{"bad config", `[{"kind":"answer"}]`, []string{"gateway.guards[0]", `"decision" is required`}},
		{"no kind", `[{"decision":"allow"}]`, []string{"gateway.guards[0]", `has no "kind"`, "answer"}},
		{"not an object", `[{"kind":"answer","decision":"allow"}, 3]`, []string{"gateway.guards[1]", "must be an object"}},
		{"missing variable", `[{"kind":"answer","decision":"allow","secret":"${NOPE}"}]`, []string{"gateway.guards[0]", "NOPE", "not found"}},
		{"not an array", `{"kind":"answer"}`, []string{"gateway.guards", "array"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadGuards(reg, json.RawMessage(tc.raw), vars, log)
			if err == nil {
				t.Fatal("loaded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "hmac-s3cr3t") {
				t.Errorf("the error shows a secret: %v", err)
			}
		})
	}
	if named, err := LoadGuards(reg, nil, vars, log); err != nil || len(named) != 0 {
		t.Errorf("no guards: %v %v", named, err)
	}
	// Built-in kinds take their entry with its kind.
	if _, err := LoadGuards(guard.Default, json.RawMessage(`[{"kind":"deny_all"},{"kind":"allow_all","name":"x"}]`), vars, log); err != nil {
		t.Errorf("built-in kinds: %v", err)
	}
}

func TestRestartOnlyGatewayChanged(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{`{"listen":"x","guards":[1]}`, `{"listen":"x","guards":[2],"bypass_tools":["a"],"guard_timeout":"1s"}`, false},
		{`{"listen":"x"}`, `{"listen":"y"}`, true},
		{`{"review_timeout":"1m"}`, `{"review_timeout":"2m"}`, true},
		{`{"listen": "x"}`, `{"listen":"x" }`, false},
		{`{"listen":"x"}`, `{"listen":"x","guards":[]}`, false},
	} {
		if got := restartOnlyGatewayChanged(json.RawMessage(tc.a), json.RawMessage(tc.b)); got != tc.want {
			t.Errorf("%s vs %s: %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

// TestMemoryAuditBound: without a data dir the audit log in memory is
// bounded: by audit_max_rows when set, else by MemoryAuditRecords.
func TestMemoryAuditBound(t *testing.T) {
	for _, c := range []struct {
		rows int64
		want int
	}{{0, MemoryAuditRecords}, {-1, MemoryAuditRecords}, {500, 500}, {1_000_000, 1_000_000}, {1 << 40, MemoryAuditRecords}} {
		if got := memoryAuditMax(&Settings{AuditMaxRows: c.rows}); got != c.want {
			t.Errorf("audit_max_rows %d: bound %d, want %d", c.rows, got, c.want)
		}
	}
	_, st := guardStores(nil, &Settings{AuditMaxRows: 3})
	for i := range 10 {
		if err := st.Append(t.Context(), []audit.Record{{Time: time.Now(), Tool: "t", Decision: "allow", Outcome: "ok", Steps: []audit.Step{}}}); err != nil {
			t.Fatal(i, err)
		}
	}
	if got, err := st.Query(t.Context(), audit.Query{}); err != nil || len(got) != 3 {
		t.Errorf("after 10 records: %d kept (%v), want 3", len(got), err)
	}
}
