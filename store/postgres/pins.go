package postgres

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/utcpd/utcpd/registry"
	"github.com/utcpd/utcpd/utcp"
)

// The Store is a registry.PinStore too, in its pins and pin_changes
// tables (migration 4), shared by every replica: a change raised on one
// can be approved through any other, once (a compare-and-swap on the
// status, with the new pin in the same transaction).
var _ registry.PinStore = (*Store)(nil)

func encodeJSON(what string, v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, utcp.Errorf(utcp.CodeInvalidRequest, "postgres: encoding %s: %w", what, err)
	}
	return b, nil
}

const upsertPin = `INSERT INTO pins (manual, data, updated_at) VALUES ($1, $2, now())
	ON CONFLICT (manual) DO UPDATE SET data = excluded.data, updated_at = excluded.updated_at`

// GetPin returns the pin of manual.
func (s *Store) GetPin(ctx context.Context, manual string) (*registry.Pin, error) {
	octx, cancel, err := s.op(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	var data []byte
	err = s.pool.QueryRow(octx, `SELECT data FROM pins WHERE manual = $1`, manual).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, registry.PinNotFound(manual)
	}
	if err != nil {
		return nil, s.wrap(ctx, "get pin of "+manual, err)
	}
	p := new(registry.Pin)
	if err := json.Unmarshal(data, p); err != nil {
		return nil, utcp.Errorf(utcp.CodeInternal, "postgres: pin of %q: decoding: %w", manual, err)
	}
	return p, nil
}

// PutPin creates or replaces the pin p.Manual.
func (s *Store) PutPin(ctx context.Context, p *registry.Pin) error {
	if err := registry.CheckPin(p); err != nil {
		return err
	}
	octx, cancel, err := s.op(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	data, err := encodeJSON("pin", p)
	if err != nil {
		return err
	}
	if _, err := s.pool.Exec(octx, upsertPin, p.Manual, data); err != nil {
		return s.wrap(ctx, "put pin of "+p.Manual, err)
	}
	return nil
}

// DeletePin removes the pin of manual.
func (s *Store) DeletePin(ctx context.Context, manual string) error {
	octx, cancel, err := s.op(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	if _, err := s.pool.Exec(octx, `DELETE FROM pins WHERE manual = $1`, manual); err != nil {
		return s.wrap(ctx, "delete pin of "+manual, err)
	}
	return nil
}

// AddChange stores the new change c.
func (s *Store) AddChange(ctx context.Context, c *registry.PinChange) error {
	if err := registry.CheckChange(c); err != nil {
		return err
	}
	octx, cancel, err := s.op(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	data, err := encodeJSON("pin change", c)
	if err != nil {
		return err
	}
	tag, err := s.pool.Exec(octx, `INSERT INTO pin_changes (id, manual, status, created_at, data) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (id) DO NOTHING`, c.ID, c.Manual, string(c.Status), c.Created.UnixNano(), data)
	if err != nil {
		return s.wrap(ctx, "add pin change "+c.ID, err)
	}
	if tag.RowsAffected() == 0 {
		return registry.ChangeConflict(c.ID, "", "already stored")
	}
	return nil
}

// GetChange returns the change id.
func (s *Store) GetChange(ctx context.Context, id string) (*registry.PinChange, error) {
	octx, cancel, err := s.op(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	var data []byte
	err = s.pool.QueryRow(octx, `SELECT data FROM pin_changes WHERE id = $1`, id).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
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
		return nil, utcp.Errorf(utcp.CodeInternal, "postgres: pin change %s: decoding: %w", id, err)
	}
	return c, nil
}

// UpdateChange replaces the change c.ID when its status is from, and puts
// pin (when not nil), in one transaction.
func (s *Store) UpdateChange(ctx context.Context, c *registry.PinChange, from registry.PinStatus, pin *registry.Pin) (err error) {
	if err := registry.CheckChange(c); err != nil {
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
	data, err := encodeJSON("pin change", c)
	if err != nil {
		return err
	}
	octx, cancel, err := s.op(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	op := "update pin change " + c.ID
	tx, err := s.pool.Begin(octx)
	if err != nil {
		return s.wrap(ctx, op, err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback(context.WithoutCancel(octx))
		}
	}()
	var cur string
	switch err = tx.QueryRow(octx, `SELECT status FROM pin_changes WHERE id = $1 FOR UPDATE`, c.ID).Scan(&cur); {
	case errors.Is(err, pgx.ErrNoRows):
		return registry.ChangeNotFound(c.ID)
	case err != nil:
		return s.wrap(ctx, op, err)
	}
	if registry.PinStatus(cur) != from {
		err = registry.ChangeConflict(c.ID, from, registry.PinStatus(cur))
		return err
	}
	if _, err = tx.Exec(octx, `UPDATE pin_changes SET status = $1, data = $2 WHERE id = $3`, string(c.Status), data, c.ID); err != nil {
		return s.wrap(ctx, op, err)
	}
	if pin != nil {
		if _, err = tx.Exec(octx, upsertPin, pin.Manual, pinData); err != nil {
			return s.wrap(ctx, op, err)
		}
	}
	if err = tx.Commit(octx); err != nil {
		return s.wrap(ctx, op, err)
	}
	return nil
}

// ListChanges returns the changes of manual ("" every manual), newest
// first.
func (s *Store) ListChanges(ctx context.Context, manual string, limit int) ([]*registry.PinChange, error) {
	octx, cancel, err := s.op(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	if limit <= 0 {
		limit = registry.DefaultChangeLimit
	}
	rows, err := s.pool.Query(octx, `SELECT id, data FROM pin_changes WHERE $1 = '' OR manual = $1
		ORDER BY created_at DESC, seq DESC LIMIT $2`, manual, limit)
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
