package registry

import (
	"context"
	"encoding/json"
	"time"

	"github.com/utcpd/utcpd/utcp"
)

// Record is the persisted form of one registered manual.
type Record struct {
	// Name is the manual's name, the record's key.
	Name string
	// Template is the manual call template exactly as registered: raw
	// JSON, after legacy normalisation but before variable substitution,
	// so it never contains resolved secrets. It is the source of truth
	// from which the manual is registered again on start.
	Template json.RawMessage
	// Manual is the manual as last discovered (nil if never discovered).
	// It lets the daemon serve the tools before rediscovery completes.
	Manual *utcp.Manual
	// Source is where the manual came from: SourceConfig, SourceDir or
	// SourceAPI.
	Source string
	// Registered is when the manual was first registered; Refreshed when
	// its tools were last discovered.
	Registered, Refreshed time.Time
}

// ChangeKind says what happened to a stored record.
type ChangeKind string

// The kinds of Change.
const (
	ChangePut    ChangeKind = "put"    // the record was created or replaced
	ChangeDelete ChangeKind = "delete" // the record was deleted
)

// Change reports that another process changed the record called Name.
type Change struct {
	Kind ChangeKind
	Name string
}

// ErrNotFound is the error a Store returns, wrapped (see NotFound), when
// there is no record of the requested name. It is a *utcp.Error of code
// manual_not_found and a sentinel of its own: errors.Is(err, ErrNotFound)
// holds for an error that wraps it, not for every manual_not_found error
// (transports.ErrNotRegistered is another). To ask for the code, use
// utcp.CodeOf or errors.Is(err, &utcp.Error{Code: utcp.CodeManualNotFound}).
var ErrNotFound error = &utcp.Error{Code: utcp.CodeManualNotFound, Message: "manual not found"}

// Store persists registered manuals. Implementations are safe for
// concurrent use and pass the conformance suite in registry/storetest.
//
// Records going in and coming out are copies: a Store never keeps a
// pointer it was given and never returns one it keeps, so callers may
// modify what they pass and receive. Only what JSON can carry survives a
// round trip: utcp.CallTemplate's Spec and Unknown are not stored (Raw
// is), and times keep at least millisecond precision.
type Store interface {
	// Put creates or replaces the record called rec.Name. The record is
	// durable when Put returns nil. An empty Name or a Template that is
	// not a non-empty JSON value is an invalid_request *utcp.Error.
	Put(ctx context.Context, rec *Record) error
	// Get returns the record called name, or an error wrapping
	// ErrNotFound.
	Get(ctx context.Context, name string) (*Record, error)
	// Delete removes the record called name, or returns an error wrapping
	// ErrNotFound.
	Delete(ctx context.Context, name string) error
	// List returns every record, ordered by name in byte order (as
	// strings.Compare; SQL stores use a binary/"C" collation).
	List(ctx context.Context) ([]*Record, error)
	// Watch reports changes made by other processes sharing the store
	// (replicas on one Postgres database, say), not those made through
	// this Store value. The channel is closed when ctx ends or the Store
	// is closed. A single-process store may never send.
	Watch(ctx context.Context) <-chan Change
	// Close releases the store. It is idempotent; other methods fail
	// after it.
	Close() error
}

// CheckRecord validates rec as Store.Put requires: non-nil, a non-empty
// Name and a Template that is a non-empty, valid JSON value. Store
// implementations call it first.
func CheckRecord(rec *Record) error {
	switch {
	case rec == nil:
		return utcp.NewError(utcp.CodeInvalidRequest, "store: nil record")
	case rec.Name == "":
		return utcp.NewError(utcp.CodeInvalidRequest, "store: record has no name")
	case len(rec.Template) == 0 || !json.Valid(rec.Template):
		return utcp.NewError(utcp.CodeInvalidRequest, "store: record %q: template is not valid JSON", rec.Name).
			WithDetail("manual", rec.Name)
	}
	return nil
}

// NotFound returns the error a Store reports for a missing record called
// name: a manual_not_found *utcp.Error wrapping ErrNotFound.
func NotFound(name string) error {
	return &utcp.Error{
		Code:    utcp.CodeManualNotFound,
		Message: "manual " + quote(name) + " not found in store",
		Details: map[string]any{"manual": name},
		Err:     ErrNotFound,
	}
}

// CloneRecord returns a deep copy of rec, with Manual copied through a
// JSON round trip (what a persistent store does): utcp.CallTemplate's Spec
// and Unknown are dropped. It returns an error only if Manual cannot be
// encoded. CloneRecord(nil) returns nil, nil.
func CloneRecord(rec *Record) (*Record, error) {
	if rec == nil {
		return nil, nil
	}
	out := *rec
	out.Template = append(json.RawMessage(nil), rec.Template...)
	if rec.Manual != nil {
		b, err := json.Marshal(rec.Manual)
		if err != nil {
			return nil, utcp.Errorf(utcp.CodeInvalidManual, "store: record %q: encoding manual: %w", rec.Name, err)
		}
		out.Manual = new(utcp.Manual)
		if err := json.Unmarshal(b, out.Manual); err != nil {
			return nil, utcp.Errorf(utcp.CodeInvalidManual, "store: record %q: decoding manual: %w", rec.Name, err)
		}
	}
	return &out, nil
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
