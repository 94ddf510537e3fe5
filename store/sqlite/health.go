package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/utcpd/utcpd/utcp"
)

// writeFailure is why the store refuses writes, and since when.
type writeFailure struct {
	err   error
	since time.Time
}

// Health reports whether the store takes writes: nil, or an unavailable
// *utcp.Error naming the database, since when writes fail and the last
// cause (a read-only file or directory, a full disk, an I/O error). Reads
// keep working meanwhile. A store whose write fails refuses writes until
// one succeeds: it tries again every probe interval (WithProbeInterval)
// with a fresh writer connection and a one-page write, so that restoring
// the file's permissions or freeing disk space is noticed without a
// restart. Health is cheap: /readyz calls it.
func (s *Store) Health() error {
	f := s.unwritable.Load()
	if f == nil {
		return nil
	}
	return utcp.Errorf(utcp.CodeUnavailable, "sqlite: %s refuses writes since %s: %w", s.path, f.since.UTC().Format(time.RFC3339), f.err)
}

// wwrap is wrap for a write: a failure that is not the caller's (context)
// or the store's closing marks the store as refusing writes.
func (s *Store) wwrap(ctx context.Context, op string, err error) error {
	out := s.wrap(ctx, op, err)
	if ctx.Err() == nil && !s.closed.Load() {
		s.refused(fmt.Errorf("%s: %w", op, err))
	}
	return out
}

// refused records a failed write and starts the probe.
func (s *Store) refused(err error) {
	f := &writeFailure{err: err, since: time.Now()}
	if prev := s.unwritable.Load(); prev != nil {
		f.since = prev.since
	} else {
		s.cfg.log.Warn("the store refuses writes; trying again", "path", s.path, "every", s.cfg.probeInterval, "err", err)
	}
	s.unwritable.Store(f)
	s.pmu.Lock()
	defer s.pmu.Unlock()
	if !s.closed.Load() && s.probing.CompareAndSwap(false, true) {
		s.probes.Add(1)
		go s.probe()
	}
}

// wrote records a successful write.
func (s *Store) wrote() {
	if s.unwritable.Load() != nil && s.unwritable.Swap(nil) != nil {
		s.cfg.log.Info("the store takes writes again", "path", s.path)
	}
}

// probe tries a write every probe interval until the store takes writes
// or closes.
func (s *Store) probe() {
	defer s.probes.Done()
	t := time.NewTicker(s.cfg.probeInterval)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
		}
		if f := s.unwritable.Load(); f != nil {
			if err := s.tryWrite(); err != nil {
				s.unwritable.CompareAndSwap(f, &writeFailure{err: err, since: f.since})
				continue
			}
			s.wrote()
		}
		// Writable: stop, unless a write failed again meanwhile (then
		// refused either started another probe or leaves it to this one).
		s.probing.Store(false)
		if s.unwritable.Load() == nil || !s.probing.CompareAndSwap(false, true) {
			return
		}
	}
}

// tryWrite opens a fresh writer connection (a connection opened while the
// file was read-only stays read-only), makes a one-page write with it
// and, when that works, makes it the store's writer. SQLite shares a
// database's shared-memory index between all the connections of a
// process, and keeps it read-only when the first of them could only map
// it read-only: when the write still fails so although the files are
// writable again, every connection is closed and opened anew.
func (s *Store) tryWrite() error {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.busyTimeout+5*time.Second)
	defer cancel()
	db, err := openWriter(s.wdsn)
	if err != nil {
		return fmt.Errorf("reopening: %w", err)
	}
	err = writeProbe(ctx, db)
	if err == nil {
		s.poolMu.Lock()
		defer s.poolMu.Unlock()
		if s.closed.Load() {
			_ = db.Close()
			return errClosed()
		}
		old := s.writer.Swap(db)
		// Readers opened while the file was read-only may not see the
		// new writes: let the idle ones go.
		s.reader.SetMaxIdleConns(0)
		s.reader.SetMaxIdleConns(s.cfg.maxReaders)
		return old.Close()
	}
	_ = db.Close()
	if !readOnlyError(err) || !s.filesWritable() {
		return err
	}
	return s.reopenAll(ctx)
}

// filesWritable reports whether the database file and its -wal and -shm
// files (those that exist) can be opened for writing.
func (s *Store) filesWritable() bool {
	for _, p := range []string{s.path, s.path + "-wal", s.path + "-shm"} {
		f, err := os.OpenFile(p, os.O_RDWR, 0)
		if errors.Is(err, fs.ErrNotExist) && p != s.path {
			continue
		}
		if err != nil {
			return false
		}
		_ = f.Close()
	}
	return true
}

// reopenAll closes every connection, once the operations under way have
// ended, and opens them again; it returns nil when the new writer can
// write. Operations wait meanwhile (poolMu).
func (s *Store) reopenAll(ctx context.Context) error {
	s.poolMu.Lock()
	defer s.poolMu.Unlock()
	if s.closed.Load() {
		return errClosed()
	}
	_ = s.reader.Close()
	_ = s.wdb().Close()
	w, werr := openWriter(s.wdsn)
	r, rerr := openReader(s.rdsn, s.cfg.maxReaders)
	if werr != nil || rerr != nil {
		// sql.Open only parses its arguments: this does not happen with
		// the DSNs Open built.
		panic(fmt.Sprintf("sqlite: reopening %s: %v %v", s.path, werr, rerr))
	}
	s.writer.Store(w)
	s.reader = r
	if err := writeProbe(ctx, w); err != nil {
		return fmt.Errorf("after reopening every connection: %w", err)
	}
	return nil
}

// writeProbe writes the database header's user_version (unused by
// utcpd) back unchanged: a one-page write transaction.
func writeProbe(ctx context.Context, db *sql.DB) error {
	var v int64
	if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	if _, err := db.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", v)); err != nil {
		return fmt.Errorf("probe write: %w", err)
	}
	return nil
}
