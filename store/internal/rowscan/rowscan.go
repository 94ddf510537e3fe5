// Package rowscan reads the rows the stores keep reviews and audit records
// in — a key and a JSON document — the same way for database/sql
// (store/sqlite) and pgx (store/postgres).
package rowscan

import (
	"encoding/json"

	"github.com/utcpd/utcpd/gateway/audit"
	"github.com/utcpd/utcpd/guard/review"
	"github.com/utcpd/utcpd/utcp"
)

// Rows is what database/sql's and pgx's result rows have in common.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// Collect reads every (key, data) row of rows in order and decodes it
// with decode. A Scan or Err failure goes through dbErr (the store's own
// error wrapping); decode's errors are returned as they are. It does not
// close rows. With no rows it returns an empty, non-nil slice.
func Collect[K, T any](rows Rows, decode func(key K, data []byte) (T, error), dbErr func(error) error) ([]T, error) {
	out := []T{}
	for rows.Next() {
		var key K
		var data []byte
		if err := rows.Scan(&key, &data); err != nil {
			return nil, dbErr(err)
		}
		v, err := decode(key, data)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, dbErr(err)
	}
	return out, nil
}

// Review decodes the stored review id; engine ("sqlite", "postgres")
// prefixes the internal error a corrupt document gives.
func Review(engine, id string, data []byte) (*review.Review, error) {
	r := new(review.Review)
	if err := json.Unmarshal(data, r); err != nil {
		return nil, utcp.Errorf(utcp.CodeInternal, "%s: review %s: decoding the stored review: %w", engine, id, err)
	}
	return r, nil
}

// Record decodes the stored audit record id and sets its ID; engine
// prefixes the internal error a corrupt document gives.
func Record(engine string, id int64, data []byte) (audit.Record, error) {
	var r audit.Record
	if err := json.Unmarshal(data, &r); err != nil {
		return audit.Record{}, utcp.Errorf(utcp.CodeInternal, "%s: audit record %d: decoding: %w", engine, id, err)
	}
	r.ID = id
	return r, nil
}
