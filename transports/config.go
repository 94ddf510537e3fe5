package transports

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"slices"
)

// Constructor adapts a transport package's New, which returns its own
// *Transport, to Info.New: an error comes back with a nil Transport (never
// a typed nil inside the interface).
func Constructor[T Transport](newT func(Options) (T, error)) func(Options) (Transport, error) {
	return func(opts Options) (Transport, error) {
		t, err := newT(opts)
		if err != nil {
			return nil, err
		}
		return t, nil
	}
}

// DecodeConfig is the start of a transport's New: it returns opts.Logger
// (or one that discards when it is nil) and decodes opts.Config, when it
// is not empty, into cfg (a pointer to the transport's Config). A field
// cfg does not have is logged as a warning ("<typ>: unknown configuration
// field ignored") and otherwise ignored. The error is the JSON decoding
// error as is, for New to wrap as an invalid_config error in its words.
func DecodeConfig(opts Options, typ string, cfg any) (*slog.Logger, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if len(bytes.TrimSpace(opts.Config)) == 0 {
		return log, nil
	}
	if err := json.Unmarshal(opts.Config, cfg); err != nil {
		return log, err
	}
	var keys map[string]json.RawMessage
	_ = json.Unmarshal(opts.Config, &keys)
	known := FieldNames(cfg)
	for k := range keys {
		if !slices.Contains(known, k) {
			log.Warn(typ+": unknown configuration field ignored", "field", k, "known", known)
		}
	}
	return log, nil
}
