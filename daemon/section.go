package daemon

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/utcpd/utcpd/api/codemode"
	"github.com/utcpd/utcpd/gateway/ratelimit"
	"github.com/utcpd/utcpd/guard"
	"github.com/utcpd/utcpd/manuals"
	"github.com/utcpd/utcpd/registry"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/utcp"
)

// ReloadableKeys are the keys of the gateway section that apply again on
// SIGHUP: the Settings fields tagged gateway:"reload" (guards,
// bypass_tools, guard_timeout, toolsets). review_timeout and
// audit_retention are read at start only.
var ReloadableKeys = sectionKeys(reflect.TypeFor[Settings](), "reload")

// ApplyGateway overlays the gateway section of cfg (loaded from the file
// cfg.Path, whose bytes are data; nil data gives no line numbers) on s.
// Relative folder paths resolve against cfg.Dir. Every finding names the
// file, the line and the JSON path ("gateway.max_timeout"), in the order
// of the file: wrong types and bad values are errors; an unknown key is a
// warning naming the closest known key, an error when strict. A key set
// to null is skipped. errs empty means s holds the section.
//
// The section's keys and how each is read come from Settings' fields
// (the unknown-key check is transports.FieldNames, as for call
// templates): the json tag is the key; by the field's type, a string is a
// JSON string, a []string an array of strings (each trimmed, empty ones
// dropped), a time.Duration a positive Go duration ("30s") or number of
// seconds, an int or int64 a positive integer (gateway:"max=N" bounds
// it), a json.RawMessage an array kept as written, codemode.Options the
// codemode object (codeModeSection; gateway:"off=Field" names the bool
// field set when it is disabled), MCPSection the mcp object
// (readMCP), and gateway:"keys=Field" the api_keys array of plain and
// named keys (readAPIKeys; the named ones go to Field). gateway:"path" resolves a
// relative path; invalid:"…" is the message of a value that is not good
// (else the reader's own).
func ApplyGateway(s *Settings, cfg *manuals.Config, data []byte, strict bool) (errs, warnings []manuals.Problem) {
	if cfg == nil || len(cfg.Gateway) == 0 {
		return nil, nil
	}
	file := cfg.Path
	lines := gatewayKeyLines(file, data)
	problem := func(key, format string, args ...any) manuals.Problem {
		path := "gateway"
		if key != "" {
			path += "." + key
		}
		return manuals.Problem{Severity: manuals.SeverityError, Code: utcp.CodeInvalidConfig, File: file, Line: lines[key],
			Path: path, Message: fmt.Sprintf(format, args...)}
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(cfg.Gateway, &obj); err != nil || obj == nil {
		return []manuals.Problem{problem("", "the gateway section must be a JSON object")}, nil
	}
	keys := slices.Sorted(maps.Keys(obj))
	slices.SortStableFunc(keys, func(a, b string) int { return cmp.Compare(lines[a], lines[b]) })
	known := transports.FieldNames(s)
	for _, f := range readSection(reflect.ValueOf(s).Elem(), obj, keys, true, cfg.Dir) {
		if f.msg != "" {
			errs = append(errs, problem(f.key, "%s", f.msg))
			continue
		}
		p := problem(f.key, "unknown field %q in the gateway section", f.key)
		p.Kind = manuals.WarnUnknownField
		if c := utcp.Closest(f.key, known, 1); len(c) > 0 {
			p.Suggestion = c[0]
		}
		if strict {
			errs = append(errs, p)
		} else {
			p.Severity, p.Code = manuals.SeverityWarning, ""
			p.Message += "; ignored"
			warnings = append(warnings, p)
		}
	}
	if _, ok := obj["log_format"]; ok {
		if err := CheckLog(s.LogFormat, ""); err != nil {
			errs = append(errs, problem("log_format", "%v", err))
		}
	}
	if _, ok := obj["log_level"]; ok {
		if err := CheckLog("", s.LogLevel); err != nil {
			errs = append(errs, problem("log_level", "%v", err))
		}
	}
	if _, ok := obj["pin_default"]; ok && s.PinDefault != "" && !registry.ValidPinMode(s.PinDefault) {
		errs = append(errs, problem("pin_default", "must be \"off\", \"warn\" or \"hold\", not %q", s.PinDefault))
		s.PinDefault = ""
	}
	return errs, warnings
}

// ApplyReloadable overlays only the keys of cfg's gateway section that
// apply again on SIGHUP (ReloadableKeys: the guard chain's) on s, as
// ApplyGateway reads them; the other keys are the daemon's and are not
// looked at. The error is the first bad value, "file: gateway.key:
// message".
func ApplyReloadable(s *Settings, cfg *manuals.Config) error {
	if cfg == nil || len(cfg.Gateway) == 0 {
		return nil
	}
	var obj map[string]json.RawMessage
	_ = json.Unmarshal(cfg.Gateway, &obj)
	for _, f := range readSection(reflect.ValueOf(s).Elem(), obj, ReloadableKeys, true, cfg.Dir) {
		if f.msg != "" {
			return fmt.Errorf("%s: gateway.%s: %s", cfg.Path, f.key, f.msg)
		}
	}
	return nil
}

// ValidateGuards builds the guard chain of s (the settings of cfg's
// gateway section, cfg loaded from the file cfg.Path whose bytes are
// data) as the daemon would at start, for utcpd config validate, and
// returns the problem of the first entry that does not load: nil when
// the chain loads, or when the guards key itself is malformed
// (ApplyGateway reported that).
func ValidateGuards(cfg *manuals.Config, s *Settings, data []byte) *manuals.Problem {
	if len(s.Guards) == 0 {
		return nil
	}
	vars, err := manuals.NewResolver(cfg, manuals.ResolverOptions{})
	if err == nil {
		_, err = LoadGuards(guard.Default, s.Guards, vars, slog.New(slog.DiscardHandler))
	}
	if err == nil {
		return nil
	}
	path, msg := "gateway.guards", err.Error()
	if ge, ok := errors.AsType[*GuardEntryError](err); ok {
		path, msg = fmt.Sprintf("gateway.guards[%d]", ge.Index), ge.Message()
		if ge.Kind != "" {
			msg = fmt.Sprintf("kind %q: %s", ge.Kind, msg)
		}
	}
	return &manuals.Problem{Severity: manuals.SeverityError, Code: utcp.CodeInvalidConfig, File: cfg.Path,
		Line: gatewayKeyLines(cfg.Path, data)["guards"], Path: path, Message: msg}
}

// codeModeSection is the gateway section's codemode object:
//
//	"codemode": {"enabled": true, "default_timeout": "10s", "max_timeout": "60s",
//	             "default_tool_calls": 50, "max_tool_calls": 200,
//	             "max_instructions": 100000000, "memory_limit": 67108864,
//	             "max_total_memory": 268435456, "max_concurrent": 8}
//
// Every key is optional; an absent one keeps api/codemode's default. Its
// fields are read as Settings' are (see ApplyGateway).
type codeModeSection struct {
	Enabled          bool          `json:"enabled"`
	DefaultTimeout   time.Duration `json:"default_timeout"`
	MaxTimeout       time.Duration `json:"max_timeout"`
	DefaultToolCalls int           `json:"default_tool_calls"`
	MaxToolCalls     int           `json:"max_tool_calls"`
	MaxInstructions  int64         `json:"max_instructions"`
	MemoryLimit      int64         `json:"memory_limit"`
	MaxTotalMemory   int64         `json:"max_total_memory"`
	MaxConcurrent    int           `json:"max_concurrent"`
}

// readCodeMode reads the codemode object v. It returns the options, off
// (enabled is false) and a problem message, "" when v is good: the first
// bad or unknown key (in key order), or a pair of limits that disagree.
// Unlike the gateway section's, an unknown key here is an error.
func readCodeMode(v json.RawMessage) (o codemode.Options, off bool, msg string) {
	var obj map[string]json.RawMessage
	if json.Unmarshal(v, &obj) != nil || obj == nil {
		return o, false, `must be an object such as {"enabled": true, "max_timeout": "60s"}`
	}
	c := codeModeSection{Enabled: true}
	if fs := readSection(reflect.ValueOf(&c).Elem(), obj, slices.Sorted(maps.Keys(obj)), false, ""); len(fs) > 0 {
		if f := fs[0]; f.msg != "" {
			return o, false, fmt.Sprintf("codemode.%s %s", f.key, f.msg)
		}
		return o, false, fmt.Sprintf("unknown field %q in codemode (known: %s)", fs[0].key, strings.Join(transports.FieldNames(&c), ", "))
	}
	o = codemode.Options{DefaultTimeout: c.DefaultTimeout, MaxTimeout: c.MaxTimeout, DefaultToolCalls: c.DefaultToolCalls,
		MaxToolCalls: c.MaxToolCalls, MaxInstructions: c.MaxInstructions, MemoryLimit: c.MemoryLimit,
		MaxTotalMemory: c.MaxTotalMemory, MaxConcurrent: c.MaxConcurrent}
	switch {
	case o.DefaultTimeout > 0 && o.MaxTimeout > 0 && o.DefaultTimeout > o.MaxTimeout:
		return o, false, fmt.Sprintf("codemode.default_timeout %s is longer than codemode.max_timeout %s", o.DefaultTimeout, o.MaxTimeout)
	case o.DefaultToolCalls > 0 && o.MaxToolCalls > 0 && o.DefaultToolCalls > o.MaxToolCalls:
		return o, false, fmt.Sprintf("codemode.default_tool_calls %d is more than codemode.max_tool_calls %d", o.DefaultToolCalls, o.MaxToolCalls)
	}
	if limit := cmp.Or(o.MemoryLimit, codemode.DefaultMemoryLimit); o.MaxTotalMemory > 0 && o.MaxTotalMemory < limit {
		return o, false, fmt.Sprintf("codemode.max_total_memory %d is less than codemode.memory_limit %d", o.MaxTotalMemory, limit)
	}
	return o, !c.Enabled, ""
}

// readMCP reads the mcp object v (MCPSection). It returns the section
// and a problem message, "" when v is good: the first bad or unknown key
// (in key order), or a native name that is not "manual.server".
func readMCP(v json.RawMessage) (m MCPSection, msg string) {
	var obj map[string]json.RawMessage
	if json.Unmarshal(v, &obj) != nil || obj == nil {
		return m, `must be an object such as {"codemode": true, "native_names": ["manual.server"]}`
	}
	if fs := readSection(reflect.ValueOf(&m).Elem(), obj, slices.Sorted(maps.Keys(obj)), false, ""); len(fs) > 0 {
		if f := fs[0]; f.msg != "" {
			return m, fmt.Sprintf("mcp.%s %s", f.key, f.msg)
		}
		return m, fmt.Sprintf("unknown field %q in mcp (known: %s)", fs[0].key, strings.Join(transports.FieldNames(&m), ", "))
	}
	for _, n := range m.NativeNames {
		if manual, server, ok := strings.Cut(n, "."); !ok || manual == "" || server == "" {
			return m, fmt.Sprintf("mcp.native_names: %q is not a \"manual.server\" name", n)
		}
	}
	return m, ""
}

// finding is a key readSection could not use: msg says what is wrong
// with its value; "" means the key is unknown.
type finding struct {
	key, msg string
}

// readSection reads the keys of obj, in the order of keys (keys obj does
// not have are skipped), into the fields of the struct dst by their json
// tags and types (see ApplyGateway); a bad value leaves its field as it
// was. skipNull skips keys set to null; dir resolves gateway:"path"
// fields. It returns the keys it could not use, in order.
func readSection(dst reflect.Value, obj map[string]json.RawMessage, keys []string, skipNull bool, dir string) []finding {
	fields := map[string]reflect.StructField{}
	for _, f := range reflect.VisibleFields(dst.Type()) {
		if name := jsonName(f); name != "" {
			fields[name] = f
		}
	}
	var out []finding
	for _, key := range keys {
		v, ok := obj[key]
		if !ok || skipNull && bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			continue
		}
		f, ok := fields[key]
		if !ok {
			out = append(out, finding{key: key})
			continue
		}
		if f.Type == reflect.TypeFor[[]ratelimit.Rule]() {
			rules, err := ratelimit.ParseRules(v)
			if err != nil {
				out = append(out, finding{key, strings.TrimPrefix(err.Error(), "rate_limits")})
				continue
			}
			dst.FieldByIndex(f.Index).Set(reflect.ValueOf(rules))
			continue
		}
		if f.Type == reflect.TypeFor[MCPSection]() {
			m, msg := readMCP(v)
			if msg != "" {
				out = append(out, finding{key, msg})
				continue
			}
			dst.FieldByIndex(f.Index).Set(reflect.ValueOf(m))
			continue
		}
		if f.Type == reflect.TypeFor[Toolsets]() {
			ts, msg := readToolsets(v)
			if msg != "" {
				out = append(out, finding{key, msg})
				continue
			}
			dst.FieldByIndex(f.Index).Set(reflect.ValueOf(ts))
			continue
		}
		if name, ok := tagOption(f, "keys"); ok {
			plain, named, msg := readAPIKeys(v)
			if msg != "" {
				out = append(out, finding{key, msg})
				continue
			}
			dst.FieldByIndex(f.Index).Set(reflect.ValueOf(plain))
			dst.FieldByName(name).Set(reflect.ValueOf(named))
			continue
		}
		if f.Type == reflect.TypeFor[codemode.Options]() {
			o, off, msg := readCodeMode(v)
			if msg != "" {
				out = append(out, finding{key, msg})
				continue
			}
			dst.FieldByIndex(f.Index).Set(reflect.ValueOf(o))
			if name, ok := tagOption(f, "off"); ok {
				dst.FieldByName(name).SetBool(off)
			}
			continue
		}
		val, msg := readValue(f, v, dir)
		if msg != "" {
			if m, ok := f.Tag.Lookup("invalid"); ok {
				msg = m
			}
			out = append(out, finding{key, msg})
			continue
		}
		dst.FieldByIndex(f.Index).Set(val)
	}
	return out
}

