package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// migrations are the schema changes, oldest first: migrations[i] takes
// the schema from version i to version i+1. Released entries are never
// edited; a change is a new entry.
var migrations = [...][]string{
	// 1: the manuals table. name's BINARY collation orders by UTF-8 bytes,
	// as the Store contract's List order requires. Times are Unix
	// nanoseconds, NULL for the zero time; manual is the JSON encoding of
	// the utcp.Manual, NULL when never discovered; updated_at is when the
	// row was last written.
	{`CREATE TABLE manuals (
		name          TEXT PRIMARY KEY,
		template      BLOB NOT NULL,
		manual        BLOB,
		source        TEXT NOT NULL,
		registered_at INTEGER,
		refreshed_at  INTEGER,
		updated_at    INTEGER
	)`},
	// 2: the reviews table (guard/review.Store). data is the JSON encoding
	// of the review, the source of truth; status and the times are copied
	// out of it for the indexes and the compare-and-swap. Times are Unix
	// nanoseconds; finished_at is the creation time until the review
	// reaches a final status.
	{`CREATE TABLE reviews (
		id          TEXT PRIMARY KEY,
		status      TEXT NOT NULL,
		created_at  INTEGER NOT NULL,
		finished_at INTEGER NOT NULL,
		data        BLOB NOT NULL
	)`,
		`CREATE INDEX reviews_status ON reviews (status, created_at, id)`,
		`CREATE INDEX reviews_finished ON reviews (finished_at)`},
	// 3: the audit log (gateway/audit.Store), one row per call. data is
	// the JSON encoding of the record; the filtered columns are copied
	// out of it. time is the call's start in Unix nanoseconds.
	{`CREATE TABLE audit (
		id        INTEGER PRIMARY KEY AUTOINCREMENT,
		time      INTEGER NOT NULL,
		tool      TEXT NOT NULL,
		qualified TEXT NOT NULL,
		decision  TEXT NOT NULL,
		outcome   TEXT NOT NULL,
		data      BLOB NOT NULL
	)`,
		`CREATE INDEX audit_time ON audit (time)`,
		`CREATE INDEX audit_tool ON audit (tool, id)`,
		`CREATE INDEX audit_qualified ON audit (qualified, id)`},
	// 4: pinned tool definitions and their changes (registry.PinStore).
	// data is the JSON encoding of the registry.Pin / registry.PinChange,
	// the source of truth; manual, status and created_at (Unix
	// nanoseconds) are copied out for the list and the compare-and-swap.
	{`CREATE TABLE pins (
		manual     TEXT PRIMARY KEY,
		data       BLOB NOT NULL,
		updated_at INTEGER NOT NULL
	)`,
		`CREATE TABLE pin_changes (
		id         TEXT PRIMARY KEY,
		manual     TEXT NOT NULL,
		status     TEXT NOT NULL,
		created_at INTEGER NOT NULL,
		data       BLOB NOT NULL
	)`,
		`CREATE INDEX pin_changes_manual ON pin_changes (manual, created_at)`},
	// 5: the toolsets created through the admin API
	// (gateway.ToolsetStore). spec is the toolset's JSON; updated_at is
	// when the row was last written, in Unix nanoseconds.
	{`CREATE TABLE toolsets (
		name       TEXT PRIMARY KEY,
		spec       BLOB NOT NULL,
		updated_at INTEGER NOT NULL
	)`},
	// 6: audit_tool keeps only the records whose requested name is not
	// their qualified name (a call by an unqualified or unknown name);
	// audit_qualified finds the others, and Query asks each index for its
	// part. A full audit_tool repeated audit_qualified for most calls, and
	// the two indexes' inserts, spread over as many places as there are
	// tools, were a third of the cost of appending a record.
	{`DROP INDEX audit_tool`,
		`CREATE INDEX audit_tool ON audit (tool, id) WHERE tool <> qualified`},
}

// SchemaVersion is the schema version this package writes: the number of
// migrations it knows.
const SchemaVersion = 6

// Both differences must be non-negative: SchemaVersion == len(migrations).
const _ = uint(SchemaVersion-len(migrations)) + uint(len(migrations)-SchemaVersion)

// ErrSchemaTooNew is the error, wrapped, that Open returns for a database
// whose schema version is newer than SchemaVersion: it was written by a
// newer utcpd, and this one refuses to touch it rather than misread it.
var ErrSchemaTooNew = errors.New("database schema is newer than this utcpd supports")

// migrate brings the schema of the database behind db (a single
// connection whose transactions begin IMMEDIATE, so concurrent openers
// serialise) to SchemaVersion, in one transaction.
func migrate(ctx context.Context, db *sql.DB, path string) (err error) {
	fail := func(err error) error { return fmt.Errorf("sqlite: migrating %s: %w", path, err) }
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fail(err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		applied_at INTEGER NOT NULL
	)`); err != nil {
		return fail(err)
	}
	var version int
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&version); err != nil {
		return fail(err)
	}
	if version > SchemaVersion {
		return fmt.Errorf("sqlite: %s: %w: it is at schema version %d, this utcpd knows versions up to %d; run a newer utcpd or use another data directory",
			path, ErrSchemaTooNew, version, SchemaVersion)
	}
	for v := version; v < SchemaVersion; v++ {
		for _, stmt := range migrations[v] {
			if _, err := tx.ExecContext(ctx, stmt); err != nil {
				return fail(fmt.Errorf("migration %d: %w", v+1, err))
			}
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`,
			v+1, time.Now().UnixNano()); err != nil {
			return fail(fmt.Errorf("migration %d: %w", v+1, err))
		}
	}
	if err := tx.Commit(); err != nil {
		return fail(err)
	}
	return nil
}
