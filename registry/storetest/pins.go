package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/utcpd/utcpd/registry"
	"github.com/utcpd/utcpd/utcp"
)

// RunPins runs the registry.PinStore suite against stores made by
// newStore (a new, empty store each call; closing it is newStore's
// business, with t.Cleanup). The subtest names are stable.
func RunPins(t *testing.T, newStore func(t *testing.T) registry.PinStore) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, s registry.PinStore)
	}{
		{"pin_round_trip", testPinRoundTrip},
		{"pin_replace_and_delete", testPinReplaceDelete},
		{"pin_invalid", testPinInvalid},
		{"change_round_trip", testChangeRoundTrip},
		{"change_compare_and_swap", testChangeCAS},
		{"change_list_order", testChangeList},
		{"pin_copies_not_aliases", testPinCopies},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newStore(t)) })
	}
}

// Pin returns a fixture pin of manual name, hashed hash, whose copy is
// the manual of Record(name).
func Pin(name, hash string) *registry.Pin {
	rec := Record(name)
	return &registry.Pin{
		Manual:   name,
		Hash:     hash,
		Template: "t-" + hash,
		Tools: []registry.PinnedTool{
			{Name: "echo", Hash: "h1", Def: json.RawMessage(`{"description":"Echo — ünïcödé","name":"echo"}`)},
			{Name: "add", Hash: "h2", Def: json.RawMessage(`{"description":"","name":"add"}`)},
		},
		Copy:   rec.Manual,
		Pinned: time.Date(2026, 12, 1, 10, 0, 0, 123_000_000, time.UTC),
	}
}

// Change returns a fixture pending change id of manual, created at
// created.
func Change(id, manual string, created time.Time) *registry.PinChange {
	return &registry.PinChange{
		ID: id, Manual: manual, Mode: registry.PinHold, Status: registry.PinPending, From: "a", To: "b",
		Diff: []registry.ToolDiff{{Tool: "echo", Change: "changed", Fields: []string{"description"}, Description: "-old\n+new\n",
			Schema: []registry.JSONChange{{Path: "/inputs/type", Op: "replace", Old: json.RawMessage(`"object"`), New: json.RawMessage(`"string"`)}}}},
		Proposed: Pin(manual, "b"),
		Created:  created,
	}
}

func testPinRoundTrip(t *testing.T, s registry.PinStore) {
	_, err := s.GetPin(t.Context(), "m")
	if !errors.Is(err, registry.ErrPinNotFound) {
		t.Fatalf("GetPin of a missing pin: %v, want ErrPinNotFound", err)
	}
	want := Pin("m", "a")
	if err := s.PutPin(t.Context(), want); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetPin(t.Context(), "m")
	if err != nil {
		t.Fatal(err)
	}
	if d := Diff(want, got); d != "" {
		t.Errorf("pin (-want +got):\n%s", d)
	}
}

