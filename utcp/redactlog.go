package utcp

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
)

// RedactHandler wraps h so that no record it handles shows a secret: the
// string value of an attribute whose key looks secret (SecretName) is
// replaced by Redacted, and the message and every other string, error,
// fmt.Stringer or JSON attribute value (in groups too) is redacted by
// value (RedactText). Numbers, booleans, durations and times pass
// unchanged whatever their key. A record with nothing to redact is handed
// to h as it is, without allocating; attributes given to WithAttrs are
// redacted once, there.
func RedactHandler(h slog.Handler) slog.Handler {
	if r, ok := h.(redactHandler); ok {
		return r
	}
	return redactHandler{h}
}

type redactHandler struct{ h slog.Handler }

func (r redactHandler) Enabled(ctx context.Context, l slog.Level) bool { return r.h.Enabled(ctx, l) }

func (r redactHandler) WithAttrs(as []slog.Attr) slog.Handler {
	out := make([]slog.Attr, len(as))
	for i, a := range as {
		out[i] = redactAttr(a)
	}
	return redactHandler{r.h.WithAttrs(out)}
}

func (r redactHandler) WithGroup(name string) slog.Handler {
	return redactHandler{r.h.WithGroup(name)}
}

func (r redactHandler) Handle(ctx context.Context, rec slog.Record) error {
	dirty := HasSecretText(rec.Message)
	if !dirty {
		rec.Attrs(func(a slog.Attr) bool {
			dirty = attrHasSecret(a)
			return !dirty
		})
	}
	if !dirty {
		return r.h.Handle(ctx, rec)
	}
	out := slog.NewRecord(rec.Time, rec.Level, RedactText(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(redactAttr(a))
		return true
	})
	return r.h.Handle(ctx, out)
}

// attrHasSecret reports whether redactAttr would change a.
func attrHasSecret(a slog.Attr) bool {
	v := a.Value
	if v.Kind() == slog.KindLogValuer {
		v = v.Resolve()
	}
	switch v.Kind() {
	case slog.KindString:
		s := v.String()
		if SecretName(a.Key) {
			return s != "" && s != Redacted && !onlyVariables(s)
		}
		return HasSecretText(s)
	case slog.KindGroup:
		for _, g := range v.Group() {
			if attrHasSecret(g) {
				return true
			}
		}
		return false
	case slog.KindAny:
		s, ok := anyText(v.Any())
		if !ok {
			return false
		}
		if SecretName(a.Key) {
			return s != ""
		}
		return HasSecretText(s)
	}
	return false
}

// redactAttr returns a with its secrets redacted (see RedactHandler).
func redactAttr(a slog.Attr) slog.Attr {
	v := a.Value
	if v.Kind() == slog.KindLogValuer {
		v = v.Resolve()
	}
	switch v.Kind() {
	case slog.KindString:
		s := v.String()
		if SecretName(a.Key) && s != "" && !onlyVariables(s) {
			return slog.String(a.Key, Redacted)
		}
		if HasSecretText(s) {
			return slog.String(a.Key, RedactText(s))
		}
	case slog.KindGroup:
		g := v.Group()
		out := make([]slog.Attr, len(g))
		for i, x := range g {
			out[i] = redactAttr(x)
		}
		return slog.Attr{Key: a.Key, Value: slog.GroupValue(out...)}
	case slog.KindAny:
		if raw, ok := v.Any().(json.RawMessage); ok {
			if SecretName(a.Key) {
				return slog.String(a.Key, Redacted)
			}
			return slog.Any(a.Key, Redact(raw))
		}
		s, ok := anyText(v.Any())
		if !ok {
			break
		}
		if SecretName(a.Key) && s != "" {
			return slog.String(a.Key, Redacted)
		}
		if HasSecretText(s) {
			return slog.String(a.Key, RedactText(s))
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}

// anyText is the text a handler would show for an error, a fmt.Stringer
// or JSON; other values are not looked at.
func anyText(x any) (string, bool) {
	switch t := x.(type) {
	case error:
		return t.Error(), true
	case fmt.Stringer:
		return t.String(), true
	case json.RawMessage:
		return string(t), true
	}
	return "", false
}
