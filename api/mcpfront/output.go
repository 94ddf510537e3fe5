package mcpfront

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// outputCheck validates the structuredContent the front builds from a
// tool's result value against the output schema it listed for the tool,
// so that a client that checks structuredContent (the TypeScript SDK
// does) never gets one that fails.
type outputCheck struct {
	sch *jsonschema.Schema
}

// refusingLoader refuses to load remote schemas: a $ref outside the
// schema does not compile, and the tool is listed without its output
// schema.
type refusingLoader struct{}

func (refusingLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("schema references %s: remote schemas are not loaded", url)
}

// newOutputCheck compiles an output schema (JSON Schema 2020-12 unless it
// says otherwise). A schema that does not compile is an error: the front
// then lists the tool without it.
func newOutputCheck(raw json.RawMessage) (*outputCheck, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(refusingLoader{})
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource("utcpd:outputs.json", doc); err != nil {
		return nil, err
	}
	sch, err := c.Compile("utcpd:outputs.json")
	if err != nil {
		return nil, err
	}
	return &outputCheck{sch: sch}, nil
}

// check returns nil when v validates, else what is wrong (the first
// problems, with their instance paths).
func (c *outputCheck) check(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return err
	}
	err = c.sch.Validate(inst)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return err
	}
	var problems []string
	for _, u := range ve.BasicOutput().Errors {
		if u.Error == nil || len(problems) == 3 {
			continue
		}
		at := u.InstanceLocation
		if at == "" {
			at = "/"
		}
		problems = append(problems, at+": "+u.Error.String())
	}
	if len(problems) == 0 {
		return err
	}
	return errors.New(strings.Join(problems, "; "))
}