// readValue decodes v for the field f by its type (see ApplyGateway). It
// returns the value, or a message saying what v should be.
func readValue(f reflect.StructField, v json.RawMessage, dir string) (reflect.Value, string) {
	switch f.Type {
	case reflect.TypeFor[time.Duration]():
		d, err := jsonDuration(v)
		if err != nil {
			return reflect.Value{}, err.Error()
		}
		return reflect.ValueOf(d), ""
	case reflect.TypeFor[json.RawMessage]():
		var entries []json.RawMessage
		if json.Unmarshal(v, &entries) != nil {
			return reflect.Value{}, "must be an array"
		}
		return reflect.ValueOf(json.RawMessage(bytes.Clone(v))), ""
	}
	switch f.Type.Kind() {
	case reflect.String:
		var str string
		if json.Unmarshal(v, &str) != nil {
			return reflect.Value{}, "must be a string"
		}
		if _, ok := tagOption(f, "path"); ok && str != "" && dir != "" && !filepath.IsAbs(str) {
			str = filepath.Join(dir, str)
		}
		return reflect.ValueOf(str), ""
	case reflect.Bool:
		var b bool
		if json.Unmarshal(v, &b) != nil {
			return reflect.Value{}, "must be true or false"
		}
		return reflect.ValueOf(b), ""
	case reflect.Int, reflect.Int64:
		n := reflect.New(f.Type)
		if _, zero := tagOption(f, "zero"); zero {
			// gateway:"zero": 0 is a value of its own (no limit).
			if json.Unmarshal(v, n.Interface()) != nil || n.Elem().Int() < 0 {
				return reflect.Value{}, "must be a non-negative integer (0: no limit)"
			}
			return n.Elem(), ""
		}
		if json.Unmarshal(v, n.Interface()) != nil || n.Elem().Int() <= 0 {
			return reflect.Value{}, "must be a positive integer"
		}
		if max, ok := tagOption(f, "max"); ok {
			if m, err := strconv.ParseInt(max, 10, 64); err == nil && n.Elem().Int() > m {
				return reflect.Value{}, fmt.Sprintf("must be an integer from 1 to %d", m)
			}
		}
		return n.Elem(), ""
	case reflect.Slice:
		if f.Type.Elem().Kind() == reflect.String {
			var list []string
			if json.Unmarshal(v, &list) != nil {
				return reflect.Value{}, "must be an array of strings"
			}
			return reflect.ValueOf(NonEmpty(list)), ""
		}
	}
	panic(fmt.Sprintf("daemon: the gateway section cannot read field %s of type %s", f.Name, f.Type))
}

