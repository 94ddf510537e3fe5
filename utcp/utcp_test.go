package utcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/utcpd/utcpd/registry"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/utcp"
)

func TestSanitizeName(t *testing.T) {
	for in, want := range map[string]string{
		"weather_api": "weather_api",
		"my-api.v2":   "my_api_v2",
		"héllo wörld": "h_llo_w_rld",
		"":            "",
	} {
		if got := utcp.SanitizeName(in); got != want {
			t.Errorf("SanitizeName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCodeOf(t *testing.T) {
	sentinel := &utcp.Error{Code: utcp.CodeToolNotFound, Message: "tool not found"}
	cases := []struct {
		err  error
		want utcp.Code
	}{
		{nil, ""},
		{fmt.Errorf("wrapped: %w", sentinel), utcp.CodeToolNotFound},
		{&utcp.ToolError{Message: "boom"}, utcp.CodeToolError},
		{&utcp.TransportError{Status: 502, Err: errors.New("bad gateway")}, utcp.CodeTransportError},
		{fmt.Errorf("x: %w", context.DeadlineExceeded), utcp.CodeTimeout},
		{context.Canceled, utcp.CodeCanceled},
		{errors.New("mystery"), utcp.CodeInternal},
	}
	for _, c := range cases {
		if got := utcp.CodeOf(c.err); got != c.want {
			t.Errorf("CodeOf(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}

// errors.Is matches an *Error by code only against a bare code sentinel
// (Code set, nothing else); any other *Error target matches by identity.
func TestErrorIs(t *testing.T) {
	sentinel := &utcp.Error{Code: utcp.CodeToolNotFound, Message: "tool not found"}
	plain := fmt.Errorf("call: %w", utcp.NewError(utcp.CodeToolNotFound, "no tool %q", "x"))
	wrapping := fmt.Errorf("call: %w", utcp.Errorf(utcp.CodeToolNotFound, "no tool %q: %w", "x", sentinel))
	cases := []struct {
		name   string
		err    error
		target error
		want   bool
	}{
		{"bare code, same code", plain, &utcp.Error{Code: utcp.CodeToolNotFound}, true},
		{"bare code, other code", plain, &utcp.Error{Code: utcp.CodeTimeout}, false},
		{"bare code through a wrapped sentinel", wrapping, &utcp.Error{Code: utcp.CodeToolNotFound}, true},
		{"sentinel, same code, not wrapped", plain, sentinel, false},
		{"sentinel, wrapped", wrapping, sentinel, true},
		{"sentinel itself", sentinel, sentinel, true},
		{"other sentinel of the same code", wrapping, &utcp.Error{Code: utcp.CodeToolNotFound, Message: "tool not found"}, false},
		{"a target with details is not bare", plain, &utcp.Error{Code: utcp.CodeToolNotFound, Details: map[string]any{"k": 1}}, false},
		{"a target with a cause is not bare", plain, &utcp.Error{Code: utcp.CodeToolNotFound, Err: errors.New("x")}, false},
		{"not an *Error", plain, errors.New("no tool"), false},
	}
	for _, c := range cases {
		if got := errors.Is(c.err, c.target); got != c.want {
			t.Errorf("%s: errors.Is(%v, %v) = %v, want %v", c.name, c.err, c.target, got, c.want)
		}
	}
}

// Two package sentinels of one code are distinct errors:
// registry.ErrNotFound (a store has no such record) is not
// transports.ErrNotRegistered (a transport does not hold the manual),
// though both are manual_not_found.
// TestErrorfCauses: Errorf keeps the operand of %w as the cause, every
// operand when there are several, none without %w; the message is the
// same whichever verb prints the error.
func TestErrorfCauses(t *testing.T) {
	a, b := errors.New("a failed"), errors.New("b failed")
	one := utcp.Errorf(utcp.CodeInternal, "doing x: %w", a)
	if one.Error() != "doing x: a failed" || one.Err != a || !errors.Is(one, a) {
		t.Errorf("one cause: %q %v", one, one.Err)
	}
	two := utcp.Errorf(utcp.CodeInternal, "doing x: %w (last error: %w)", a, b)
	if two.Error() != "doing x: a failed (last error: b failed)" || !errors.Is(two, a) || !errors.Is(two, b) {
		t.Errorf("two causes: %q %v", two, two.Err)
	}
	none := utcp.Errorf(utcp.CodeInternal, "doing x: %v", a)
	if none.Error() != one.Error() || none.Err != nil || errors.Is(none, a) {
		t.Errorf("no cause: %q %v", none, none.Err)
	}
	if flat := utcp.NewError(utcp.CodeInternal, "doing x: %v", a); flat.Error() != one.Error() || flat.Err != nil {
		t.Errorf("NewError: %q %v", flat, flat.Err)
	}
}

func TestSentinelsOfOneCodeDiffer(t *testing.T) {
	if utcp.CodeOf(registry.ErrNotFound) != utcp.CodeOf(transports.ErrNotRegistered) {
		t.Fatalf("the test needs two sentinels of one code: %q, %q", utcp.CodeOf(registry.ErrNotFound), utcp.CodeOf(transports.ErrNotRegistered))
	}
	if errors.Is(registry.ErrNotFound, transports.ErrNotRegistered) || errors.Is(transports.ErrNotRegistered, registry.ErrNotFound) {
		t.Error("registry.ErrNotFound and transports.ErrNotRegistered match each other")
	}
	if !errors.Is(registry.NotFound("m"), registry.ErrNotFound) || errors.Is(registry.NotFound("m"), transports.ErrNotRegistered) {
		t.Error("registry.NotFound must match registry.ErrNotFound only")
	}
	for _, err := range []error{registry.ErrNotFound, transports.ErrNotRegistered, registry.NotFound("m")} {
		if !errors.Is(err, &utcp.Error{Code: utcp.CodeManualNotFound}) {
			t.Errorf("%v does not match the bare manual_not_found code", err)
		}
	}
}

func TestCodesAreUniqueAndSnakeCase(t *testing.T) {
	seen := map[utcp.Code]bool{}
	for _, c := range utcp.Codes() {
		if seen[c] {
			t.Errorf("code %q listed twice", c)
		}
		seen[c] = true
		for _, r := range c {
			if !(r == '_' || r >= 'a' && r <= 'z') {
				t.Errorf("code %q is not snake_case", c)
				break
			}
		}
	}
}

func TestClosest(t *testing.T) {
	names := []string{"http_method", "headers", "header_fields", "url", "body_field"}
	if diff := cmp.Diff([]string{"http_method"}, utcp.Closest("http_methd", names, 1)); diff != "" {
		t.Errorf("Closest (-want +got):\n%s", diff)
	}
	if got := utcp.Closest("zzzzzzzz", names, 3); len(got) != 0 {
		t.Errorf("Closest of an unrelated name = %v, want none", got)
	}
}

func TestCallTemplateJSON(t *testing.T) {
	raw := `{"name":"m","call_template_type":"http","url":"https://x","auth":{"auth_type":"api_key","api_key":"$K"},"allowed_communication_protocols":["http","cli"]}`
	var tmpl utcp.CallTemplate
	if err := json.Unmarshal([]byte(raw), &tmpl); err != nil {
		t.Fatal(err)
	}
	if tmpl.Name != "m" || tmpl.Type != "http" || tmpl.Auth.APIKey != "$K" {
		t.Errorf("decoded %+v", tmpl)
	}
	out, err := json.Marshal(tmpl)
	if err != nil || string(out) != raw {
		t.Errorf("re-encoded %s (%v), want the raw template unchanged", out, err)
	}
	if !tmpl.Allows("cli") || tmpl.Allows("mcp") {
		t.Errorf("Allows: explicit list not honoured")
	}
	def := utcp.CallTemplate{Type: "http"}
	if !def.Allows("http") || def.Allows("cli") {
		t.Errorf("Allows: the default must be only the template's own type")
	}
}

func TestAuthMetadata(t *testing.T) {
	manual := &utcp.CallTemplate{Auth: &utcp.Auth{Type: utcp.AuthOAuth2, TokenURL: "https://t", ClientID: "c"}}
	tool := &utcp.CallTemplate{Auth: &utcp.Auth{Type: utcp.AuthOAuth2User, AccessToken: "$T", Ownership: "user", GrantType: "device_code"}}
	if diff := cmp.Diff(utcp.AuthMetadata{Type: "oauth2_user", Ownership: "user", GrantType: "device_code"}, utcp.EffectiveAuth(manual, tool).Metadata()); diff != "" {
		t.Errorf("tool-level auth must override (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(utcp.AuthMetadata{Type: "oauth2", Ownership: "static", GrantType: "client_credentials"}, utcp.EffectiveAuth(manual, &utcp.CallTemplate{}).Metadata()); diff != "" {
		t.Errorf("manual-level defaults (-want +got):\n%s", diff)
	}
	if got := utcp.EffectiveAuth(nil, nil).Metadata(); got != (utcp.AuthMetadata{}) {
		t.Errorf("no auth: %+v", got)
	}
}

func TestRedact(t *testing.T) {
	in := `{"name":"m","url":"https://x/{id}","headers":{"Authorization":"Bearer abc123","X-Api-Key":"${KEY}","Accept":"json"},
	 "auth":{"auth_type":"oauth2","token_url":"https://t","client_id":"cid","client_secret":"s3cr3t"},
	 "env_vars":{"GITHUB_TOKEN":"ghp_xxx","PATH":"/bin"},"nested":{"password":123}}`
	var got map[string]any
	if err := json.Unmarshal(utcp.Redact(json.RawMessage(in)), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"name": "m", "url": "https://x/{id}",
		"headers":  map[string]any{"Authorization": utcp.Redacted, "X-Api-Key": "${KEY}", "Accept": "json"},
		"auth":     map[string]any{"auth_type": "oauth2", "token_url": "https://t", "client_id": "cid", "client_secret": utcp.Redacted},
		"env_vars": map[string]any{"GITHUB_TOKEN": utcp.Redacted, "PATH": "/bin"},
		"nested":   map[string]any{"password": utcp.Redacted},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Redact (-want +got):\n%s", diff)
	}
	if got := string(utcp.Redact(json.RawMessage(`{"headers":{"Authorization":"Bearer ${TOKEN}"}}`))); !strings.Contains(got, "${TOKEN}") {
		t.Errorf("a variable reference was redacted: %s", got)
	}
}
