package gateway

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/utcpd/utcpd/registry"
	"github.com/utcpd/utcpd/utcp"
)

// This file computes pins (the canonical, hashed definitions of a
// manual's tools) and the diff between two of them. See pin.go.

// canonical returns v (a JSON document, or a Go value) encoded as JSON
// with sorted object keys and no insignificant white space; numbers keep
// their text.
func canonical(v any) (json.RawMessage, error) {
	b, ok := v.(json.RawMessage)
	if !ok {
		var err error
		if b, err = json.Marshal(v); err != nil {
			return nil, err
		}
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return json.RawMessage("null"), nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var x any
	if err := dec.Decode(&x); err != nil {
		return nil, err
	}
	// encoding/json writes map keys sorted.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(x); err != nil {
		return nil, err
	}
	return json.RawMessage(bytes.TrimSpace(buf.Bytes())), nil
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// redactedTemplate returns a call template's raw JSON without secrets in
// clear (utcp.Redact: secret-looking values become "[redacted]",
// variable references are kept as the names they are) and without the
// pin field.
func redactedTemplate(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return nil
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) == nil {
		delete(m, "pin")
		if b, err := json.Marshal(m); err == nil {
			raw = b
		}
	}
	return utcp.Redact(raw)
}

// canonicalTool returns the canonical definition of one discovered tool
// (name unqualified): the fields a user approves when they approve a tool.
func canonicalTool(def *utcp.Tool) (json.RawMessage, error) {
	d := map[string]any{"name": def.Name, "description": def.Description}
	if len(def.Inputs) > 0 {
		d["inputs"] = def.Inputs
	}
	if len(def.Outputs) > 0 {
		d["outputs"] = def.Outputs
	}
	if len(def.Tags) > 0 {
		tags := slices.Clone(def.Tags)
		slices.Sort(tags)
		d["tags"] = tags
	}
	if len(def.MCP) > 0 {
		var mcp map[string]json.RawMessage
		if json.Unmarshal(def.MCP, &mcp) == nil {
			if v, ok := mcp["title"]; ok {
				d["title"] = v
			}
			if v, ok := mcp["annotations"]; ok {
				d["annotations"] = v
			}
		}
	}
	if def.ToolCallTemplate != nil && len(def.ToolCallTemplate.Raw) > 0 {
		d["tool_call_template"] = redactedTemplate(def.ToolCallTemplate.Raw)
	}
	return canonical(d)
}

// newPin computes the pin of manual name, discovered as m under the
// manual call template raw.
func newPin(name string, raw json.RawMessage, m *utcp.Manual, now time.Time) (*registry.Pin, error) {
	tc, err := canonical(redactedTemplate(raw))
	if err != nil {
		return nil, fmt.Errorf("pinning manual %q: template: %w", name, err)
	}
	p := &registry.Pin{Manual: name, Template: sha(tc), Pinned: now}
	seen := map[string]bool{}
	for i := range m.Tools {
		def := &m.Tools[i]
		if seen[def.Name] {
			continue // registration keeps the first one
		}
		seen[def.Name] = true
		c, err := canonicalTool(def)
		if err != nil {
			return nil, fmt.Errorf("pinning manual %q: tool %q: %w", name, def.Name, err)
		}
		p.Tools = append(p.Tools, registry.PinnedTool{Name: def.Name, Hash: sha(c), Def: c})
	}
	slices.SortFunc(p.Tools, func(a, b registry.PinnedTool) int { return strings.Compare(a.Name, b.Name) })
	h := sha256.New()
	h.Write([]byte(p.Template))
	for _, t := range p.Tools {
		fmt.Fprintf(h, "\n%s %s", t.Name, t.Hash)
	}
	p.Hash = hex.EncodeToString(h.Sum(nil))
	p.Copy = m
	return p, nil
}

// diffPins returns how to differs from from, per tool in name order.
func diffPins(from, to *registry.Pin) []registry.ToolDiff {
	old := map[string]registry.PinnedTool{}
	for _, t := range from.Tools {
		old[t.Name] = t
	}
	cur := map[string]registry.PinnedTool{}
	for _, t := range to.Tools {
		cur[t.Name] = t
	}
	var names []string
	for n := range old {
		names = append(names, n)
	}
	for n := range cur {
		if _, ok := old[n]; !ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	var out []registry.ToolDiff
	for _, n := range names {
		o, inOld := old[n]
		c, inCur := cur[n]
		switch {
		case !inOld:
			d := registry.ToolDiff{Tool: n, Change: "added"}
			d.Description = lineDiff("", fieldString(c.Def, "description"))
			d.Schema = jsonDiff(nil, c.Def, 200)
			out = append(out, d)
		case !inCur:
			out = append(out, registry.ToolDiff{Tool: n, Change: "removed"})
		case o.Hash != c.Hash:
			out = append(out, toolDiff(n, o.Def, c.Def))
		}
	}
	return out
}

// toolDiff is the diff of one tool present in both pins.
func toolDiff(name string, a, b json.RawMessage) registry.ToolDiff {
	d := registry.ToolDiff{Tool: name, Change: "changed"}
	var ma, mb map[string]json.RawMessage
	_ = json.Unmarshal(a, &ma)
	_ = json.Unmarshal(b, &mb)
	keys := map[string]bool{}
	for k := range ma {
		keys[k] = true
	}
	for k := range mb {
		keys[k] = true
	}
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range keys {
			if !yield(k) {
				return
			}
		}
	}) {
		if bytes.Equal(ma[k], mb[k]) {
			continue
		}
		d.Fields = append(d.Fields, k)
		if k == "description" {
			d.Description = lineDiff(fieldString(a, k), fieldString(b, k))
			continue
		}
		d.Schema = append(d.Schema, jsonDiffAt("/"+escapePointer(k), ma[k], mb[k], 200-len(d.Schema))...)
	}
	return d
}

