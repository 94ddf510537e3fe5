package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/utcpd/utcpd/utcp"
)

// channelToolsets is notified (payload: the writing Store's instance ID)
// on every write to the toolsets table (migration 5), the toolsets
// created through the admin API (gateway.ToolsetStore).
const channelToolsets = "utcpd_toolsets"

// ListToolsets returns every stored toolset, name → spec JSON.
func (s *Store) ListToolsets(ctx context.Context) (map[string]json.RawMessage, error) {
	octx, cancel, err := s.op(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	rows, err := s.pool.Query(octx, `SELECT name, spec FROM toolsets ORDER BY name`)
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

// PutToolset creates or replaces the toolset called name and notifies
// the other replicas, committed when it returns nil.
func (s *Store) PutToolset(ctx context.Context, name string, spec json.RawMessage) error {
	if name == "" || !json.Valid(spec) {
		return utcp.NewError(utcp.CodeInvalidRequest, "postgres: toolset %q: no name, or its spec is not JSON", name)
	}
	octx, cancel, err := s.op(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	var ignored string
	if err := s.pool.QueryRow(octx, `WITH up AS (INSERT INTO toolsets (name, spec, updated_at) VALUES ($1, $2, now())
		ON CONFLICT (name) DO UPDATE SET spec = excluded.spec, updated_at = now() RETURNING name)
		SELECT pg_notify('`+channelToolsets+`', $3::text) FROM up`, name, []byte(spec), s.instance).Scan(&ignored); err != nil {
		return s.wrap(ctx, fmt.Sprintf("put toolset %q", name), err)
	}
	return nil
}

// DeleteToolset removes the toolset called name and notifies the other
// replicas: not_found when there is none.
func (s *Store) DeleteToolset(ctx context.Context, name string) error {
	octx, cancel, err := s.op(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	var ignored string
	err = s.pool.QueryRow(octx, `WITH del AS (DELETE FROM toolsets WHERE name = $1 RETURNING name)
		SELECT pg_notify('`+channelToolsets+`', $2::text) FROM del`, name, s.instance).Scan(&ignored)
	if errors.Is(err, pgx.ErrNoRows) {
		return utcp.NewError(utcp.CodeNotFound, "toolset %q not found in store", name).WithDetail("toolset", name)
	}
	if err != nil {
		return s.wrap(ctx, fmt.Sprintf("delete toolset %q", name), err)
	}
	return nil
}

// WatchToolsets signals after another replica wrote a toolset, and after
// every resync (so a notification lost while the listener reconnected is
// made up for); signals not yet received merge into one. The channel is
// closed when ctx ends or the Store is closed.
func (s *Store) WatchToolsets(ctx context.Context) <-chan struct{} {
	// Every notification adds the one key "toolsets", so the items
	// pending merge into one signal; the receiver reads every toolset again.
	return watchSet(s, ctx, s.toolsetWs, func(item) (struct{}, bool) { return struct{}{}, true })
}

// reportToolsets signals every toolset watcher.
func (s *Store) reportToolsets() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for w := range s.toolsetWs {
		w.add("toolsets", "")
	}
}
