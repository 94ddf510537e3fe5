package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"

	"github.com/utcpd/utcpd/utcp"
)

// schema validates a tool's arguments against its inputs JSON Schema. It is
// compiled on the first call, not at registration, so registering many
// tools stays cheap. A schema that cannot be compiled accepts everything
// (the warning is logged once by the caller of compile).
type schema struct {
	raw  json.RawMessage
	once sync.Once
	sch  *jsonschema.Schema
	err  error

	// simple, built on the first call, is a quick check for the usual
	// shape of an inputs schema (typed properties, required, optionally
	// closed): when it says the arguments are valid they are, and the
	// compiled validator runs only otherwise (for its error, or for what
	// the quick check does not know). nil when the schema has another
	// shape.
	simpleOnce sync.Once
	simple     *simpleSchema
}

// newSchema returns nil when raw accepts any object (absent, {}, or
// {"type":"object"} with no constraints), so the call path skips it.
func newSchema(raw json.RawMessage) *schema {
	if trivialSchema(raw) {
		return nil
	}
	return &schema{raw: raw}
}

func trivialSchema(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "{}" || string(raw) == "null" || string(raw) == "true" {
		return true
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return false
	}
	for k, v := range m {
		switch k {
		case "type":
			if strings.TrimSpace(string(v)) != `"object"` {
				return false
			}
		case "title", "description", "$schema", "$id", "examples", "properties":
			if k == "properties" && strings.TrimSpace(string(v)) != "{}" {
				return false
			}
		default:
			return false
		}
	}
	return true
}

type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("schema references %s: remote schemas are not loaded", url)
}

func (s *schema) compile() {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(s.raw))
	if err != nil {
		s.err = err
		return
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	if err := c.AddResource("utcpd:inputs.json", doc); err != nil {
		s.err = err
		return
	}
	s.sch, s.err = c.Compile("utcpd:inputs.json")
}

// validate checks args against the schema. A failure is invalid_arguments
// listing every problem with its argument's JSON Pointer (argumentsError).
func (s *schema) validate(tool string, args map[string]any) error {
	s.simpleOnce.Do(func() { s.simple = parseSimple(s.raw) })
	if s.simple != nil && s.simple.accepts(args) {
		return nil
	}
	s.once.Do(s.compile)
	if s.err != nil {
		return nil // an uncompilable schema does not block calls
	}
	var v any = args
	if args == nil {
		v = map[string]any{}
	}
	err := s.sch.Validate(v)
	if err == nil {
		return nil
	}
	return argumentsError(tool, err)
}

// Bounds of an invalid_arguments error.
const (
	// maxProblemsShown is how many problems the message lists.
	maxProblemsShown = 10
	// maxProblemsKept is how many go into details.errors.
	maxProblemsKept = 100
)

// problem is one way the arguments fail their schema.
type problem struct {
	InstancePath string `json:"instance_path"` // JSON Pointer into the arguments
	SchemaPath   string `json:"schema_path"`   // JSON Pointer into the schema (keyword)
	Message      string `json:"message"`
}

// argumentsError is invalid_arguments for a failed validation: its
// message lists every problem (up to maxProblemsShown) with the JSON
// Pointer of the argument it concerns, details.errors holds them (up to
// maxProblemsKept) and details.schema_path the first one's keyword.
func argumentsError(tool string, err error) error {
	e := utcp.NewError(utcp.CodeInvalidArguments, "arguments for %s do not match its input schema", tool)
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return e
	}
	ps := problems(ve)
	if len(ps) == 0 {
		return e
	}
	var b strings.Builder
	b.WriteString(e.Message)
	b.WriteString(": ")
	for i, p := range ps[:min(len(ps), maxProblemsShown)] {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(showPath(p.InstancePath))
		b.WriteString(": ")
		b.WriteString(p.Message)
	}
	if len(ps) > maxProblemsShown {
		fmt.Fprintf(&b, "; and %d more (details.errors)", len(ps)-maxProblemsShown)
	}
	e.Message = b.String()
	e.WithDetail("errors", ps[:min(len(ps), maxProblemsKept)])
	e.WithDetail("problems", len(ps))
	e.WithDetail("schema_path", ps[0].SchemaPath)
	return e
}

