// Package llm adapts utcpd's tools to the function-calling formats of LLM
// APIs (OpenAI, Anthropic, Gemini): exporting the tools as each provider's
// tool definitions, and executing the tool calls a model made through the
// gateway, answering with the provider's own result messages.
//
// Routes (mounted by Register, behind the REST front's API keys):
//
//	GET  /v1/export/{provider}             the tools in the provider's format (q, tags, limit, strict, codemode)
//	POST /v1/llm/{provider}/tool_calls     run a model's tool calls; reply with the result messages
//
// With Options.CodeMode the export starts with the tool codemode.run
// (function name codemode__run; leave it out with ?codemode=false) and
// the tool-call route runs it through the CodeMode runner.
//
// provider is openai, anthropic or gemini. Function names follow Names
// (qualified "manual.tool" → "manual__tool"); schemas are rewritten per
// provider (see Export). The export route keeps each tool's rendering in
// a Cache, so repeated polling re-renders only tools that changed.
package llm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"runtime"
	"sync"

	"github.com/utcpd/utcpd/utcp"
)

// Provider names an LLM API's function-calling format.
type Provider string

// The providers.
const (
	OpenAI    Provider = "openai"
	Anthropic Provider = "anthropic"
	Gemini    Provider = "gemini"
)

// Providers lists every provider.
var Providers = []Provider{OpenAI, Anthropic, Gemini}

// ParseProvider returns the provider named s, or an error naming the
// accepted ones.
func ParseProvider(s string) (Provider, error) {
	switch p := Provider(s); p {
	case OpenAI, Anthropic, Gemini:
		return p, nil
	}
	return "", fmt.Errorf("unknown provider %q: want openai, anthropic or gemini", s)
}

// ExportOptions tune Export.
type ExportOptions struct {
	// Strict, for OpenAI, marks each function strict and rewrites its
	// schema as OpenAI's strict mode requires. Other providers ignore it.
	Strict bool
}

// OpenAITool is a tool definition of OpenAI's Chat Completions API.
type OpenAITool struct {
	// Type is always "function".
	Type string `json:"type"`
	// Function is the function definition.
	Function OpenAIFunction `json:"function"`
}

// OpenAIFunction is the function of an OpenAITool.
type OpenAIFunction struct {
	// Name is the function name (see Names).
	Name string `json:"name"`
	// Description is the tool's description.
	Description string `json:"description,omitempty"`
	// Parameters is the JSON Schema of the arguments.
	Parameters json.RawMessage `json:"parameters"`
	// Strict is set in strict mode.
	Strict bool `json:"strict,omitempty"`
}

// AnthropicTool is a tool definition of Anthropic's Messages API.
type AnthropicTool struct {
	// Name is the function name (see Names).
	Name string `json:"name"`
	// Description is the tool's description.
	Description string `json:"description,omitempty"`
	// InputSchema is the JSON Schema of the input (type object).
	InputSchema json.RawMessage `json:"input_schema"`
}

// GeminiTool is one tool of Gemini's generateContent API, holding every
// function declaration.
type GeminiTool struct {
	// FunctionDeclarations are the functions.
	FunctionDeclarations []GeminiFunction `json:"functionDeclarations"`
}

// GeminiFunction is a function declaration of Gemini.
type GeminiFunction struct {
	// Name is the function name (see Names).
	Name string `json:"name"`
	// Description is the tool's description.
	Description string `json:"description,omitempty"`
	// Parameters is the OpenAPI-subset schema of the arguments; absent
	// when the function takes none.
	Parameters json.RawMessage `json:"parameters,omitempty"`
}

// Export returns the JSON document of tools in p's format, named by names
// (nil: computed from tools alone):
//
//   - openai: a list of OpenAITool. Parameters is the input schema with
//     type object and properties ensured and $schema/$id removed. With
//     opts.Strict, strict is true and the schema is rewritten: every
//     object gets additionalProperties false and all its properties in
//     required, originally optional ones made nullable (type [T, "null"],
//     null added to enum, or a null alternative in anyOf); oneOf becomes
//     anyOf; keywords strict mode rejects (default, examples, allOf, not,
//     if/then/else, patternProperties, minLength, maxLength,
//     minProperties, maxProperties, uniqueItems, prefixItems, ...) and
//     unsupported formats are removed.
//   - anthropic: a list of AnthropicTool. input_schema is the input schema
//     with type object and properties ensured and $schema/$id removed.
//   - gemini: a list of one GeminiTool holding every declaration (no
//     tools: an empty list). The schema is reduced to Gemini's subset (see
//     geminiSchema); a function without properties has no parameters.
//
// Tools are converted in parallel, every one of them on every call (a
// Cache keeps the conversions across calls). A tool whose input schema is
// not a JSON object is an error.
func Export(p Provider, tools []*utcp.Tool, names *Names, opts ExportOptions) (json.RawMessage, error) {
	if _, err := ParseProvider(string(p)); err != nil {
		return nil, err
	}
	if names == nil {
		qs := make([]string, len(tools))
		for i, t := range tools {
			qs[i] = t.Name
		}
		names = NewNames(qs)
	}
	return render(p, tools, names, opts, nil)
}

