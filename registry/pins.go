package registry

import (
	"context"
	"encoding/json"
	"time"

	"github.com/utcpd/utcpd/utcp"
)

// This file is the storage side of tool definition pinning (the "rug
// pull" defence, gateway/pin.go): the definitions a manual's tools had
// when they were first registered or last approved, and the changes a
// rediscovery brought since, with their review status.

// The pin modes of a manual call template's "pin" field.
const (
	PinOff  = "off"  // no pinning: a rediscovery replaces the tools silently
	PinWarn = "warn" // a change is accepted, re-pinned and recorded
	PinHold = "hold" // a change waits for an admin's approval; the pinned tools keep serving
)

// ValidPinMode reports whether s is a pin mode ("" is not one).
func ValidPinMode(s string) bool { return s == PinOff || s == PinWarn || s == PinHold }

// PinnedTool is one tool's pinned definition.
type PinnedTool struct {
	// Name is the tool's name as its manual lists it (unqualified).
	Name string `json:"name"`
	// Hash is the SHA-256 (hex) of Def.
	Hash string `json:"hash"`
	// Def is the tool's canonical definition: name, description, title,
	// inputs, outputs, annotations, tags and the tool call template with
	// secret values redacted, as JSON with sorted keys. It never holds a
	// secret in clear.
	Def json.RawMessage `json:"def"`
}

// Pin is the pinned definition set of one manual.
type Pin struct {
	// Manual is the manual's name, the pin's key.
	Manual string `json:"manual"`
	// Hash is the SHA-256 (hex) of the whole set: the template hash and
	// every tool's hash, in name order.
	Hash string `json:"hash"`
	// Template is the SHA-256 (hex) of the manual call template (secret
	// values redacted, the pin field left out). A registration under
	// another template is a new registration by its author and re-pins.
	Template string `json:"template"`
	// Tools are the pinned tools, by name.
	Tools []PinnedTool `json:"tools"`
	// Copy is the manual as discovered when it was pinned (tool names
	// unqualified): what a held manual keeps serving.
	Copy *utcp.Manual `json:"copy,omitempty"`
	// Pinned is when the pin was set.
	Pinned time.Time `json:"pinned"`
}

// PinStatus is the state of a PinChange.
type PinStatus string

// The statuses of a PinChange. Pending is the only one that changes.
const (
	PinPending    PinStatus = "pending"    // held, awaiting an admin (mode hold)
	PinApproved   PinStatus = "approved"   // an admin approved it: re-pinned
	PinRejected   PinStatus = "rejected"   // an admin rejected it: the pin stays
	PinAccepted   PinStatus = "accepted"   // accepted without review (mode warn, or removals only) and re-pinned
	PinSuperseded PinStatus = "superseded" // the backend changed again before a decision; a newer change replaces it
)

// ToolDiff is how one tool's definition differs between a pin and a
// rediscovery.
type ToolDiff struct {
	// Tool is the tool's name (unqualified).
	Tool string `json:"tool"`
	// Change is "added", "removed" or "changed".
	Change string `json:"change"`
	// Fields lists the top-level fields that differ (description,
	// inputs, ...), for a changed tool.
	Fields []string `json:"fields,omitempty"`
	// Description is a unified-style line diff of the description ("-"
	// pinned, "+" new), when it changed.
	Description string `json:"description_diff,omitempty"`
	// Schema lists the JSON differences of the other fields (schemas,
	// annotations, template), one per changed value.
	Schema []JSONChange `json:"schema_diff,omitempty"`
}

// JSONChange is one difference between two JSON documents.
type JSONChange struct {
	// Path is the JSON Pointer (RFC 6901) of the value, from the tool's
	// canonical definition ("/inputs/properties/q/type").
	Path string `json:"path"`
	// Op is "add", "remove" or "replace".
	Op string `json:"op"`
	// Old and New are the values (absent for add and remove).
	Old json.RawMessage `json:"old,omitempty"`
	New json.RawMessage `json:"new,omitempty"`
}

// PinChange is one change of a manual's definitions that a rediscovery
// brought: its diff, and what became of it.
type PinChange struct {
	// ID names the change ("pc_" and hex), the key.
	ID string `json:"id"`
	// Manual is the manual's name.
	Manual string `json:"manual"`
	// Mode is the manual's pin mode when the change came: warn or hold.
	Mode string `json:"mode"`
	// Status is what became of it.
	Status PinStatus `json:"status"`
	// From and To are the set hashes of the pin and of the rediscovery.
	From string `json:"from"`
	To   string `json:"to"`
	// Diff is the change, per tool, in name order.
	Diff []ToolDiff `json:"diff"`
	// Proposed is the pin that approving the change sets; only a pending
	// change keeps it (the gateway drops it once the change is decided).
	Proposed *Pin `json:"proposed,omitempty"`
	// Created is when the change was seen; Decided when it left pending
	// (equal to Created for a change accepted at once).
	Created time.Time `json:"created"`
	Decided time.Time `json:"decided,omitzero"`
	// By names who decided it ("" for the gateway); Note is their note.
	By   string `json:"by,omitempty"`
	Note string `json:"note,omitempty"`
}