// showPath is how a message names an argument: its JSON Pointer, or
// "(arguments)" for the arguments object itself.
func showPath(ptr string) string {
	if ptr == "" {
		return "(arguments)"
	}
	return ptr
}

// problems turns a validation error into the problems a caller can act
// on, sorted by argument path. It walks the error tree beside its
// detailed output (which holds the keyword locations as the validator
// travelled them): units that only group others (a schema, a $ref,
// allOf, properties) give no problem of their own; a missing required
// property and a property additionalProperties refuses are reported at
// that property's own path, one each; an anyOf or oneOf that no
// alternative matches is one problem listing what each alternative
// wanted.
func problems(ve *jsonschema.ValidationError) []problem {
	var ps []problem
	walkProblems(ve, *ve.DetailedOutput(), &ps)
	// The validator visits properties in map order: sort for a stable
	// answer.
	slices.SortStableFunc(ps, func(a, b problem) int {
		if c := strings.Compare(a.InstancePath, b.InstancePath); c != 0 {
			return c
		}
		return strings.Compare(a.SchemaPath, b.SchemaPath)
	})
	return slices.Compact(ps)
}

// skipped reports whether the detailed output replaces e's unit by its
// only cause's (a $ref with one failure).
func skipped(e *jsonschema.ValidationError) bool {
	_, ref := e.ErrorKind.(*kind.Reference)
	return ref && len(e.Causes) == 1
}

// walkProblems appends the problems of e, whose detailed output unit is u.
func walkProblems(e *jsonschema.ValidationError, u jsonschema.OutputUnit, ps *[]problem) {
	if len(e.Causes) == 0 || len(u.Errors) != len(e.Causes) {
		// A leaf (or an output this walk does not understand: one
		// problem rather than none).
		msg := "invalid"
		if u.Error != nil {
			msg = u.Error.String()
		}
		switch k := e.ErrorKind.(type) {
		case *kind.Required:
			for _, name := range k.Missing {
				*ps = append(*ps, problem{u.InstanceLocation + "/" + escapePointer(name), u.KeywordLocation, "required but missing"})
			}
			return
		case *kind.AdditionalProperties:
			for _, name := range k.Properties {
				*ps = append(*ps, problem{u.InstanceLocation + "/" + escapePointer(name), u.KeywordLocation, "not allowed (additionalProperties is false)"})
			}
			return
		}
		*ps = append(*ps, problem{u.InstanceLocation, u.KeywordLocation, msg})
		return
	}
	switch e.ErrorKind.(type) {
	case *kind.AnyOf, *kind.OneOf:
		var alts []problem
		for i, c := range e.Causes {
			for skipped(c) {
				c = c.Causes[0]
			}
			walkProblems(c, u.Errors[i], &alts)
		}
		var msgs []string
		for _, a := range alts {
			m := a.Message
			if a.InstancePath != u.InstanceLocation {
				m = a.InstancePath + ": " + m
			}
			msgs = append(msgs, m)
		}
		kw := "anyOf"
		if _, one := e.ErrorKind.(*kind.OneOf); one {
			kw = "oneOf"
		}
		*ps = append(*ps, problem{u.InstanceLocation, u.KeywordLocation,
			"matches none of the " + kw + " alternatives: " + strings.Join(slices.Compact(msgs), " | ")})
		return
	}
	for i, c := range e.Causes {
		for skipped(c) {
			c = c.Causes[0]
		}
		walkProblems(c, u.Errors[i], ps)
	}
}

// escapePointer escapes a property name as a JSON Pointer token.
func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// simpleSchema is an inputs schema made only of
//
//	{"type": "object", "properties": {name: {"type": T or [T...]}, ...},
//	 "required": [...], "additionalProperties": true or false}
//
// plus annotations (title, description, default, examples, $comment,
// $schema, $id), every keyword optional. Its check is sound, not
// complete: accepts reports true only for arguments the full validator
// also accepts, and false whenever it is not sure.
type simpleSchema struct {
	props    map[string][]string // property → allowed JSON types; nil slice: any
	required []string
	closed   bool // additionalProperties: false
}