// render encodes tools in p's format. entries, when not nil, holds the
// cached renderings (see Cache): a tool with an entry uses its rendering
// when that was made with the tool's current name, and stores a new one
// otherwise.
func render(p Provider, tools []*utcp.Tool, names *Names, opts ExportOptions, entries map[*utcp.Tool]*entry) (json.RawMessage, error) {
	v := variant(p, opts)
	frags := make([][]byte, len(tools))
	errs := make([]error, len(tools))
	one := func(i int) {
		t := tools[i]
		name := names.Provider(t.Name)
		e := entries[t]
		if e != nil {
			if r := e.r[v].Load(); r != nil && r.name == name {
				frags[i] = r.data
				return
			}
		}
		frags[i], errs[i] = exportOne(p, t, name, opts)
		if e != nil && errs[i] == nil {
			e.r[v].Store(&rendering{name: name, data: frags[i]})
		}
	}
	workers := min(runtime.GOMAXPROCS(0), (len(tools)+255)/256)
	if workers <= 1 {
		for i := range tools {
			one(i)
		}
	} else {
		var wg sync.WaitGroup
		chunk := (len(tools) + workers - 1) / workers
		for start := 0; start < len(tools); start += chunk {
			end := min(start+chunk, len(tools))
			wg.Go(func() {
				for i := start; i < end; i++ {
					one(i)
				}
			})
		}
		wg.Wait()
	}
	size := 64
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("tool %s: %w", tools[i].Name, err)
		}
		size += len(frags[i]) + 1
	}
	var b bytes.Buffer
	b.Grow(size)
	if p == Gemini {
		if len(tools) == 0 {
			return json.RawMessage("[]"), nil
		}
		b.WriteString(`[{"functionDeclarations":`)
	}
	b.WriteByte('[')
	for i, f := range frags {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(f)
	}
	b.WriteByte(']')
	if p == Gemini {
		b.WriteString(`}]`)
	}
	return b.Bytes(), nil
}

// exportOne encodes one tool's definition.
func exportOne(p Provider, t *utcp.Tool, name string, opts ExportOptions) ([]byte, error) {
	strict := p == OpenAI && opts.Strict
	if p != Gemini && !strict {
		if raw, ok := passThrough(t.Inputs); ok {
			var params bytes.Buffer
			params.Grow(len(raw))
			if err := json.Compact(&params, raw); err != nil {
				return nil, err
			}
			return appendFunction(make([]byte, 0, params.Len()+len(name)+len(t.Description)+64), p, name, t.Description, params.Bytes(), false), nil
		}
	}
	m, err := decodeSchema(t.Inputs)
	if err != nil {
		return nil, err
	}
	var params map[string]any
	switch p {
	case OpenAI:
		params = objectRoot(m)
		if strict {
			params, _ = openAIStrict(params, 0).(map[string]any)
		}
	case Anthropic:
		params = objectRoot(m)
	default:
		params = geminiSchema(m, m, 0)
		params["type"] = "OBJECT"
		if props, _ := params["properties"].(map[string]any); len(props) == 0 {
			params = nil
		}
	}
	var raw []byte
	switch {
	case params != nil:
		if raw, err = appendJSON(make([]byte, 0, len(t.Inputs)+64), params); err != nil {
			return nil, err
		}
	case p != Gemini:
		raw = []byte("null") // not reached: the roots above are objects
	}
	return appendFunction(make([]byte, 0, len(raw)+len(name)+len(t.Description)+64), p, name, t.Description, raw, strict), nil
}

// passThrough returns the schema unchanged when it already is a root
// OpenAI and Anthropic accept as it is: an object with type "object" and
// properties, and neither $schema nor $id.
func passThrough(raw json.RawMessage) (json.RawMessage, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return nil, false
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(raw, &top) != nil {
		return nil, false
	}
	if string(top["type"]) != `"object"` || len(top["properties"]) == 0 || top["properties"][0] != '{' {
		return nil, false
	}
	if _, ok := top["$schema"]; ok {
		return nil, false
	}
	if _, ok := top["$id"]; ok {
		return nil, false
	}
	return raw, true
}

// marshal encodes v without HTML escaping.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
