package main

import (
	"context"
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
)

// cliChain builds the guard chain of an in-process command from the
// configuration's gateway section: the same guards and bypass_tools as
// the daemon, but no approver (the review queue lives in the daemon), so
// a review verdict denies.
func cliChain(cfg *manuals.Config, vars *manuals.Resolver, log *slog.Logger) (guard.Guard, error) {
	// Only the guard keys: the rest of the section is the daemon's.
	var s settings
	if err := daemon.ApplyReloadable(&s, cfg); err != nil {
		return nil, err
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
	daemon.ApplyGateway(&s, cfg, nil, false)
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
