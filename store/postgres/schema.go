package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// migrations are the schema changes, oldest first: migrations[i] takes the
// schema from version i to version i+1. Released entries are never edited;
// a change is a new entry. They mirror store/sqlite's, in PostgreSQL
// types.
var migrations = [...][]string{
	// 1: the manuals table. name's "C" collation orders by bytes, as the
	// Store contract's List order requires. template and manual are the
	// bytes as given (bytea, not jsonb, which would reorder keys); times
	// are Unix nanoseconds, NULL for the zero time. revision comes from
	// manuals_revision on every write: replicas compare it to find the
	// changes they missed.
	{`CREATE SEQUENCE manuals_revision`,
		`CREATE TABLE manuals (
		name          text COLLATE "C" PRIMARY KEY,
		template      bytea NOT NULL,
		manual        bytea,
		source        text NOT NULL,
		registered_at bigint,
		refreshed_at  bigint,
		revision      bigint NOT NULL,
		updated_at    timestamptz NOT NULL DEFAULT now()
	)`},
	// 2: the reviews table (guard/review.Store), as in store/sqlite.
	{`CREATE TABLE reviews (
		id          text COLLATE "C" PRIMARY KEY,
		status      text NOT NULL,
		created_at  bigint NOT NULL,
		finished_at bigint NOT NULL,
		data        bytea NOT NULL
	)`,
		`CREATE INDEX reviews_status ON reviews (status, created_at, id)`,
		`CREATE INDEX reviews_finished ON reviews (finished_at)`},
	// 3: the audit log (gateway/audit.Store), one row per call, every
	// replica's in one table.
	{`CREATE TABLE audit (
		id        bigserial PRIMARY KEY,
		time      bigint NOT NULL,
		tool      text NOT NULL,
		qualified text NOT NULL,
		decision  text NOT NULL,
		outcome   text NOT NULL,
		data      bytea NOT NULL
	)`,
		`CREATE INDEX audit_time ON audit (time)`,
		`CREATE INDEX audit_tool ON audit (tool, id)`,
		`CREATE INDEX audit_qualified ON audit (qualified, id)`},
	// 4: pinned tool definitions and their changes (registry.PinStore),
	// as in store/sqlite; seq orders changes created at the same time.
	{`CREATE TABLE pins (
		manual     text COLLATE "C" PRIMARY KEY,
		data       bytea NOT NULL,
		updated_at timestamptz NOT NULL DEFAULT now()
	)`,
		`CREATE TABLE pin_changes (
		id         text COLLATE "C" PRIMARY KEY,
		seq        bigserial,
		manual     text COLLATE "C" NOT NULL,
		status     text NOT NULL,
		created_at bigint NOT NULL,
		data       bytea NOT NULL
	)`,
		`CREATE INDEX pin_changes_manual ON pin_changes (manual, created_at)`},
	// 5: the toolsets created through the admin API
	// (gateway.ToolsetStore), as in store/sqlite. Every write notifies
	// utcpd_toolsets.
	{`CREATE TABLE toolsets (
		name       text COLLATE "C" PRIMARY KEY,
		spec       bytea NOT NULL,
		updated_at timestamptz NOT NULL DEFAULT now()
	)`},
	// 6: the rate limit buckets replicas share (ratelimits.go): one row
	// per rule, its tokens as of updated_at; granted is the size of the
	// last lease, for the statement that takes it to return.
	{`CREATE TABLE rate_buckets (
		key        text COLLATE "C" PRIMARY KEY,
		tokens     double precision NOT NULL,
		granted    double precision NOT NULL,
		updated_at timestamptz NOT NULL
	)`},
}

// SchemaVersion is the schema version this package writes: the number of
// migrations it knows.
const SchemaVersion = 6

// Both differences must be non-negative: SchemaVersion == len(migrations).
const _ = uint(SchemaVersion-len(migrations)) + uint(len(migrations)-SchemaVersion)

// migrationLock is the key of the advisory lock that serialises the
// migrations of replicas starting together ("utcpd" in ASCII).
const migrationLock int64 = 0x7574637064

// ErrSchemaTooNew is the error, wrapped, for a database whose schema
// version is newer than SchemaVersion: a newer utcpd wrote it, and this one
// refuses to touch it rather than misread it.
var ErrSchemaTooNew = errors.New("database schema is newer than this utcpd supports")

// migrate brings the schema to SchemaVersion in one transaction, holding
// a transaction-scoped advisory lock so that replicas starting at once
// apply each migration exactly once. It reports the version found.
func migrate(ctx context.Context, conn interface {
	Begin(context.Context) (pgx.Tx, error)
}) (from int, err error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
	}()
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, migrationLock); err != nil {
		return 0, err
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    integer PRIMARY KEY,
		applied_at timestamptz NOT NULL DEFAULT now()
	)`); err != nil {
		return 0, err
	}
	if err := tx.QueryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&from); err != nil {
		return 0, err
	}
	if from > SchemaVersion {
		return from, fmt.Errorf("%w: it is at schema version %d, this utcpd knows versions up to %d; run a newer utcpd or use another database",
			ErrSchemaTooNew, from, SchemaVersion)
	}
	for v := from; v < SchemaVersion; v++ {
		for _, stmt := range migrations[v] {
			if _, err := tx.Exec(ctx, stmt); err != nil {
				return from, fmt.Errorf("migration %d: %w", v+1, err)
			}
		}
		if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version) VALUES ($1)`, v+1); err != nil {
			return from, fmt.Errorf("migration %d: %w", v+1, err)
		}
	}
	return from, tx.Commit(ctx)
}