func testPinReplaceDelete(t *testing.T, s registry.PinStore) {
	if err := s.PutPin(t.Context(), Pin("m", "a")); err != nil {
		t.Fatal(err)
	}
	if err := s.PutPin(t.Context(), Pin("m", "b")); err != nil {
		t.Fatal(err)
	}
	if err := s.PutPin(t.Context(), Pin("other", "c")); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetPin(t.Context(), "m")
	if err != nil || got.Hash != "b" {
		t.Fatalf("GetPin after replace = %+v, %v", got, err)
	}
	if err := s.DeletePin(t.Context(), "m"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeletePin(t.Context(), "m"); err != nil {
		t.Errorf("DeletePin of a missing pin: %v, want nil", err)
	}
	if _, err := s.GetPin(t.Context(), "m"); !errors.Is(err, registry.ErrPinNotFound) {
		t.Errorf("GetPin after delete: %v", err)
	}
	if _, err := s.GetPin(t.Context(), "other"); err != nil {
		t.Errorf("another manual's pin after delete: %v", err)
	}
}

func testPinInvalid(t *testing.T, s registry.PinStore) {
	for _, p := range []*registry.Pin{nil, {Hash: "x"}, {Manual: "m"}} {
		if err := s.PutPin(t.Context(), p); utcp.CodeOf(err) != utcp.CodeInvalidRequest {
			t.Errorf("PutPin(%+v) = %v, want invalid_request", p, err)
		}
	}
	for _, c := range []*registry.PinChange{nil, {Manual: "m", Status: "pending", Created: time.Now()}, {ID: "x", Manual: "m", Status: "pending"}} {
		if err := s.AddChange(t.Context(), c); utcp.CodeOf(err) != utcp.CodeInvalidRequest {
			t.Errorf("AddChange(%+v) = %v, want invalid_request", c, err)
		}
	}
}

func testChangeRoundTrip(t *testing.T, s registry.PinStore) {
	if _, err := s.GetChange(t.Context(), "pc_1"); !errors.Is(err, registry.ErrChangeNotFound) {
		t.Fatalf("GetChange of a missing change: %v", err)
	}
	want := Change("pc_1", "m", time.Date(2026, 12, 1, 11, 0, 0, 5_000_000, time.UTC))
	if err := s.AddChange(t.Context(), want); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetChange(t.Context(), "pc_1")
	if err != nil {
		t.Fatal(err)
	}
	if d := Diff(want, got); d != "" {
		t.Errorf("change (-want +got):\n%s", d)
	}
	if err := s.AddChange(t.Context(), want); err == nil {
		t.Error("AddChange of an existing id succeeded")
	}
}

func testChangeCAS(t *testing.T, s registry.PinStore) {
	c := Change("pc_1", "m", time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC))
	if err := s.AddChange(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	if err := s.PutPin(t.Context(), Pin("m", "a")); err != nil {
		t.Fatal(err)
	}
	c.Status, c.By, c.Decided = registry.PinApproved, "alice", c.Created.Add(time.Minute)
	if err := s.UpdateChange(t.Context(), c, registry.PinPending, c.Proposed); err != nil {
		t.Fatal(err)
	}
	if p, err := s.GetPin(t.Context(), "m"); err != nil || p.Hash != "b" {
		t.Errorf("pin after the approval = %+v, %v; want the proposed one (hash b)", p, err)
	}
	got, err := s.GetChange(t.Context(), "pc_1")
	if err != nil || got.Status != registry.PinApproved || got.By != "alice" {
		t.Errorf("change after the update = %+v, %v", got, err)
	}
	// A second decision from pending loses, and writes no pin.
	c.Status = registry.PinRejected
	err = s.UpdateChange(t.Context(), c, registry.PinPending, Pin("m", "z"))
	if !errors.Is(err, registry.ErrChangeConflict) {
		t.Errorf("UpdateChange from a stale status: %v, want ErrChangeConflict", err)
	}
	if p, _ := s.GetPin(t.Context(), "m"); p == nil || p.Hash != "b" {
		t.Errorf("a lost update wrote its pin: %+v", p)
	}
	missing := Change("pc_missing", "m", time.Now())
	if err := s.UpdateChange(t.Context(), missing, registry.PinPending, nil); !errors.Is(err, registry.ErrChangeNotFound) {
		t.Errorf("UpdateChange of a missing change: %v", err)
	}
}

func testChangeList(t *testing.T, s registry.PinStore) {
	base := time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC)
	for i := range 5 {
		manual := "m"
		if i%2 == 1 {
			manual = "n"
		}
		if err := s.AddChange(t.Context(), Change(fmt.Sprintf("pc_%d", i), manual, base.Add(time.Duration(i)*time.Second))); err != nil {
			t.Fatal(err)
		}
	}
	ids := func(cs []*registry.PinChange) []string {
		out := []string{}
		for _, c := range cs {
			out = append(out, c.ID)
		}
		return out
	}
	all, err := s.ListChanges(t.Context(), "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(ids(all)), "[pc_4 pc_3 pc_2 pc_1 pc_0]"; got != want {
		t.Errorf("every change = %s, want %s (newest first)", got, want)
	}
	m, err := s.ListChanges(t.Context(), "m", 2)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(ids(m)), "[pc_4 pc_2]"; got != want {
		t.Errorf("changes of m, limit 2 = %s, want %s", got, want)
	}
	if none, err := s.ListChanges(t.Context(), "nobody", 0); err != nil || len(none) != 0 {
		t.Errorf("changes of an unknown manual = %v, %v", none, err)
	}
}

func testPinCopies(t *testing.T, s registry.PinStore) {
	p := Pin("m", "a")
	if err := s.PutPin(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	p.Tools[0].Name = "changed"
	p.Copy.Tools[0].Description = "changed"
	got, err := s.GetPin(t.Context(), "m")
	if err != nil {
		t.Fatal(err)
	}
	if got.Tools[0].Name != "echo" || got.Copy.Tools[0].Description == "changed" {
		t.Errorf("the store kept the caller's pin: %+v", got.Tools[0])
	}
	got.Tools[0].Name = "mine"
	again, _ := s.GetPin(t.Context(), "m")
	if again.Tools[0].Name != "echo" {
		t.Errorf("the store returned its own pin")
	}
}
