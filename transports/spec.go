package transports

import (
	"encoding/json"
	"strings"

	"github.com/utcpd/utcpd/utcp"
)

// DecodeTemplateOf is DecodeTemplate for a transport whose spec is a T
// and whose call_template_type is typ: it decodes raw into a new T and
// returns the template (Spec set to that *T) and the spec. A template of
// another call_template_type is an invalid_template error
// ("typ: call_template_type is …, not typ"), returned with the decoded
// template.
func DecodeTemplateOf[T any](raw json.RawMessage, typ string) (utcp.CallTemplate, *T, error) {
	spec := new(T)
	tmpl, err := DecodeTemplate(raw, spec)
	if err != nil {
		return tmpl, spec, err
	}
	if tmpl.Type != typ {
		return tmpl, spec, utcp.Errorf(utcp.CodeInvalidTemplate, "%s: call_template_type is %q, not %q: %w", typ, tmpl.Type, typ, ErrInvalidTemplate)
	}
	return tmpl, spec, nil
}

// SpecOf returns the *T spec of tmpl (a template of call_template_type
// typ) and the auth to use with it. When tmpl carries its Spec, that and
// tmpl.Auth; when only Raw, the spec parse(tmpl.Raw) yields (parse is the
// transport's ParseTemplate, which must set Spec to a *T) with tmpl.Auth,
// or the parsed auth when tmpl.Auth is nil. A nil tmpl, a Spec of another
// type and a parse failure are invalid_template errors.
func SpecOf[T any](tmpl *utcp.CallTemplate, typ string, parse func(json.RawMessage) (utcp.CallTemplate, error)) (*T, *utcp.Auth, error) {
	if tmpl == nil {
		return nil, nil, utcp.Errorf(utcp.CodeInvalidTemplate, "%s: no call template: %w", typ, ErrInvalidTemplate)
	}
	if spec, ok := tmpl.Spec.(*T); ok && spec != nil {
		return spec, tmpl.Auth, nil
	}
	if tmpl.Spec != nil {
		return nil, nil, utcp.Errorf(utcp.CodeInvalidTemplate, "%s: call template holds a %T, not %s %s template: %w", typ, tmpl.Spec, indefinite(typ), typ, ErrInvalidTemplate)
	}
	parsed, err := parse(tmpl.Raw)
	if err != nil {
		return nil, nil, err
	}
	auth := tmpl.Auth
	if auth == nil {
		auth = parsed.Auth
	}
	return parsed.Spec.(*T), auth, nil
}

// indefinite is the article before a call_template_type read aloud:
// "an" before a vowel and before the acronyms http and sse (spelled out,
// they start with a vowel sound), "a" otherwise.
func indefinite(typ string) string {
	if typ == "http" || typ == "sse" || strings.ContainsAny(typ[:min(1, len(typ))], "aeio") {
		return "an"
	}
	return "a"
}
