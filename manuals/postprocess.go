package manuals

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// The tool_post_processor_type values.
const (
	FilterDictType   = "filter_dict"
	LimitStringsType = "limit_strings"
)

// DefaultStringLimit is the limit of a limit_strings post-processor that
// does not set one.
const DefaultStringLimit = 10000

// PostProcessor transforms a tool's result after a call (and each chunk
// of a streamed result), as configured in post_processing.
type PostProcessor interface {
	// Type returns the tool_post_processor_type.
	Type() string
	// Process returns v transformed, for a call of tool (the qualified
	// name, "manual.tool") of manual (the manual's name). v is a
	// JSON-compatible value: map[string]any, []any, string, json.Number,
	// float64, bool, nil, or json.RawMessage (decoded first when the
	// processor applies). Process never mutates v; when the processor does
	// not apply to this tool, or v holds nothing it changes, v itself may
	// be returned.
	Process(tool, manual string, v any) any
}

// ToolFilter selects the calls a post-processor applies to. Empty lists
// select nothing out: a processor with no filters applies to every call.
// Tool names match either the qualified name ("manual.tool") or the name
// without its manual prefix ("tool"). Manual names are compared with the
// real manual name (python-utcp compares the tool template's name, a bug
// utcpd does not copy).
type ToolFilter struct {
	ExcludeTools       []string `json:"exclude_tools,omitempty"`
	OnlyIncludeTools   []string `json:"only_include_tools,omitempty"`
	ExcludeManuals     []string `json:"exclude_manuals,omitempty"`
	OnlyIncludeManuals []string `json:"only_include_manuals,omitempty"`
}

// Applies reports whether a call of tool in manual passes the filter.
func (f ToolFilter) Applies(tool, manual string) bool {
	match := func(list []string) bool {
		if slices.Contains(list, tool) {
			return true
		}
		if manual != "" {
			if short, ok := strings.CutPrefix(tool, manual+"."); ok && slices.Contains(list, short) {
				return true
			}
		}
		return false
	}
	switch {
	case len(f.ExcludeTools) > 0 && match(f.ExcludeTools):
		return false
	case len(f.OnlyIncludeTools) > 0 && !match(f.OnlyIncludeTools):
		return false
	case len(f.ExcludeManuals) > 0 && slices.Contains(f.ExcludeManuals, manual):
		return false
	case len(f.OnlyIncludeManuals) > 0 && !slices.Contains(f.OnlyIncludeManuals, manual):
		return false
	}
	return true
}

// FilterDict is the filter_dict post-processor. It removes object keys
// from results, at any depth:
//
//   - ExcludeKeys drops every member whose key is listed; in arrays,
//     elements that become empty objects or arrays because of that are
//     dropped.
//   - OnlyIncludeKeys keeps listed members (an object value is filtered
//     further, any other value kept whole) and, below unlisted members,
//     only non-empty objects and arrays that still hold listed members;
//     in arrays only such non-empty containers are kept.
//
// When both are set, ExcludeKeys runs first. Scalars at the top level are
// returned as they are.
type FilterDict struct {
	ExcludeKeys     []string `json:"exclude_keys,omitempty"`
	OnlyIncludeKeys []string `json:"only_include_keys,omitempty"`
	ToolFilter
}

// Type returns "filter_dict".
func (f *FilterDict) Type() string { return FilterDictType }

// Process filters v as described on FilterDict when the tool filter
// applies, and returns v unchanged otherwise.
func (f *FilterDict) Process(tool, manual string, v any) any {
	if !f.Applies(tool, manual) || (len(f.ExcludeKeys) == 0 && len(f.OnlyIncludeKeys) == 0) {
		return v
	}
	v = decodeRaw(v)
	if len(f.ExcludeKeys) > 0 {
		v = f.exclude(v)
	}
	if len(f.OnlyIncludeKeys) > 0 {
		v = f.include(v)
	}
	return v
}

func (f *FilterDict) exclude(v any) any {
	switch x := normalizeValue(v).(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if !slices.Contains(f.ExcludeKeys, k) {
				out[k] = f.exclude(e)
			}
		}
		return out
	case []any:
		out := make([]any, 0, len(x))
		for _, e := range x {
			p := f.exclude(e)
			if isEmptyContainer(p) && !isEmptyContainer(normalizeValue(e)) {
				continue // emptied by the filter
			}
			out = append(out, p)
		}
		return out
	default:
		return x
	}
}

