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
	"io"
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
// otherwise. Without entries the tools are encoded straight into the
// output (renderDirect).
func render(p Provider, tools []*utcp.Tool, names *Names, opts ExportOptions, entries map[*utcp.Tool]*entry) (json.RawMessage, error) {
	if entries == nil {
		return renderDirect(p, tools, names, opts)
	}
	frags, err := renderFrags(p, tools, names, opts, entries)
	if err != nil {
		return nil, err
	}
	return join(p, frags), nil
}

// renderFrags returns each tool's cached rendering (rendering and storing
// the ones missing), in order.
func renderFrags(p Provider, tools []*utcp.Tool, names *Names, opts ExportOptions, entries map[*utcp.Tool]*entry) ([][]byte, error) {
	v := variant(p, opts)
	frags := make([][]byte, len(tools))
	errs := make([]error, len(tools))
	parallel(len(tools), func(_, start, end int) {
		r := getRewriter()
		defer r.release()
		for i := start; i < end; i++ {
			t := tools[i]
			name := names.Provider(t.Name)
			e := entries[t]
			if e != nil {
				if cached := e.r[v].Load(); cached != nil && cached.name == name {
					frags[i] = cached.data
					continue
				}
			}
			frags[i], errs[i] = r.exportOne(p, t, name, opts)
			if e != nil && errs[i] == nil {
				e.r[v].Store(&rendering{name: name, data: frags[i]})
			}
		}
	})
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("tool %s: %w", tools[i].Name, err)
		}
	}
	return frags, nil
}

// renderDirect is render without a cache: each worker encodes its run of
// tools into blocks of memory (a new block when the last one may not hold
// the next tool, so nothing is copied to grow), and the blocks are joined.
func renderDirect(p Provider, tools []*utcp.Tool, names *Names, opts ExportOptions) (json.RawMessage, error) {
	runs := make([][][]byte, workers(len(tools)))
	bad := make([]int, len(runs))
	errs := make([]error, len(runs))
	parallel(len(tools), func(k, start, end int) {
		r := getRewriter()
		defer r.release()
		var blocks [][]byte
		var b []byte
		for i := start; i < end; i++ {
			t := tools[i]
			// The rewrites at most about double a schema's size.
			if need := 2*(len(t.Inputs)+len(t.Description)) + 256; cap(b)-len(b) < need {
				if len(b) > 0 {
					blocks = append(blocks, b)
				}
				b = make([]byte, 0, max(need, min(1<<20, (end-i)*need)))
			}
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = r.appendTool(b, p, t, names.Provider(t.Name), opts); err != nil {
				bad[k], errs[k] = i, err
				return
			}
		}
		runs[k] = append(blocks, b)
	})
	for k, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("tool %s: %w", tools[bad[k]].Name, err)
		}
	}
	if p == Gemini && len(tools) == 0 {
		return json.RawMessage("[]"), nil
	}
	size := 64
	for _, blocks := range runs {
		for _, b := range blocks {
			size += len(b)
		}
	}
	out := make([]byte, 0, size)
	out = listStart(out, p)
	for _, blocks := range runs {
		for _, b := range blocks {
			out = append(out, b...)
		}
	}
	return listEnd(out, p), nil
}

// listStart opens the list of definitions (for Gemini, inside its one tool).
func listStart(b []byte, p Provider) []byte {
	if p == Gemini {
		b = append(b, `[{"functionDeclarations":`...)
	}
	return append(b, '[')
}

// listEnd closes what listStart opened.
func listEnd(b []byte, p Provider) []byte {
	b = append(b, ']')
	if p == Gemini {
		b = append(b, `}]`...)
	}
	return b
}

// workers returns how many goroutines encode n tools: up to GOMAXPROCS,
// each with at least 256 tools.
func workers(n int) int {
	return max(1, min(runtime.GOMAXPROCS(0), (n+255)/256))
}

// parallel calls fn(k, start, end) for the k-th of workers(n) consecutive
// runs of [0, n), concurrently when there are several.
func parallel(n int, fn func(k, start, end int)) {
	w := workers(n)
	if w == 1 {
		fn(0, 0, n)
		return
	}
	var wg sync.WaitGroup
	chunk := (n + w - 1) / w
	for k, start := 0, 0; start < n; k, start = k+1, start+chunk {
		end := min(start+chunk, n)
		wg.Go(func() { fn(k, start, end) })
	}
	wg.Wait()
}

// join returns the JSON list of the encoded definitions frags, wrapped
// for Gemini in its one tool.
func join(p Provider, frags [][]byte) json.RawMessage {
	b := bytes.NewBuffer(make([]byte, 0, joinedLen(p, frags)))
	writeJoined(b, p, frags)
	return b.Bytes()
}

// joinedLen is the length writeJoined writes.
func joinedLen(p Provider, frags [][]byte) int {
	if p == Gemini && len(frags) == 0 {
		return 2
	}
	n := len(listStart(nil, p)) + len(listEnd(nil, p))
	for i, f := range frags {
		if i > 0 {
			n++
		}
		n += len(f)
	}
	return n
}

// writeJoined writes the export list of frags to w piece by piece: the
// one assembly of an export, whether it is returned whole (join) or
// streamed to a client (Cache.ExportTo).
func writeJoined(w io.Writer, p Provider, frags [][]byte) {
	if p == Gemini && len(frags) == 0 {
		_, _ = io.WriteString(w, "[]")
		return
	}
	_, _ = w.Write(listStart(nil, p))
	for i, f := range frags {
		if i > 0 {
			_, _ = io.WriteString(w, ",")
		}
		_, _ = w.Write(f)
	}
	_, _ = w.Write(listEnd(nil, p))
}

// exportOne encodes one tool's definition: through the fast path (see
// fast.go) when it takes the schema, else through exportOneMap.
func exportOne(p Provider, t *utcp.Tool, name string, opts ExportOptions) ([]byte, error) {
	r := getRewriter()
	defer r.release()
	return r.exportOne(p, t, name, opts)
}

// exportOneMap encodes one tool's definition by decoding the schema into
// map[string]any, rewriting and re-encoding it: the reference the fast
// path must match byte for byte, and its fallback.
func exportOneMap(p Provider, t *utcp.Tool, name string, opts ExportOptions) ([]byte, error) {
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
		params = geminiSchema(m, m, 0, new(geminiBudget))
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
