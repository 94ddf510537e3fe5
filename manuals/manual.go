package manuals

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/utcpd/utcpd/utcp"
)

// Known fields of manuals and tools, v1.1 first, then the legacy names
// ParseManual also accepts.
var (
	manualFields       = []string{"utcp_version", "manual_version", "tools"}
	manualLegacyFields = []string{"version"}
	toolFields         = []string{"name", "description", "inputs", "outputs", "tags", "average_response_size", "tool_call_template"}
	// toolTemplateKeys are the names of a tool's call template, the v1.1
	// name first; the first present wins.
	toolTemplateKeys = []string{"tool_call_template", "tool_provider", "call_template", "provider"}
	toolLegacyFields = []string{"tool_provider", "call_template", "provider", "parameters"}
)

// DefaultManualVersion is the manual_version a manual gets when it has
// none, as in python-utcp.
const DefaultManualVersion = "1.0.0"

// ParseManual decodes a UTCP manual from JSON or YAML (YAML when the
// first non-blank character is not '{'). It accepts v1.1 (utcp_version,
// manual_version, tools[].tool_call_template) and the legacy v0.1 shape
// (version, tools[].tool_provider, provider or call_template, parameters
// for inputs), and normalises every tool's call template with
// NormalizeTemplate.
//
// Decoding is lenient: unknown keys are ignored with a WarnUnknownField
// warning naming the closest known key, and legacy syntax yields
// WarnLegacy warnings. A legacy manual gets utcp_version utcp.Version,
// since its content is now v1.1; a missing manual_version becomes
// DefaultManualVersion. A tool without a call template keeps
// ToolCallTemplate nil; the caller decides what that means (python-utcp
// rejects it, several servers mean "use the manual's template").
//
// Errors are *utcp.Error with code invalid_manual: malformed JSON or
// YAML (with line and column), a document that is not an object, no
// tools array, a tool without a name, or a field of the wrong type (with
// its JSON path, e.g. "tools[3].tags[1]").
func ParseManual(data []byte) (*utcp.Manual, []Warning, error) {
	d, err := loadDocument("", data, utcp.CodeInvalidManual, false, false)
	if err != nil {
		return nil, nil, err
	}
	mp := &manualParser{}
	m := mp.parse(d.json)
	if mp.err != nil {
		return nil, nil, mp.err
	}
	return m, mp.warnings, nil
}

// IsManual reports whether data (JSON or YAML) looks like a UTCP manual:
// an object with a tools array and utcp_version (v1.x) or version (v0.1).
// This is the test python-utcp applies to tell a manual from an OpenAPI
// document. It never fails; malformed input is not a manual.
func IsManual(data []byte) bool {
	d, err := loadDocument("", data, utcp.CodeInvalidManual, false, false)
	if err != nil || firstByte(d.json) != '{' {
		return false
	}
	o, err := parseObject(d.json)
	if err != nil {
		return false
	}
	return isManualObject(o)
}

func isManualObject(o *object) bool {
	tools, ok := o.get("tools")
	if !ok || firstByte(tools) != '[' {
		return false
	}
	return o.has("utcp_version") || o.has("version")
}

type manualParser struct {
	warnings []Warning
	err      error
}

func (p *manualParser) warn(kind WarningKind, path, suggestion, format string, args ...any) {
	p.warnings = append(p.warnings, Warning{Kind: kind, Path: path, Message: fmt.Sprintf(format, args...), Suggestion: suggestion})
}

func (p *manualParser) fail(path, format string, args ...any) {
	if p.err != nil {
		return
	}
	e := utcp.NewError(utcp.CodeInvalidManual, "%s", formatFinding("", 0, path, fmt.Sprintf(format, args...), ""))
	if path != "" {
		e.WithDetail("path", path)
	}
	p.err = e
}

