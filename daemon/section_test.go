package daemon

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/utcpd/utcpd/api/codemode"
	"github.com/utcpd/utcpd/gateway/ratelimit"
	"github.com/utcpd/utcpd/manuals"
)

// TestEveryGatewayKeyReads: every key of Settings reads a good value of
// its type into its field (a field of a type ApplyGateway cannot read
// would panic here, not in a user's daemon), and refuses a value of
// another type with the field's message.
func TestEveryGatewayKeyReads(t *testing.T) {
	dir := t.TempDir()
	samples := map[reflect.Type]string{
		reflect.TypeFor[string]():           `"x"`,
		reflect.TypeFor[[]string]():         `[" a ", ""]`,
		reflect.TypeFor[time.Duration]():    `"2s"`,
		reflect.TypeFor[int]():              `5`,
		reflect.TypeFor[int64]():            `7`,
		reflect.TypeFor[json.RawMessage]():  `[{"kind": "deny_all"}]`,
		reflect.TypeFor[codemode.Options](): `{"max_timeout": "1m", "enabled": false}`,
		reflect.TypeFor[MCPSection]():       `{"codemode": true, "native_names": ["m.srv"]}`,
		reflect.TypeFor[[]ratelimit.Rule](): `[{"tools": "github.*", "rate": "100/m", "burst": 10, "max_concurrent": 4}]`,
		reflect.TypeFor[Toolsets]():         `{"mini": {"include": ["demo.add"], "rename": {"demo.add": "plus"}}}`,
	}
	keys := 0
	for _, f := range reflect.VisibleFields(reflect.TypeFor[Settings]()) {
		key := jsonName(f)
		if key == "" {
			continue
		}
		keys++
		sample, ok := samples[f.Type]
		if v, set := map[string]string{"log_format": `"json"`, "log_level": `"debug"`, "pin_default": `"hold"`}[key]; set {
			sample = v
		}
		if !ok {
			t.Errorf("%s: no sample of type %s; add one", key, f.Type)
			continue
		}
		cfg := &manuals.Config{Path: "c.json", Dir: dir, Gateway: json.RawMessage(`{"` + key + `": ` + sample + `}`)}
		var s Settings
		errs, warnings := ApplyGateway(&s, cfg, nil, true)
		if len(errs)+len(warnings) > 0 {
			t.Errorf("%s = %s: %v %v", key, sample, errs, warnings)
			continue
		}
		got := reflect.ValueOf(s).FieldByIndex(f.Index)
		if got.IsZero() {
			t.Errorf("%s = %s: field %s not set", key, sample, f.Name)
		}
		if f.Type == reflect.TypeFor[codemode.Options]() && (!s.CodeModeOff || s.CodeMode.MaxTimeout != time.Minute) {
			t.Errorf("%s = %s: %+v, off %v", key, sample, s.CodeMode, s.CodeModeOff)
		}
		if _, isPath := tagOption(f, "path"); isPath && got.String() != filepath.Join(dir, "x") {
			t.Errorf("%s: relative path read as %q", key, got.String())
		}

		bad := `{"` + key + `": {"not": "this"}}`
		if f.Type == reflect.TypeFor[codemode.Options]() || f.Type == reflect.TypeFor[MCPSection]() {
			bad = `{"` + key + `": 5}`
		}
		errs, _ = ApplyGateway(&s, &manuals.Config{Path: "c.json", Gateway: json.RawMessage(bad)}, nil, false)
		if len(errs) != 1 || errs[0].Path != "gateway."+key {
			t.Errorf("%s: a value of another type: %v", key, errs)
		} else if msg, ok := f.Tag.Lookup("invalid"); ok && errs[0].Message != msg {
			t.Errorf("%s: message %q, want the field's %q", key, errs[0].Message, msg)
		}
	}
	if keys == 0 {
		t.Error("Settings has no keys")
	}
}

// TestReloadableKeys: the keys tagged reload are the guard chain's and
// the toolsets.
func TestReloadableKeys(t *testing.T) {
	if diff := cmp.Diff([]string{"guards", "bypass_tools", "guard_timeout", "toolsets"}, ReloadableKeys); diff != "" {
		t.Errorf("ReloadableKeys (-want +got):\n%s", diff)
	}
	// ApplyReloadable reads those and nothing else.
	var s Settings
	cfg := &manuals.Config{Path: "c.json", Gateway: json.RawMessage(`{"guard_timeout": "3s", "listen": 5, "nosuch": 1}`)}
	if err := ApplyReloadable(&s, cfg); err != nil || s.GuardTimeout != 3*time.Second || s.Listen != "" {
		t.Errorf("ApplyReloadable: %v %+v", err, s)
	}
	cfg.Gateway = json.RawMessage(`{"bypass_tools": "x"}`)
	if err := ApplyReloadable(&s, cfg); err == nil || !strings.HasPrefix(err.Error(), "c.json: gateway.bypass_tools: must be an array of exact tool names") {
		t.Errorf("a bad reloadable key: %v", err)
	}
}

// TestGatewayDurations: a number of seconds too small or too large to be
// a duration is refused like any non-positive one.
func TestGatewayDurations(t *testing.T) {
	for _, v := range []string{`0`, `-1`, `1e-12`, `1e300`, `"0s"`, `"-1s"`, `"soon"`, `null`} {
		var s Settings
		errs, _ := ApplyGateway(&s, &manuals.Config{Gateway: json.RawMessage(`{"codemode": {"max_timeout": ` + v + `}}`)}, nil, false)
		if len(errs) != 1 || !strings.HasPrefix(errs[0].Message, "codemode.max_timeout must be a positive duration") {
			t.Errorf("%s: %v", v, errs)
		}
	}
	var s Settings
	if errs, _ := ApplyGateway(&s, &manuals.Config{Gateway: json.RawMessage(`{"max_timeout": 1.5}`)}, nil, false); len(errs) != 0 || s.MaxTimeout != 1500*time.Millisecond {
		t.Errorf("1.5 seconds: %v %v", errs, s.MaxTimeout)
	}
}
