package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"

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
// naming the instance path and schema keyword of the first problem.
func (s *schema) validate(tool string, args map[string]any) error {
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
	e := utcp.NewError(utcp.CodeInvalidArguments, "arguments for %s do not match its input schema", tool)
	var ve *jsonschema.ValidationError
	if errors.As(err, &ve) {
		out := ve.BasicOutput()
		var problems []map[string]string
		for _, u := range out.Errors {
			if u.Error == nil {
				continue
			}
			problems = append(problems, map[string]string{
				"instance_path": u.InstanceLocation,
				"schema_path":   u.KeywordLocation,
				"message":       u.Error.String(),
			})
		}
		if len(problems) > 0 {
			e.Message += fmt.Sprintf(": at %q: %s (schema %s)", problems[0]["instance_path"], problems[0]["message"], problems[0]["schema_path"])
			e.WithDetail("errors", problems)
			e.WithDetail("schema_path", problems[0]["schema_path"])
		}
	}
	return e
}