// unknown warns about every key of o not in known (or legacy), and about
// duplicate keys.
func (p *manualParser) unknown(o *object, base string, known, legacy []string) {
	for _, k := range o.keys() {
		if slices.Contains(known, k) || slices.Contains(legacy, k) {
			continue
		}
		p.warn(WarnUnknownField, joinKey(base, k), suggest(k, known), "unknown field %q ignored", k)
	}
	for _, k := range o.duplicates() {
		p.warn(WarnIgnored, joinKey(base, k), "", "field %q appears more than once; the last value is used", k)
	}
}

func (p *manualParser) parse(data []byte) *utcp.Manual {
	if firstByte(data) != '{' {
		p.fail("", "a manual must be a JSON object, got %s", jsonKind(data))
		return nil
	}
	o, err := parseObject(data)
	if err != nil {
		p.fail("", "%v", err)
		return nil
	}
	p.unknown(o, "", manualFields, manualLegacyFields)
	m := &utcp.Manual{ManualVersion: DefaultManualVersion}
	if v, ok := o.get("utcp_version"); ok && !isNull(v) {
		s, ok := decodeScalarString(v)
		if !ok {
			p.fail("utcp_version", "must be a string, got %s", jsonKind(v))
			return nil
		}
		m.UTCPVersion = s
		if o.has("version") {
			p.warn(WarnIgnored, "version", "", "legacy field version ignored: utcp_version is set")
		}
	} else if v, ok := o.get("version"); ok && !isNull(v) {
		s, _ := decodeScalarString(v)
		m.UTCPVersion = utcp.Version
		p.warn(WarnLegacy, "version", "", "legacy manual (version %q) normalised to utcp_version %s", s, utcp.Version)
	} else {
		m.UTCPVersion = utcp.Version
		p.warn(WarnNotice, "", "", "manual has no utcp_version; assuming %s", utcp.Version)
	}
	if v, ok := o.get("manual_version"); ok && !isNull(v) {
		s, ok := decodeScalarString(v)
		if !ok {
			p.fail("manual_version", "must be a string, got %s", jsonKind(v))
			return nil
		}
		m.ManualVersion = s
	}
	tools, ok := o.get("tools")
	if !ok || isNull(tools) {
		p.fail("tools", "a manual needs a tools array")
		return nil
	}
	items, err := decodeArray(tools)
	if err != nil {
		p.fail("tools", "must be an array, got %s", jsonKind(tools))
		return nil
	}
	m.Tools = make([]utcp.Tool, 0, len(items))
	for i, raw := range items {
		t, ok := p.tool(raw, joinIndex("tools", i))
		if !ok {
			return nil
		}
		m.Tools = append(m.Tools, t)
	}
	return m
}

