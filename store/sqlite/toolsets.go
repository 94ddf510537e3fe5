package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/utcpd/utcpd/utcp"
)

// The toolsets table (migration 5) holds the toolsets created through the
// admin API (gateway.ToolsetStore): name → the toolset's JSON, validated
// by the gateway before it is put.

// ListToolsets returns every stored toolset, name → spec JSON.
func (s *Store) ListToolsets(ctx context.Context) (map[string]json.RawMessage, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	defer s.use()()
	rows, err := s.reader.QueryContext(ctx, `SELECT name, spec FROM toolsets ORDER BY name`)
	if err != nil {
		return nil, s.wrap(ctx, "list toolsets", err)
	}
	defer rows.Close()
	out := map[string]json.RawMessage{}
	for rows.Next() {
		var name string
		var spec []byte
		if err := rows.Scan(&name, &spec); err != nil {
			return nil, s.wrap(ctx, "list toolsets", err)
		}
		out[name] = json.RawMessage(spec)
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap(ctx, "list toolsets", err)
	}
	return out, nil
}

// PutToolset creates or replaces the toolset called name.
func (s *Store) PutToolset(ctx context.Context, name string, spec json.RawMessage) error {
	if name == "" || !json.Valid(spec) {
		return utcp.NewError(utcp.CodeInvalidRequest, "sqlite: toolset %q: no name, or its spec is not JSON", name)
	}
	if err := s.check(ctx); err != nil {
		return err
	}
	defer s.use()()
	if _, err := s.wdb().ExecContext(ctx, `INSERT INTO toolsets (name, spec, updated_at) VALUES (?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET spec = excluded.spec, updated_at = excluded.updated_at`,
		name, []byte(spec), time.Now().UnixNano()); err != nil {
		return s.wwrap(ctx, fmt.Sprintf("put toolset %q", name), err)
	}
	s.wrote()
	return nil
}

// DeleteToolset removes the toolset called name: not_found when there is
// none.
func (s *Store) DeleteToolset(ctx context.Context, name string) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	defer s.use()()
	res, err := s.wdb().ExecContext(ctx, `DELETE FROM toolsets WHERE name = ?`, name)
	if err != nil {
		return s.wwrap(ctx, fmt.Sprintf("delete toolset %q", name), err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return utcp.NewError(utcp.CodeNotFound, "toolset %q not found in store", name).WithDetail("toolset", name)
	}
	s.wrote()
	return nil
}

// WatchToolsets never signals (one process owns a SQLite store); the
// channel is closed when ctx ends or the Store is closed.
func (s *Store) WatchToolsets(ctx context.Context) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		select {
		case <-ctx.Done():
		case <-s.done:
		}
	}()
	return ch
}
