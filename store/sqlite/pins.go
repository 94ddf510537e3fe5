package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"github.com/utcpd/utcpd/registry"
	"github.com/utcpd/utcpd/utcp"
)

// The Store is a registry.PinStore too, in its pins and pin_changes
// tables (migration 4).
var _ registry.PinStore = (*Store)(nil)

func encodeJSON(what string, v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, utcp.Errorf(utcp.CodeInvalidRequest, "sqlite: encoding %s: %w", what, err)
	}
	return b, nil
}

// GetPin returns the pin of manual.
func (s *Store) GetPin(ctx context.Context, manual string) (*registry.Pin, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	defer s.use()()
	var data []byte
	err := s.reader.QueryRowContext(ctx, `SELECT data FROM pins WHERE manual = ?`, manual).Scan(&data)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, registry.PinNotFound(manual)
	}
	if err != nil {
		return nil, s.wrap(ctx, "get pin of "+manual, err)
	}
	p := new(registry.Pin)
	if err := json.Unmarshal(data, p); err != nil {
		return nil, utcp.Errorf(utcp.CodeInternal, "sqlite: pin of %q: decoding: %w", manual, err)
	}
	return p, nil
}

// PutPin creates or replaces the pin p.Manual.
func (s *Store) PutPin(ctx context.Context, p *registry.Pin) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	defer s.use()()
	if err := registry.CheckPin(p); err != nil {
		return err
	}
	data, err := encodeJSON("pin", p)
	if err != nil {
		return err
	}
	if _, err := s.wdb().ExecContext(ctx, upsertPin, p.Manual, data, time.Now().UnixNano()); err != nil {
		return s.wwrap(ctx, "put pin of "+p.Manual, err)
	}
	s.wrote()
	return nil
}

const upsertPin = `INSERT INTO pins (manual, data, updated_at) VALUES (?, ?, ?)
	ON CONFLICT (manual) DO UPDATE SET data = excluded.data, updated_at = excluded.updated_at`

// DeletePin removes the pin of manual.
func (s *Store) DeletePin(ctx context.Context, manual string) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	defer s.use()()
	if _, err := s.wdb().ExecContext(ctx, `DELETE FROM pins WHERE manual = ?`, manual); err != nil {
		return s.wwrap(ctx, "delete pin of "+manual, err)
	}
	s.wrote()
	return nil
}

// AddChange stores the new change c.
func (s *Store) AddChange(ctx context.Context, c *registry.PinChange) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	defer s.use()()
	if err := registry.CheckChange(c); err != nil {
		return err
	}
	data, err := encodeJSON("pin change", c)
	if err != nil {
		return err
	}
	res, err := s.wdb().ExecContext(ctx, `INSERT INTO pin_changes (id, manual, status, created_at, data) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (id) DO NOTHING`, c.ID, c.Manual, string(c.Status), c.Created.UnixNano(), data)
	if err != nil {
		return s.wwrap(ctx, "add pin change "+c.ID, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return s.wrap(ctx, "add pin change "+c.ID, err)
	} else if n == 0 {
		return registry.ChangeConflict(c.ID, "", "already stored")
	}
	s.wrote()
	return nil
}

// GetChange returns the change id.
func (s *Store) GetChange(ctx context.Context, id string) (*registry.PinChange, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	defer s.use()()
	var data []byte
	err := s.reader.QueryRowContext(ctx, `SELECT data FROM pin_changes WHERE id = ?`, id).Scan(&data)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, registry.ChangeNotFound(id)
	}
	if err != nil {
		return nil, s.wrap(ctx, "get pin change "+id, err)
	}
	return decodeChange(id, data)
}

func decodeChange(id string, data []byte) (*registry.PinChange, error) {
	c := new(registry.PinChange)
	if err := json.Unmarshal(data, c); err != nil {
		return nil, utcp.Errorf(utcp.CodeInternal, "sqlite: pin change %s: decoding: %w", id, err)
	}
	return c, nil
}

// UpdateChange replaces the change c.ID when its status is from, and puts
// pin (when not nil), in one transaction.
func (s *Store) UpdateChange(ctx context.Context, c *registry.PinChange, from registry.PinStatus, pin *registry.Pin) (err error) {
	if err := s.check(ctx); err != nil {
		return err
	}
	defer s.use()()
	if err := registry.CheckChange(c); err != nil {
		return err
	}
	data, err := encodeJSON("pin change", c)
	if err != nil {
		return err
	}
	var pinData []byte
	if pin != nil {
		if err := registry.CheckPin(pin); err != nil {
			return err
		}
		if pinData, err = encodeJSON("pin", pin); err != nil {
			return err
		}
	}
	op := "update pin change " + c.ID
	tx, err := s.wdb().BeginTx(ctx, nil)
	if err != nil {
		return s.wwrap(ctx, op, err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	var cur string
	switch err = tx.QueryRowContext(ctx, `SELECT status FROM pin_changes WHERE id = ?`, c.ID).Scan(&cur); {
	case errors.Is(err, sql.ErrNoRows):
		return registry.ChangeNotFound(c.ID)
	case err != nil:
		return s.wwrap(ctx, op, err)
	}
	if registry.PinStatus(cur) != from {
		err = registry.ChangeConflict(c.ID, from, registry.PinStatus(cur))
		return err
	}
	if _, err = tx.ExecContext(ctx, `UPDATE pin_changes SET status = ?, data = ? WHERE id = ?`, string(c.Status), data, c.ID); err != nil {
		return s.wwrap(ctx, op, err)
	}
	if pin != nil {
		if _, err = tx.ExecContext(ctx, upsertPin, pin.Manual, pinData, time.Now().UnixNano()); err != nil {
			return s.wwrap(ctx, op, err)
		}
	}
	if err = tx.Commit(); err != nil {
		return s.wwrap(ctx, op, err)
	}
	s.wrote()
	return nil
}

// ListChanges returns the changes of manual ("" every manual), newest
// first.
func (s *Store) ListChanges(ctx context.Context, manual string, limit int) ([]*registry.PinChange, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	defer s.use()()
	if limit <= 0 {
		limit = registry.DefaultChangeLimit
	}
	q, args := `SELECT id, data FROM pin_changes`, []any{}
	if manual != "" {
		q += ` WHERE manual = ?`
		args = append(args, manual)
	}
	args = append(args, limit)
	rows, err := s.reader.QueryContext(ctx, q+` ORDER BY created_at DESC, rowid DESC LIMIT ?`, args...)
	if err != nil {
		return nil, s.wrap(ctx, "list pin changes", err)
	}
	defer rows.Close()
	out := []*registry.PinChange{}
	for rows.Next() {
		var id string
		var data []byte
		if err := rows.Scan(&id, &data); err != nil {
			return nil, s.wrap(ctx, "list pin changes", err)
		}
		c, err := decodeChange(id, data)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap(ctx, "list pin changes", err)
	}
	return out, nil
}