// Errors of a PinStore, wrapped.
var (
	// ErrPinNotFound: no pin of that manual.
	ErrPinNotFound error = &utcp.Error{Code: utcp.CodeNotFound, Message: "pin not found"}
	// ErrChangeNotFound: no change of that id.
	ErrChangeNotFound error = &utcp.Error{Code: utcp.CodeNotFound, Message: "pin change not found"}
	// ErrChangeConflict: the change is no longer in the status expected.
	ErrChangeConflict error = &utcp.Error{Code: utcp.CodeInvalidRequest, Message: "pin change was decided meanwhile"}
)

// PinStore keeps pins and pin changes, shared by every replica on one
// store. Implementations are safe for concurrent use, copy what goes in
// and out (as Store does) and pass the PinStore suite of
// registry/storetest (RunPins).
type PinStore interface {
	// GetPin returns the pin of manual, or an error wrapping
	// ErrPinNotFound.
	GetPin(ctx context.Context, manual string) (*Pin, error)
	// PutPin creates or replaces the pin p.Manual; durable on nil.
	PutPin(ctx context.Context, p *Pin) error
	// DeletePin removes the pin of manual; nil when there is none.
	DeletePin(ctx context.Context, manual string) error
	// AddChange stores a new change c (c.ID must be new).
	AddChange(ctx context.Context, c *PinChange) error
	// GetChange returns the change id, or an error wrapping
	// ErrChangeNotFound.
	GetChange(ctx context.Context, id string) (*PinChange, error)
	// UpdateChange replaces the stored change c.ID with c if its stored
	// status is from, else fails with an error wrapping
	// ErrChangeConflict; when pin is not nil it is put in the same
	// transaction (an approval re-pins atomically).
	UpdateChange(ctx context.Context, c *PinChange, from PinStatus, pin *Pin) error
	// ListChanges returns the changes of manual ("" for every manual),
	// newest first, at most limit (≤ 0: 100).
	ListChanges(ctx context.Context, manual string, limit int) ([]*PinChange, error)
}

// CheckPin validates p for PutPin.
func CheckPin(p *Pin) error {
	if p == nil || p.Manual == "" || p.Hash == "" {
		return utcp.NewError(utcp.CodeInvalidRequest, "store: a pin needs a manual and a hash")
	}
	return nil
}

// CheckChange validates c for AddChange and UpdateChange.
func CheckChange(c *PinChange) error {
	if c == nil || c.ID == "" || c.Manual == "" || c.Status == "" || c.Created.IsZero() {
		return utcp.NewError(utcp.CodeInvalidRequest, "store: a pin change needs an id, a manual, a status and a time")
	}
	return nil
}

// ClonePin returns a deep copy of p through a JSON round trip (what a
// persistent store does).
func ClonePin(p *Pin) (*Pin, error) {
	if p == nil {
		return nil, nil
	}
	b, err := json.Marshal(p)
	if err != nil {
		return nil, utcp.Errorf(utcp.CodeInvalidRequest, "store: pin %q: encoding: %w", p.Manual, err)
	}
	out := new(Pin)
	if err := json.Unmarshal(b, out); err != nil {
		return nil, utcp.Errorf(utcp.CodeInvalidRequest, "store: pin %q: decoding: %w", p.Manual, err)
	}
	return out, nil
}

// CloneChange returns a deep copy of c through a JSON round trip.
func CloneChange(c *PinChange) (*PinChange, error) {
	if c == nil {
		return nil, nil
	}
	b, err := json.Marshal(c)
	if err != nil {
		return nil, utcp.Errorf(utcp.CodeInvalidRequest, "store: pin change %q: encoding: %w", c.ID, err)
	}
	out := new(PinChange)
	if err := json.Unmarshal(b, out); err != nil {
		return nil, utcp.Errorf(utcp.CodeInvalidRequest, "store: pin change %q: decoding: %w", c.ID, err)
	}
	return out, nil
}

// PinNotFound is the error for a manual without a pin.
func PinNotFound(manual string) error {
	return &utcp.Error{Code: utcp.CodeNotFound, Message: "no pin for manual " + quote(manual), Details: map[string]any{"manual": manual}, Err: ErrPinNotFound}
}

// ChangeNotFound is the error for an unknown change id.
func ChangeNotFound(id string) error {
	return &utcp.Error{Code: utcp.CodeNotFound, Message: "pin change " + quote(id) + " not found", Details: map[string]any{"change_id": id}, Err: ErrChangeNotFound}
}

// ChangeConflict is the error for a change no longer in status from.
func ChangeConflict(id string, from, now PinStatus) error {
	return &utcp.Error{Code: utcp.CodeInvalidRequest, Message: "pin change " + quote(id) + " is " + string(now) + ", not " + string(from),
		Details: map[string]any{"change_id": id, "status": string(now)}, Err: ErrChangeConflict}
}

// DefaultChangeLimit is ListChanges' limit when none is given.
const DefaultChangeLimit = 100