// annotation reports whether a keyword never affects validation.
func annotation(k string) bool {
	switch k {
	case "title", "description", "default", "examples", "$comment":
		return true
	}
	return false
}

// parseSimple returns raw as a simpleSchema, or nil when it has any other
// keyword or shape.
func parseSimple(raw json.RawMessage) *simpleSchema {
	var top map[string]json.RawMessage
	if json.Unmarshal(raw, &top) != nil || top == nil {
		return nil
	}
	out := &simpleSchema{props: map[string][]string{}}
	for k, v := range top {
		switch {
		case annotation(k), k == "$schema", k == "$id":
		case k == "type":
			types, ok := simpleTypes(v)
			if !ok || !slices.Contains(types, "object") {
				return nil
			}
		case k == "required":
			if json.Unmarshal(v, &out.required) != nil {
				return nil
			}
		case k == "additionalProperties":
			var b bool
			if json.Unmarshal(v, &b) != nil {
				return nil
			}
			out.closed = !b
		case k == "properties":
			var props map[string]map[string]json.RawMessage
			if json.Unmarshal(v, &props) != nil {
				return nil
			}
			for name, p := range props {
				if p == nil {
					return nil
				}
				var types []string
				for pk, pv := range p {
					switch {
					case annotation(pk):
					case pk == "type":
						t, ok := simpleTypes(pv)
						if !ok {
							return nil
						}
						types = t
					default:
						return nil
					}
				}
				out.props[name] = types
			}
		default:
			return nil
		}
	}
	return out
}

// simpleTypes reads a type keyword: one type name or an array of them.
func simpleTypes(v json.RawMessage) ([]string, bool) {
	var one string
	if json.Unmarshal(v, &one) == nil {
		return []string{one}, true
	}
	var many []string
	if json.Unmarshal(v, &many) == nil && len(many) > 0 {
		return many, true
	}
	return nil, false
}

// accepts reports whether args certainly match the schema.
func (s *simpleSchema) accepts(args map[string]any) bool {
	for _, name := range s.required {
		if _, ok := args[name]; !ok {
			return false
		}
	}
	for k, v := range args {
		types, declared := s.props[k]
		if !declared {
			if s.closed {
				return false
			}
			continue
		}
		if types == nil {
			types = anyType // the validator still refuses non-JSON Go values
		}
		ok := false
		for _, t := range types {
			if ok = hasType(v, t); ok {
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// anyType lists every JSON type.
var anyType = []string{"null", "boolean", "string", "object", "array", "number"}

// hasType reports whether v, a decoded JSON value, is certainly of the
// JSON type t. Values of other Go types, and integers written with a
// fraction or an exponent, are left to the full validator.
func hasType(v any, t string) bool {
	switch t {
	case "null":
		return v == nil
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "string":
		_, ok := v.(string)
		return ok
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "number":
		switch x := v.(type) {
		case json.Number:
			return plainNumber(string(x), true)
		case float64:
			return !math.IsNaN(x) && !math.IsInf(x, 0)
		case int, int64, int32:
			return true
		}
	case "integer":
		switch x := v.(type) {
		case json.Number:
			return plainNumber(string(x), false)
		case int, int64, int32:
			return true
		}
	}
	return false
}

// plainNumber reports whether s is a JSON number; with frac false, one
// with neither a fraction nor an exponent.
func plainNumber(s string, frac bool) bool {
	if !frac {
		t := strings.TrimPrefix(s, "-")
		if t == "" || (len(t) > 1 && t[0] == '0') {
			return false
		}
		for i := 0; i < len(t); i++ {
			if t[i] < '0' || t[i] > '9' {
				return false
			}
		}
		return true
	}
	return json.Valid([]byte(s)) && s != "" && (s[0] == '-' || s[0] >= '0' && s[0] <= '9')
}