func fieldString(def json.RawMessage, key string) string {
	var m map[string]any
	_ = json.Unmarshal(def, &m)
	s, _ := m[key].(string)
	return s
}

// lineDiff returns a unified-style diff of two texts, line by line: " "
// for a line both have, "-" for a line of a only, "+" for one of b only.
// Texts over 2000 lines are shown as all removed, then all added.
func lineDiff(a, b string) string {
	if a == b {
		return ""
	}
	la, lb := splitLines(a), splitLines(b)
	var out strings.Builder
	if len(la) > 2000 || len(lb) > 2000 {
		for _, l := range la {
			out.WriteString("-" + l + "\n")
		}
		for _, l := range lb {
			out.WriteString("+" + l + "\n")
		}
		return out.String()
	}
	// Longest common subsequence table, from the end.
	n, m := len(la), len(lb)
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if la[i] == lb[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && la[i] == lb[j]:
			out.WriteString(" " + la[i] + "\n")
			i, j = i+1, j+1
		case j < m && (i == n || lcs[i][j+1] >= lcs[i+1][j]):
			out.WriteString("+" + lb[j] + "\n")
			j++
		default:
			out.WriteString("-" + la[i] + "\n")
			i++
		}
	}
	return out.String()
}

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// jsonDiff returns the differences between two JSON documents, at most
// limit of them.
func jsonDiff(a, b json.RawMessage, limit int) []registry.JSONChange {
	return jsonDiffAt("", a, b, limit)
}

func jsonDiffAt(path string, a, b json.RawMessage, limit int) []registry.JSONChange {
	var va, vb any
	if len(a) > 0 {
		va = decodeNumber(a)
	} else {
		va = absent{}
	}
	if len(b) > 0 {
		vb = decodeNumber(b)
	} else {
		vb = absent{}
	}
	var out []registry.JSONChange
	walkDiff(path, va, vb, &out, limit)
	return out
}

// absent marks a value one side does not have.
type absent struct{}

func decodeNumber(b json.RawMessage) any {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return string(b)
	}
	return v
}

func walkDiff(path string, a, b any, out *[]registry.JSONChange, limit int) {
	if len(*out) >= limit {
		return
	}
	_, aAbs := a.(absent)
	_, bAbs := b.(absent)
	switch {
	case aAbs && bAbs:
		return
	case aAbs:
		*out = append(*out, registry.JSONChange{Path: path, Op: "add", New: enc(b)})
		return
	case bAbs:
		*out = append(*out, registry.JSONChange{Path: path, Op: "remove", Old: enc(a)})
		return
	}
	ma, okA := a.(map[string]any)
	mb, okB := b.(map[string]any)
	if okA && okB {
		keys := map[string]bool{}
		for k := range ma {
			keys[k] = true
		}
		for k := range mb {
			keys[k] = true
		}
		sorted := make([]string, 0, len(keys))
		for k := range keys {
			sorted = append(sorted, k)
		}
		slices.Sort(sorted)
		for _, k := range sorted {
			va, ok := ma[k]
			if !ok {
				va = absent{}
			}
			vb, ok := mb[k]
			if !ok {
				vb = absent{}
			}
			walkDiff(path+"/"+escapePointer(k), va, vb, out, limit)
		}
		return
	}
	sa, okA := a.([]any)
	sb, okB := b.([]any)
	if okA && okB {
		for i := range max(len(sa), len(sb)) {
			var va, vb any = absent{}, absent{}
			if i < len(sa) {
				va = sa[i]
			}
			if i < len(sb) {
				vb = sb[i]
			}
			walkDiff(path+"/"+strconv.Itoa(i), va, vb, out, limit)
		}
		return
	}
	ea, eb := enc(a), enc(b)
	if !bytes.Equal(ea, eb) {
		*out = append(*out, registry.JSONChange{Path: path, Op: "replace", Old: ea, New: eb})
	}
}

func enc(v any) json.RawMessage {
	b, err := canonical(v)
	if err != nil {
		return json.RawMessage("null")
	}
	return b
}

// diffSummary is a one-line account of a diff for logs and the audit log.
func diffSummary(diff []registry.ToolDiff) string {
	parts := make([]string, 0, len(diff))
	for _, d := range diff {
		switch d.Change {
		case "changed":
			parts = append(parts, fmt.Sprintf("%s changed (%s)", d.Tool, strings.Join(d.Fields, ", ")))
		default:
			parts = append(parts, d.Tool+" "+d.Change)
		}
	}
	return strings.Join(parts, "; ")
}
