package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/utcpd/utcpd/daemon"
	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/gateway/audit"
	"github.com/utcpd/utcpd/guard"
	_ "github.com/utcpd/utcpd/guard/all" // every guard kind: policy, holguard, webhook
	"github.com/utcpd/utcpd/manuals"
	"github.com/utcpd/utcpd/store/postgres"
	"github.com/utcpd/utcpd/store/sqlite"
	"github.com/utcpd/utcpd/utcp"
)

// applyGuardSetting reads one guard key of the gateway section into s. It
// returns a problem message, "" when the value is good. The guard entries
// themselves are checked when the chain is built (daemon.LoadGuards).
func applyGuardSetting(s *settings, key string, v json.RawMessage) string {
	switch key {
	case "guards":
		var entries []json.RawMessage
		if json.Unmarshal(v, &entries) != nil {
			return `must be an array of guard objects, each with a "kind"`
		}
		s.Guards = bytes.Clone(v)
	case "bypass_tools":
		var tools []string
		if json.Unmarshal(v, &tools) != nil {
			return `must be an array of exact tool names, such as ["health.ping"]`
		}
		s.BypassTools = nonEmpty(tools)
	case "guard_timeout", "review_timeout", "audit_retention":
		d, err := jsonDuration(v)
		if err != nil {
			return err.Error()
		}
		switch key {
		case "guard_timeout":
			s.GuardTimeout = d
		case "review_timeout":
			s.ReviewTimeout = d
		default:
			s.AuditRetention = d
		}
	}
	return ""
}

// cliChain builds the guard chain of an in-process command from the
// configuration's gateway section: the same guards and bypass_tools as
// the daemon, but no approver (the review queue lives in the daemon), so
// a review verdict denies.
func cliChain(cfg *manuals.Config, vars *manuals.Resolver, log *slog.Logger) (guard.Guard, error) {
	var s settings
	if cfg != nil && len(cfg.Gateway) > 0 {
		// Only the guard keys: the rest of the section is the daemon's.
		var section map[string]json.RawMessage
		_ = json.Unmarshal(cfg.Gateway, &section)
		for _, key := range daemon.ReloadableKeys {
			if v, ok := section[key]; ok && string(bytes.TrimSpace(v)) != "null" {
				if msg := applyGuardSetting(&s, key, v); msg != "" {
					return nil, fmt.Errorf("%s: gateway.%s: %s", cfg.Path, key, msg)
				}
			}
		}
	}
	named, err := daemon.LoadGuards(guard.Default, s.Guards, vars, log)
	if err != nil {
		return nil, daemon.GuardProblem(cfg.Path, err)
	}
	if len(named) == 0 {
		return guard.NewChain(nil, guard.WithBypass(s.BypassTools...)), nil
	}
	return daemon.NewChain(named, &s, nil, 0), nil
}

// cliAuditor returns an auditor that appends an in-process command's
// calls to the audit log of the daemon's data directory (the
// configuration's data_dir, else $UTCPD_DATA_DIR, else the default),
// when a store exists there, or to the replicas' shared log when a
// PostgreSQL store is configured (gateway.store, $UTCPD_STORE); else nil.
// done closes the store.
func cliAuditor(ctx context.Context, cfg *manuals.Config, warn io.Writer) (gateway.Auditor, func()) {
	s := defaultSettings()
	if cfg != nil && len(cfg.Gateway) > 0 {
		applyGatewaySection(&s, cfg.Gateway, cfg.Path, nil, cfg.Dir, false)
	}
	if v := os.Getenv(envDataDir); v != "" {
		s.DataDir = v
	}
	if v := os.Getenv(envStore); v != "" {
		s.Store = v
	}
	if isPostgresDSN(s.Store) { // the replicas' shared audit log
		octx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		st, err := postgres.Open(octx, s.Store, postgres.Options{MaxConns: 1, ResyncInterval: -1})
		if err != nil {
			fmt.Fprintf(warn, "warning: the call is not audited: %v\n", err)
			return nil, func() {}
		}
		return &syncAuditor{store: st.Audit(), warn: warn}, func() { _ = st.Close() }
	}
	if s.DataDir == "" {
		return nil, func() {}
	}
	if _, err := os.Stat(filepath.Join(s.DataDir, sqlite.FileName)); err != nil {
		return nil, func() {}
	}
	st, err := sqlite.Open(ctx, s.DataDir)
	if err != nil {
		fmt.Fprintf(warn, "warning: the call is not audited: %v\n", err)
		return nil, func() {}
	}
	return &syncAuditor{store: st.Audit(), warn: warn}, func() { _ = st.Close() }
}

// syncAuditor appends each record at once: an in-process command makes
// one call.
type syncAuditor struct {
	store audit.Store
	warn  io.Writer
}

func (a *syncAuditor) Append(r audit.Record) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.store.Append(ctx, []audit.Record{r}); err != nil {
		fmt.Fprintf(a.warn, "warning: the call was not audited: %v\n", err)
	}
}

// validateGuards builds the guard chain of a configuration for utcpd
// config validate, as the daemon would at start, and returns the problem
// of the first entry that does not load (nil when the chain loads, or the
// guards key itself is malformed: applyGatewaySection reported that).
func validateGuards(cfg *manuals.Config, s *settings, file string, data []byte) *manuals.Problem {
	if len(s.Guards) == 0 {
		return nil
	}
	vars, err := manuals.NewResolver(cfg, manuals.ResolverOptions{})
	if err == nil {
		_, err = daemon.LoadGuards(guard.Default, s.Guards, vars, slog.New(slog.DiscardHandler))
	}
	if err == nil {
		return nil
	}
	path, msg := "gateway.guards", err.Error()
	var ge *daemon.GuardEntryError
	if errors.As(err, &ge) {
		path, msg = fmt.Sprintf("gateway.guards[%d]", ge.Index), ge.Message()
		if ge.Kind != "" {
			msg = fmt.Sprintf("kind %q: %s", ge.Kind, msg)
		}
	}
	return &manuals.Problem{Severity: manuals.SeverityError, Code: utcp.CodeInvalidConfig, File: file,
		Line: gatewayKeyLines(file, data)["guards"], Path: path, Message: msg}
}