func (f *FilterDict) include(v any) any {
	switch x := normalizeValue(v).(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if slices.Contains(f.OnlyIncludeKeys, k) {
				if _, isMap := normalizeValue(e).(map[string]any); isMap {
					out[k] = f.include(e)
				} else {
					out[k] = copyValue(e)
				}
				continue
			}
			if p := f.include(e); isNonEmptyContainer(p) {
				out[k] = p
			}
		}
		return out
	case []any:
		out := make([]any, 0, len(x))
		for _, e := range x {
			if p := f.include(e); isNonEmptyContainer(p) {
				out = append(out, p)
			}
		}
		return out
	default:
		return x
	}
}

// LimitStrings is the limit_strings post-processor: every string value
// in a result, at any depth, is cut to its first Limit characters (Unicode
// code points, never splitting one). Object keys are left alone.
type LimitStrings struct {
	// Limit is the maximum length in characters, DefaultStringLimit when
	// not configured. 0 empties every string.
	Limit int `json:"limit"`
	ToolFilter
}

// Type returns "limit_strings".
func (l *LimitStrings) Type() string { return LimitStringsType }

// Process cuts the strings of v as described on LimitStrings when the
// tool filter applies, and returns v unchanged otherwise.
func (l *LimitStrings) Process(tool, manual string, v any) any {
	if !l.Applies(tool, manual) {
		return v
	}
	return l.limit(decodeRaw(v))
}

func (l *LimitStrings) limit(v any) any {
	switch x := normalizeValue(v).(type) {
	case string:
		return truncateRunes(x, l.Limit)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = l.limit(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = l.limit(e)
		}
		return out
	default:
		return x
	}
}

// truncateRunes returns the first n code points of s.
func truncateRunes(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if len(s) <= n { // n bytes hold at most n code points
		return s
	}
	i := 0
	for c := 0; c < n && i < len(s); c++ {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return s[:i]
}

// ApplyPostProcessors runs every processor of pps on v in order and
// returns the result.
func ApplyPostProcessors(pps []PostProcessor, tool, manual string, v any) any {
	for _, p := range pps {
		v = p.Process(tool, manual, v)
	}
	return v
}

// decodePostProcessor builds the post-processor of type typ from its
// configuration object.
func decodePostProcessor(typ string, raw []byte) (PostProcessor, error) {
	switch typ {
	case FilterDictType:
		var f FilterDict
		if err := json.Unmarshal(raw, &f); err != nil {
			return nil, errors.New(describeDecodeError(err))
		}
		return &f, nil
	case LimitStringsType:
		var aux struct {
			Limit *json.Number `json:"limit"`
			ToolFilter
		}
		if err := json.Unmarshal(raw, &aux); err != nil {
			return nil, errors.New(describeDecodeError(err))
		}
		l := &LimitStrings{Limit: DefaultStringLimit, ToolFilter: aux.ToolFilter}
		if aux.Limit != nil {
			n, ok := decodeInt([]byte(aux.Limit.String()))
			if !ok || n < 0 {
				return nil, fmt.Errorf("limit: must be a non-negative integer, got %s", aux.Limit.String())
			}
			l.Limit = n
		}
		return l, nil
	}
	return nil, fmt.Errorf("unknown tool_post_processor_type %q", typ)
}

// decodeRaw turns a json.RawMessage (or []byte holding JSON) into a
// JSON-compatible value with json.Number numbers; other values pass.
func decodeRaw(v any) any {
	raw, ok := v.(json.RawMessage)
	if !ok {
		return v
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var out any
	if err := dec.Decode(&out); err != nil {
		return v
	}
	return out
}

// normalizeValue widens the common typed containers to map[string]any and
// []any (without copying their elements) so the walkers see one shape.
func normalizeValue(v any) any {
	switch x := v.(type) {
	case map[string]string:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = e
		}
		return out
	case []string:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = e
		}
		return out
	case []map[string]any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = e
		}
		return out
	case json.RawMessage:
		return decodeRaw(x)
	}
	return v
}

// copyValue deep-copies the containers of v.
func copyValue(v any) any {
	switch x := normalizeValue(v).(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = copyValue(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = copyValue(e)
		}
		return out
	default:
		return x
	}
}

func isEmptyContainer(v any) bool {
	switch x := v.(type) {
	case map[string]any:
		return len(x) == 0
	case []any:
		return len(x) == 0
	}
	return false
}

func isNonEmptyContainer(v any) bool {
	switch x := v.(type) {
	case map[string]any:
		return len(x) > 0
	case []any:
		return len(x) > 0
	}
	return false
}