// jsonName is the key of the field f: its json tag's name, "" for
// json:"-" and untagged fields.
func jsonName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	if name == "-" || !f.IsExported() {
		return ""
	}
	return name
}

// tagOption reports whether f's gateway tag has the option name
// ("path", "reload") or name=value ("max=1000"), and the value.
func tagOption(f reflect.StructField, name string) (string, bool) {
	for _, opt := range strings.Split(f.Tag.Get("gateway"), ",") {
		if k, v, _ := strings.Cut(opt, "="); k == name {
			return v, true
		}
	}
	return "", false
}

// sectionKeys returns the keys of the struct type t whose fields have
// the gateway tag option opt, in field order.
func sectionKeys(t reflect.Type, opt string) []string {
	var out []string
	for _, f := range reflect.VisibleFields(t) {
		if _, ok := tagOption(f, opt); ok && jsonName(f) != "" {
			out = append(out, jsonName(f))
		}
	}
	return out
}

// jsonDuration reads a duration written as a Go duration string ("30s",
// "1m30s") or as a number of seconds.
func jsonDuration(v json.RawMessage) (time.Duration, error) {
	var str string
	if json.Unmarshal(v, &str) == nil {
		d, err := time.ParseDuration(str)
		if err != nil || d <= 0 {
			return 0, fmt.Errorf("must be a positive duration such as \"30s\" or \"5m\", got %q", str)
		}
		return d, nil
	}
	var secs float64
	if json.Unmarshal(v, &secs) != nil || secs <= 0 || time.Duration(secs*float64(time.Second)) <= 0 {
		// The last: less than a nanosecond, or too long to count.
		return 0, errors.New("must be a positive duration such as \"30s\" or a number of seconds")
	}
	return time.Duration(secs * float64(time.Second)), nil
}

