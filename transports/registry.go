package transports

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/utcpd/utcpd/internal/netguard"
	"github.com/utcpd/utcpd/utcp"
)

// Registry maps call_template_type to the Info of its transport. It is
// safe for concurrent use.
type Registry struct {
	mu    sync.RWMutex
	infos map[string]Info
}

// NewRegistry returns an empty Registry.
func NewRegistry() *Registry { return &Registry{infos: map[string]Info{}} }

// Default is the Registry that transport packages register into from init.
// Only cmd/utcpd and tests should read it; everything else takes a
// *Registry.
var Default = NewRegistry()

// MustRegister registers info in Default and panics on error. Call it only
// from init functions.
func MustRegister(info Info) {
	if err := Default.Register(info); err != nil {
		panic(err)
	}
}

// Register adds info. It fails if the type is empty, already registered,
// or info lacks ParseTemplate or New.
func (r *Registry) Register(info Info) error {
	if info.Type == "" || info.Type != strings.ToLower(info.Type) {
		return fmt.Errorf("transports: invalid type %q", info.Type)
	}
	if info.ParseTemplate == nil || info.New == nil {
		return fmt.Errorf("transports: %s: ParseTemplate and New are required", info.Type)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.infos[info.Type]; ok {
		return fmt.Errorf("transports: %s registered twice", info.Type)
	}
	r.infos[info.Type] = info
	return nil
}

// Lookup returns the Info registered for typ.
func (r *Registry) Lookup(typ string) (Info, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	info, ok := r.infos[typ]
	return info, ok
}

// Types returns the registered types, sorted.
func (r *Registry) Types() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, 0, len(r.infos))
	for t := range r.infos {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// KnownFields returns every field a template of type typ may carry (the
// base fields and the type's own), or nil for an unknown type.
func (r *Registry) KnownFields(typ string) []string {
	info, ok := r.Lookup(typ)
	if !ok {
		return nil
	}
	return KnownFields(info.Template)
}

// ParseTemplate reads call_template_type from raw and hands raw to that
// type's parser. An unknown type is an invalid_template error naming it
// and the valid types.
func (r *Registry) ParseTemplate(raw json.RawMessage) (utcp.CallTemplate, error) {
	var head struct {
		Type *string `json:"call_template_type"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return utcp.CallTemplate{}, invalid("call template is not a JSON object: %v", err)
	}
	if head.Type == nil || *head.Type == "" {
		return utcp.CallTemplate{}, invalid("call template has no call_template_type (valid types: %s)", strings.Join(r.Types(), ", "))
	}
	info, ok := r.Lookup(*head.Type)
	if !ok {
		return utcp.CallTemplate{}, invalid("unknown call_template_type %q (valid types: %s)", *head.Type, strings.Join(r.Types(), ", ")).
			WithDetail("call_template_type", *head.Type).WithDetail("valid_types", r.Types())
	}
	return info.ParseTemplate(raw)
}

func invalid(format string, args ...any) *utcp.Error {
	e := utcp.Errorf(utcp.CodeInvalidTemplate, format, args...)
	if e.Err == nil {
		e.Err = ErrInvalidTemplate
	}
	return e
}

// Validator is implemented by template specs that check themselves after
// decoding.
type Validator interface {
	Validate() error
}

// Checker is implemented by template specs that can tell, with no
// network I/O, whether RegisterManual would refuse the template as it
// stands (variables substituted): a URL whose plain http or ws the
// template may not use, a plaintext target that is not loopback, a file
// that does not exist. Check returns that refusal, a *utcp.Error with the
// code RegisterManual would give it.
type Checker interface {
	Check() error
}

// CheckTemplate runs the checks registration runs on a manual call
// template before it contacts anything: its allowed_hosts must parse, and
// a Spec that is a Checker must pass Check. tmpl is parsed (Spec set)
// with its variables substituted. The gateway runs it before every
// discovery and utcpd config validate on every manual call template of a
// configuration, so that the two judge a template alike. A failure is a
// *utcp.Error: invalid_template, or the code Check gave it.
func (r *Registry) CheckTemplate(tmpl *utcp.CallTemplate) error {
	if tmpl == nil {
		return invalid("no call template")
	}
	if _, err := netguard.ParseHosts(tmpl.AllowedHosts); err != nil {
		return invalid("%s: %v", tmpl.Type, err).WithDetail("field", "allowed_hosts")
	}
	switch tmpl.Pin {
	case "", "off", "warn", "hold":
	default:
		return invalid("%s: pin %q: use \"off\", \"warn\" or \"hold\"", tmpl.Type, tmpl.Pin).WithDetail("field", "pin")
	}
	c, ok := tmpl.Spec.(Checker)
	if !ok {
		return nil
	}
	err := c.Check()
	if err == nil {
		return nil
	}
	if _, ok := errors.AsType[*utcp.Error](err); ok {
		return err
	}
	e := invalid("%s: %v", tmpl.Type, err)
	e.Err = errors.Join(err, ErrInvalidTemplate)
	return e
}

// baseFields are the call-template fields every type has.
var baseFields = []string{"name", "call_template_type", "auth", "allowed_communication_protocols", "allowed_hosts", "pin"}

// DecodeTemplate is the common ParseTemplate: it decodes the base fields
// of raw into a utcp.CallTemplate and the type-specific fields into spec (a
// pointer to the transport's Template struct), calls spec.Validate when spec
// is a Validator, validates the auth block, and lists the fields neither
// knows in Unknown. Every failure is an invalid_template error naming the
// field.
func DecodeTemplate(raw json.RawMessage, spec any) (utcp.CallTemplate, error) {
	var tmpl utcp.CallTemplate
	if err := json.Unmarshal(raw, &tmpl); err != nil {
		return tmpl, invalid("%s", describeJSONError(err))
	}
	if err := json.Unmarshal(raw, spec); err != nil {
		return tmpl, invalid("%s: %s", tmpl.Type, describeJSONError(err))
	}
	if err := ValidateAuth(tmpl.Auth); err != nil {
		return tmpl, invalid("%s: auth: %v", tmpl.Type, err)
	}
	if v, ok := spec.(Validator); ok {
		if err := v.Validate(); err != nil {
			return tmpl, invalid("%s: %v", tmpl.Type, err)
		}
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(raw, &keys); err != nil {
		return tmpl, invalid("call template is not a JSON object: %v", err)
	}
	known := FieldNames(spec)
	for k := range keys {
		if !slices.Contains(baseFields, k) && !slices.Contains(known, k) {
			tmpl.Unknown = append(tmpl.Unknown, k)
		}
	}
	sort.Strings(tmpl.Unknown)
	tmpl.Spec = spec
	return tmpl, nil
}

// KnownFields returns every field a template of the given spec type may
// carry: the base fields and the spec's JSON field names. It serves
// "did you mean" hints for unknown fields.
func KnownFields(spec any) []string {
	return append(slices.Clone(baseFields), FieldNames(spec)...)
}

var fieldCache sync.Map // reflect.Type → []string

// FieldNames returns the JSON names of the exported fields of the struct
// spec points to (embedded structs flattened), cached per type.
func FieldNames(spec any) []string {
	t := reflect.TypeOf(spec)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return nil
	}
	if v, ok := fieldCache.Load(t); ok {
		return v.([]string)
	}
	var names []string
	var walk func(reflect.Type)
	walk = func(t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			if f.Anonymous && f.Type.Kind() == reflect.Struct {
				walk(f.Type)
				continue
			}
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" {
				continue
			}
			if name == "" {
				name = f.Name
			}
			names = append(names, name)
		}
	}
	walk(t)
	fieldCache.Store(t, names)
	return names
}

// ValidateAuth checks an auth block: a known auth_type, the fields that
// type requires, and metadata values that UTCP spec issue #62 allows.
// A nil auth is valid.
func ValidateAuth(a *utcp.Auth) error {
	if a == nil {
		return nil
	}
	switch a.Type {
	case utcp.AuthAPIKey:
		if a.APIKey == "" {
			return errors.New("api_key: field api_key is required")
		}
		switch a.Location {
		case "", "header", "query", "cookie":
		default:
			return fmt.Errorf("api_key: location %q is not one of header, query, cookie", a.Location)
		}
		if strings.ContainsAny(a.VarName, "\r\n") {
			return errors.New("api_key: var_name contains a line break")
		}
	case utcp.AuthBasic:
		if a.Username == "" {
			return errors.New("basic: field username is required")
		}
	case utcp.AuthOAuth2:
		if a.TokenURL == "" || a.ClientID == "" {
			return errors.New("oauth2: fields token_url and client_id are required")
		}
		switch a.GrantType {
		case "", "client_credentials", "authorization_code", "device_code", "jwt_bearer":
		default:
			return fmt.Errorf("oauth2: grant_type %q is not one of client_credentials, authorization_code, device_code, jwt_bearer", a.GrantType)
		}
	case utcp.AuthOAuth2User:
		if a.AccessToken == "" {
			return errors.New("oauth2_user: field access_token is required")
		}
		switch a.GrantType {
		case "", "authorization_code", "device_code":
		default:
			return fmt.Errorf("oauth2_user: grant_type %q is not one of authorization_code, device_code", a.GrantType)
		}
	case "":
		return errors.New("auth_type is required")
	default:
		return fmt.Errorf("unknown auth_type %q (valid: api_key, basic, oauth2, oauth2_user)", a.Type)
	}
	if a.GrantType != "" && a.Type != utcp.AuthOAuth2 && a.Type != utcp.AuthOAuth2User {
		return fmt.Errorf("%s: grant_type only applies to oauth2", a.Type)
	}
	switch a.Ownership {
	case "", "static", "user":
	default:
		return fmt.Errorf("ownership %q is not one of static, user", a.Ownership)
	}
	return nil
}

// describeJSONError turns a decoding error into a message naming the field.
func describeJSONError(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := te.Field
		if field == "" {
			field = "(top level)"
		}
		return fmt.Sprintf("field %s: expected %s, got JSON %s", field, te.Type, te.Value)
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("malformed JSON at byte %d: %v", se.Offset, err)
	}
	return err.Error()
}
