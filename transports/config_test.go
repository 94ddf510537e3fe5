package transports

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/utcpd/utcpd/utcp"
)

// TestDecodeConfig checks the shared start of New: an empty config, a
// decoded one with an unknown field logged (not fatal), and bad JSON
// returned as is.
func TestDecodeConfig(t *testing.T) {
	type config struct {
		Max int `json:"max"`
	}
	var cfg config
	log, err := DecodeConfig(Options{Config: json.RawMessage("  ")}, "x", &cfg)
	if err != nil || log == nil || cfg.Max != 0 {
		t.Fatalf("empty config: %v, %v, %+v", log, err, cfg)
	}
	var buf bytes.Buffer
	_, err = DecodeConfig(Options{Config: json.RawMessage(`{"max":3,"mxa":1}`), Logger: slog.New(slog.NewTextHandler(&buf, nil))}, "x", &cfg)
	if err != nil || cfg.Max != 3 {
		t.Fatalf("config: %v, %+v", err, cfg)
	}
	if got := buf.String(); !strings.Contains(got, `msg="x: unknown configuration field ignored" field=mxa known=[max]`) {
		t.Errorf("log = %q, want the unknown field warned about", got)
	}
	var syntax *json.SyntaxError
	if _, err := DecodeConfig(Options{Config: json.RawMessage(`{`)}, "x", &cfg); err == nil {
		t.Error("bad JSON decoded")
	} else if _, err := DecodeConfig(Options{Config: json.RawMessage(`{"max":}`)}, "x", &cfg); !errors.As(err, &syntax) {
		t.Errorf("bad JSON: %v, want the JSON error", err)
	}
}

// nopTransport is a Transport that does nothing.
type nopTransport struct{}

func (nopTransport) RegisterManual(context.Context, *utcp.CallTemplate) (*utcp.Manual, error) {
	return nil, ErrUnsupported
}
func (nopTransport) Release(context.Context, *utcp.CallTemplate) error { return nil }
func (nopTransport) CallTool(context.Context, *utcp.Call) (*utcp.Result, error) {
	return nil, ErrUnsupported
}
func (nopTransport) Close() error { return nil }

// TestConstructor checks that a failing New gives a nil Transport, not a
// typed nil.
func TestConstructor(t *testing.T) {
	newT := Constructor(func(Options) (*nopTransport, error) { return nil, errors.New("no") })
	if tr, err := newT(Options{}); tr != nil || err == nil {
		t.Errorf("failing New = %v, %v; want nil, error", tr, err)
	}
	newT = Constructor(func(Options) (*nopTransport, error) { return &nopTransport{}, nil })
	if tr, err := newT(Options{}); tr == nil || err != nil {
		t.Errorf("New = %v, %v", tr, err)
	}
}