func (p *manualParser) tool(raw json.RawMessage, path string) (utcp.Tool, bool) {
	var t utcp.Tool
	if firstByte(raw) != '{' {
		p.fail(path, "a tool must be a JSON object, got %s", jsonKind(raw))
		return t, false
	}
	o, err := parseObject(raw)
	if err != nil {
		p.fail(path, "%v", err)
		return t, false
	}
	p.unknown(o, path, toolFields, toolLegacyFields)

	v, ok := o.get("name")
	if !ok || isNull(v) {
		p.fail(joinKey(path, "name"), "a tool needs a name")
		return t, false
	}
	if t.Name, ok = decodeString(v); !ok || t.Name == "" {
		p.fail(joinKey(path, "name"), "must be a non-empty string, got %s", jsonKind(v))
		return t, false
	}
	if v, ok := o.get("description"); ok && !isNull(v) {
		if t.Description, ok = decodeString(v); !ok {
			p.fail(joinKey(path, "description"), "must be a string, got %s", jsonKind(v))
			return t, false
		}
	}
	if v, ok := o.get("tags"); ok && !isNull(v) {
		items, err := decodeArray(v)
		if err != nil {
			p.fail(joinKey(path, "tags"), "must be an array of strings, got %s", jsonKind(v))
			return t, false
		}
		t.Tags = make([]string, 0, len(items))
		for j, it := range items {
			s, ok := decodeString(it)
			if !ok {
				p.fail(joinIndex(joinKey(path, "tags"), j), "must be a string, got %s", jsonKind(it))
				return t, false
			}
			t.Tags = append(t.Tags, s)
		}
	}
	if v, ok := o.get("average_response_size"); ok && !isNull(v) {
		n, ok := decodeInt(v)
		if !ok {
			p.fail(joinKey(path, "average_response_size"), "must be an integer, got %s", bytes.TrimSpace(v))
			return t, false
		}
		t.AverageResponseSize = &n
	}

	inputsKey := "inputs"
	if !o.has("inputs") && o.has("parameters") {
		inputsKey = "parameters"
		p.warn(WarnLegacy, joinKey(path, "parameters"), "", "legacy field parameters read as inputs")
	} else if o.has("parameters") {
		p.warn(WarnIgnored, joinKey(path, "parameters"), "", "legacy field parameters ignored: inputs is set")
	}
	for _, f := range []struct {
		key string
		dst *json.RawMessage
	}{{inputsKey, &t.Inputs}, {"outputs", &t.Outputs}} {
		v, ok := o.get(f.key)
		if !ok || isNull(v) {
			continue
		}
		if firstByte(v) != '{' {
			p.fail(joinKey(path, f.key), "must be a JSON Schema object, got %s", jsonKind(v))
			return t, false
		}
		var b bytes.Buffer
		if err := json.Compact(&b, v); err != nil {
			p.fail(joinKey(path, f.key), "%v", err)
			return t, false
		}
		*f.dst = b.Bytes()
	}

	tmplKey := ""
	for _, k := range toolTemplateKeys {
		if v, ok := o.get(k); ok && !isNull(v) {
			if tmplKey == "" {
				tmplKey = k
				if k != "tool_call_template" {
					p.warn(WarnLegacy, joinKey(path, k), "", "legacy field %s read as tool_call_template", k)
				}
			} else {
				p.warn(WarnIgnored, joinKey(path, k), "", "field %s ignored: %s is set", k, tmplKey)
			}
		}
	}
	if tmplKey != "" {
		v, _ := o.get(tmplKey)
		tp := joinKey(path, tmplKey)
		ct, ok := p.template(v, tp)
		if !ok {
			return t, false
		}
		t.ToolCallTemplate = ct
	}
	return t, true
}

// template normalises and decodes a tool's call template.
func (p *manualParser) template(raw json.RawMessage, path string) (*utcp.CallTemplate, bool) {
	if firstByte(raw) != '{' {
		p.fail(path, "a call template must be a JSON object, got %s", jsonKind(raw))
		return nil, false
	}
	norm, ws, err := NormalizeTemplate(raw)
	if err != nil {
		p.fail(path, "%v", err)
		return nil, false
	}
	for _, w := range ws {
		w.Path = joinPath(path, w.Path)
		p.warnings = append(p.warnings, w)
	}
	var ct utcp.CallTemplate
	if err := json.Unmarshal(norm, &ct); err != nil {
		p.fail(path, "%s", describeDecodeError(err))
		return nil, false
	}
	var b bytes.Buffer
	if json.Compact(&b, ct.Raw) == nil {
		ct.Raw = b.Bytes()
	}
	return &ct, true
}

// decodeInt decodes a JSON number that is an integer (1, 1.0, 1e3).
func decodeInt(raw []byte) (int, bool) {
	var n json.Number
	if err := json.Unmarshal(raw, &n); err != nil {
		return 0, false
	}
	if i, err := strconv.ParseInt(string(n), 10, 0); err == nil {
		return int(i), true
	}
	f, err := n.Float64()
	if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, false
	}
	return int(f), true
}

// describeDecodeError names the field of a decoding error.
func describeDecodeError(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		f := te.Field
		if f == "" {
			f = "(top level)"
		}
		return fmt.Sprintf("field %s: expected %s, got JSON %s", f, te.Type, te.Value)
	}
	return err.Error()
}
