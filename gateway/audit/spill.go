package audit

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// maxSpillLine caps one line of a spill file.
const maxSpillLine = 1 << 20

// loadSpill reads the spill file's records into held, ahead of every
// record appended later. Called by newWriter before run starts.
func (w *Writer) loadSpill() {
	path := w.opts.SpillPath
	if path == "" {
		return
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err != nil {
		w.log.Error("reading the audit spill file; its records stay in it", "file", path, "err", err)
		return
	}
	defer f.Close()
	limit := w.opts.MaxHeld + w.opts.QueueSize
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), maxSpillLine)
	bad, over := 0, 0
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 {
			continue
		}
		var r Record
		if err := json.Unmarshal(line, &r); err != nil || Check(&r) != nil {
			bad++
			continue
		}
		if w.heldLen() >= limit {
			over++
			continue
		}
		r.ID = 0
		w.hold(r)
	}
	if err := sc.Err(); err != nil {
		w.log.Error("reading the audit spill file; the records after the error are lost", "file", path, "records", w.heldLen(), "err", err)
	}
	if lost := bad + over; lost > 0 {
		w.failed.Add(uint64(lost))
		w.log.Error("audit spill file: records that could not be read or were over the limit are lost",
			"file", path, "unreadable", bad, "over_limit", over, "limit", limit)
	}
	if w.heldLen() == 0 {
		w.removeSpill()
		return
	}
	w.replay = w.taken
	w.log.Info("audit records from the spill file are being written", "file", path, "records", w.heldLen())
}

// replayed removes the spill file once its records are all written (or
// lost).
func (w *Writer) replayed() {
	if w.replay == 0 || w.resolved < w.replay {
		return
	}
	w.replay = 0
	w.removeSpill()
	w.log.Info("audit records from the spill file written; file removed", "file", w.opts.SpillPath)
}

func (w *Writer) removeSpill() {
	if err := os.Remove(w.opts.SpillPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
		w.log.Error("removing the audit spill file", "file", w.opts.SpillPath, "err", err)
	}
}

// writeSpill replaces the spill file with recs, durably: a temporary file
// beside it, synced, renamed over it, and the directory synced.
func (w *Writer) writeSpill(recs []Record) (err error) {
	path := w.opts.SpillPath
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("audit spill file: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if err := tmp.Chmod(0o600); err != nil {
		return fmt.Errorf("audit spill file: %w", err)
	}
	bw := bufio.NewWriter(tmp)
	enc := json.NewEncoder(bw)
	for i := range recs {
		if err := enc.Encode(&recs[i]); err != nil {
			return fmt.Errorf("audit spill file: %w", err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("audit spill file: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("audit spill file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("audit spill file: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("audit spill file: %w", err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}
