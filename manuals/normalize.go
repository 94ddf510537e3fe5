package manuals

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/utcpd/utcpd/utcp"
)

// legacyTypeKeys are the v0.1/v0.2 names of call_template_type, in the
// order NormalizeTemplate prefers them.
var legacyTypeKeys = []string{"provider_type", "type", "transport"}

// NormalizeTemplate rewrites one call template (or v0.1/v0.2 provider) to
// UTCP v1.1. raw must be a JSON object. The rewrites, each reported as a
// WarnLegacy warning whose Path is the field name:
//
//   - provider_type, type or transport (first present, in that order)
//     becomes call_template_type, when call_template_type is absent; type
//     and transport only when their value is a string;
//   - the type value http_stream becomes streamable_http;
//   - the type value text becomes file when the template has file_path and
//     no content (the v1.1 split of text and file);
//   - method becomes http_method for http and streamable_http templates;
//   - a cli command_name becomes commands: [{"command": command_name}];
//   - cwd becomes working_dir;
//   - a v0.1 provider's metadata (the descriptive object of the public
//     UTCP registry's providers: description, category, maintainer, ...)
//     is dropped without a warning: it is an ordinary v0.1 field that
//     UTCP v1.1 call templates do not have and nothing uses. A template
//     is a v0.1 provider when it is written with provider_type.
//
// When both a legacy field and its v1.1 name are present the v1.1 field
// wins and the legacy one is dropped with a WarnIgnored warning (with
// WarnLegacy when both hold the same value). type and transport next to
// call_template_type are left alone: they are not legacy there.
//
// Every other field is kept unchanged. When nothing is rewritten raw is
// returned as it is; otherwise the result is compact JSON in the original
// key order. NormalizeTemplate is pure and idempotent. A raw that is not a
// JSON object is an invalid_template error.
func NormalizeTemplate(raw json.RawMessage) (json.RawMessage, []Warning, error) {
	o, err := parseObject(raw)
	if err != nil {
		return nil, nil, utcp.Errorf(utcp.CodeInvalidTemplate, "call template is not a JSON object: %w", err)
	}
	ws, changed := normalizeTemplate(o)
	if !changed {
		return raw, ws, nil
	}
	return o.encode(), ws, nil
}

// normalizeTemplate applies the rewrites of NormalizeTemplate to o in
// place and reports whether o changed. Warning paths are field names.
func normalizeTemplate(o *object) (ws []Warning, changed bool) {
	legacy := func(path, format string, args ...any) {
		ws = append(ws, Warning{Kind: WarnLegacy, Path: path, Message: fmt.Sprintf(format, args...)})
	}
	ignored := func(path, format string, args ...any) {
		ws = append(ws, Warning{Kind: WarnIgnored, Path: path, Message: fmt.Sprintf(format, args...)})
	}
	// dropOrRename moves legacy key `from` to `to`, or drops it when `to`
	// is already set.
	dropOrRename := func(from, to string) {
		if !o.has(from) {
			return
		}
		changed = true
		if !o.has(to) {
			o.rename(from, to)
			legacy(from, "legacy field %s renamed to %s", from, to)
			return
		}
		a, _ := o.get(from)
		b, _ := o.get(to)
		o.remove(from)
		if sameJSON(a, b) {
			legacy(from, "legacy field %s dropped: %s is set to the same value", from, to)
		} else {
			ignored(from, "legacy field %s ignored: %s is set", from, to)
		}
	}

	// 0. The ordinary v0.1 fields v1.1 has no place for.
	if o.has("provider_type") && o.has("metadata") {
		o.remove("metadata")
		changed = true
	}

	// 1. The discriminator. typeKey is where the type was written, for
	// the paths of warnings about its value.
	typeKey := "call_template_type"
	if o.has("call_template_type") {
		dropOrRename("provider_type", "call_template_type")
	} else {
		for _, k := range legacyTypeKeys {
			v, ok := o.get(k)
			if !ok {
				continue
			}
			if _, isString := decodeString(v); k != "provider_type" && !isString {
				continue
			}
			o.rename(k, "call_template_type")
			legacy(k, "legacy field %s renamed to call_template_type", k)
			typeKey = k
			changed = true
			break
		}
		dropOrRename("provider_type", "call_template_type")
	}

	// 2. Renamed type values.
	typ := ""
	if v, ok := o.get("call_template_type"); ok {
		typ, _ = decodeString(v)
	}
	switch {
	case typ == "http_stream":
		typ = "streamable_http"
		o.set("call_template_type", appendJSONString(nil, typ))
		legacy(typeKey, "legacy call_template_type http_stream renamed to streamable_http")
		changed = true
	case typ == "text" && o.has("file_path") && !o.has("content"):
		typ = "file"
		o.set("call_template_type", appendJSONString(nil, typ))
		legacy(typeKey, "legacy text template with file_path is call_template_type file in UTCP v1.1")
		changed = true
	}

	// 3. Type-specific field renames.
	switch typ {
	case "http", "streamable_http":
		dropOrRename("method", "http_method")
	case "cli":
		if v, ok := o.get("command_name"); ok {
			changed = true
			if o.has("commands") {
				o.remove("command_name")
				ignored("command_name", "legacy field command_name ignored: commands is set")
				break
			}
			var b bytes.Buffer
			b.WriteString(`[{"command":`)
			b.Write(bytes.TrimSpace(v))
			b.WriteString(`}]`)
			o.rename("command_name", "commands")
			o.set("commands", b.Bytes())
			legacy("command_name", "legacy field command_name rewritten to commands[0].command")
		}
	}
	dropOrRename("cwd", "working_dir")
	return ws, changed
}

// sameJSON reports whether a and b decode to equal values.
func sameJSON(a, b []byte) bool {
	ca, cb := new(bytes.Buffer), new(bytes.Buffer)
	if json.Compact(ca, a) != nil || json.Compact(cb, b) != nil {
		return false
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
}
