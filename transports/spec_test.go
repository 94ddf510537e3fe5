package transports

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/utcpd/utcpd/utcp"
)

type specA struct {
	URL string `json:"url"`
}

type specB struct{}

func parseA(raw json.RawMessage) (utcp.CallTemplate, error) {
	tmpl, _, err := DecodeTemplateOf[specA](raw, "aa")
	return tmpl, err
}

// TestDecodeTemplateOfAndSpecOf checks the shared ParseTemplate/SpecOf
// pair: the type check, a spec of the right type used as is, Raw parsed
// on demand with the template's auth taking precedence, and the
// invalid_template errors with their wording.
func TestDecodeTemplateOfAndSpecOf(t *testing.T) {
	raw := json.RawMessage(`{"name":"m","call_template_type":"aa","url":"u","auth":{"auth_type":"basic","username":"a","password":"b"}}`)
	tmpl, spec, err := DecodeTemplateOf[specA](raw, "aa")
	if err != nil || spec.URL != "u" || tmpl.Spec != any(spec) {
		t.Fatalf("DecodeTemplateOf = %+v, %+v, %v", tmpl, spec, err)
	}
	if _, _, err := DecodeTemplateOf[specA](raw, "http"); utcp.CodeOf(err) != utcp.CodeInvalidTemplate || err.Error() == "" ||
		!errors.Is(err, ErrInvalidTemplate) {
		t.Errorf("another type: %v, want invalid_template", err)
	}

	got, auth, err := SpecOf[specA](&tmpl, "aa", parseA)
	if err != nil || got != spec || auth != tmpl.Auth {
		t.Errorf("SpecOf(with Spec) = %v, %v, %v", got, auth, err)
	}
	own := &utcp.Auth{Type: utcp.AuthBasic, Username: "x", Password: "y"}
	got, auth, err = SpecOf[specA](&utcp.CallTemplate{Raw: raw, Auth: own}, "aa", parseA)
	if err != nil || got.URL != "u" || auth != own {
		t.Errorf("SpecOf(Raw, own auth) = %v, %v, %v", got, auth, err)
	}
	_, auth, err = SpecOf[specA](&utcp.CallTemplate{Raw: raw}, "aa", parseA)
	if err != nil || auth == nil || auth.Username != "a" {
		t.Errorf("SpecOf(Raw) auth = %v, %v; want the parsed one", auth, err)
	}

	for _, c := range []struct {
		tmpl *utcp.CallTemplate
		typ  string
		want string
	}{
		{nil, "aa", "aa: no call template: invalid call template"},
		{&utcp.CallTemplate{Spec: &specB{}}, "http", "http: call template holds a *transports.specB, not an http template: invalid call template"},
		{&utcp.CallTemplate{Spec: &specB{}}, "sse", "sse: call template holds a *transports.specB, not an sse template: invalid call template"},
		{&utcp.CallTemplate{Spec: &specB{}}, "udp", "udp: call template holds a *transports.specB, not a udp template: invalid call template"},
		{&utcp.CallTemplate{Spec: &specB{}}, "streamable_http", "streamable_http: call template holds a *transports.specB, not a streamable_http template: invalid call template"},
	} {
		_, _, err := SpecOf[specA](c.tmpl, c.typ, parseA)
		if utcp.CodeOf(err) != utcp.CodeInvalidTemplate || err.Error() != c.want {
			t.Errorf("SpecOf(%v, %s) = %v, want %q", c.tmpl, c.typ, err, c.want)
		}
	}
}