// NonEmpty returns the strings of in trimmed, without the empty ones
// (never nil).
func NonEmpty(in []string) []string {
	out := []string{}
	for _, s := range in {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// CheckLog validates a log format (text or json) and a log level (debug,
// info, warn or error); "" skips either.
func CheckLog(format, level string) error {
	if format != "" && format != "text" && format != "json" {
		return fmt.Errorf("log format %q: must be text or json", format)
	}
	if level != "" {
		if _, err := ParseLevel(level); err != nil {
			return err
		}
	}
	return nil
}

// ParseLevel returns the slog level named s (debug, info, warn, error, or
// slog's offsets such as "warn+2").
func ParseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("log level %q: must be debug, info, warn or error", s)
	}
	return l, nil
}

// gatewayKeyLines returns the 1-based line of each key of the top-level
// "gateway" object of a configuration file ("" is the line of "gateway"
// itself). Keys it cannot place are absent (line 0).
func gatewayKeyLines(file string, data []byte) map[string]int {
	out := map[string]int{}
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return out
	}
	if trimmed[0] != '{' || strings.HasSuffix(file, ".yaml") || strings.HasSuffix(file, ".yml") {
		yamlGatewayLines(data, out)
		return out
	}
	lineAt := func(off int64) int { return bytes.Count(data[:min(int(off), len(data))], []byte{'\n'}) + 1 }
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return out
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return out
		}
		key, _ := tok.(string)
		if key != "gateway" {
			var skip json.RawMessage
			if dec.Decode(&skip) != nil {
				return out
			}
			continue
		}
		out[""] = lineAt(dec.InputOffset())
		if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
			return out
		}
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return out
			}
			if k, ok := tok.(string); ok {
				if _, seen := out[k]; !seen {
					out[k] = lineAt(dec.InputOffset())
				}
			}
			var skip json.RawMessage
			if dec.Decode(&skip) != nil {
				return out
			}
		}
		return out
	}
	return out
}

var (
	yamlTop = regexp.MustCompile(`^gateway\s*:\s*(#.*)?$`)
	yamlKey = regexp.MustCompile(`^\s+["']?([A-Za-z0-9_\-]+)["']?\s*:`)
)

// yamlGatewayLines places the keys of a block-style YAML gateway mapping.
func yamlGatewayLines(data []byte, out map[string]int) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), len(data)+1)
	in := false
	indent := -1
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if !in {
			if yamlTop.MatchString(line) {
				in = true
				out[""] = n
			}
			continue
		}
		if strings.TrimSpace(line) == "" || strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		if line[0] != ' ' && line[0] != '\t' {
			return
		}
		ind := len(line) - len(strings.TrimLeft(line, " \t"))
		if indent < 0 {
			indent = ind
		}
		if ind != indent {
			continue
		}
		if m := yamlKey.FindStringSubmatch(line); m != nil {
			if _, seen := out[m[1]]; !seen {
				out[m[1]] = n
			}
		}
	}
}
