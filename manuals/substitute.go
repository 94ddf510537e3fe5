package manuals

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/utcpd/utcpd/utcp"
)

// NoSubstitute lists the call-template fields whose values are never
// variable-substituted, with the reason for each. A '$' in them belongs
// to another language (shell, GraphQL) or is data, not a UTCP variable:
//
//	commands[].command     cli: shell script text ($CMD_0_OUTPUT, $HOME, $1)
//	query                  graphql: the document's own $variables
//	message                websocket: message template sent as written
//	message_template       message template (lua-utcp's name)
//	request_data_template  tcp/udp: request template sent as written
//	content                text: an inline manual or OpenAPI document; its
//	                       tools' templates are substituted per call, and
//	                       its schemas hold "$schema"/"$id"
//	inputs, outputs        JSON Schemas ("$ref", "$defs", "$schema")
//	description            documentation text
//
// Entries are paths from the template's top level: field names joined by
// '.', with "[]" standing for any array element. A value whose path
// matches an entry is skipped together with everything inside it. Only
// these fields are skipped; every other string value of a template (url,
// headers, auth, env_vars, mcp server configs, ...) is substituted.
// Modify it only during initialisation.
var NoSubstitute = []string{
	"commands[].command",
	"query",
	"message",
	"message_template",
	"request_data_template",
	"content",
	"inputs",
	"outputs",
	"description",
}

// HasVariables reports, cheaply and conservatively, whether raw might
// contain a variable reference or a `$$` escape: it looks for a '$'
// followed by '{', '$', '\' or a character of [A-Za-z0-9_], or an escaped
// dollar (\u0024), anywhere, skip-list fields included. false guarantees
// that Substitute returns raw unchanged and RequiredVariables returns
// nil.
func HasVariables(raw []byte) bool {
	for i := bytes.IndexByte(raw, '$'); i >= 0; {
		if i+1 < len(raw) {
			switch c := raw[i+1]; {
			case c == '{' || c == '$' || c == '\\' || isWordByte(c):
				return true
			}
		}
		j := bytes.IndexByte(raw[i+1:], '$')
		if j < 0 {
			break
		}
		i += 1 + j
	}
	return bytes.Contains(raw, []byte(`\u0024`))
}

// Substitute replaces variable references in the string values of the
// call template raw (never in keys, never in the NoSubstitute fields, and
// not in a string matching python-utcp's $ref rule: one containing "$ref"
// not followed by [A-Za-z0-9_]). A reference is ${NAME} or $NAME, NAME
// matching [A-Za-z0-9_]+; `$$` stands for a literal '$'; any other '$' is
// kept. Each NAME is looked up in r only under Namespace(namespace, NAME)
// (the bare NAME when namespace is ""), with no fallback to the bare name.
// With a namespace, a NAME that CrossNamespace refuses (one starting with
// '_', which could name another manual's variable) is never looked up:
// the template is an invalid_template error (see CheckNamespace).
//
// When raw has nothing to substitute (HasVariables is false, or every
// reference is in a skipped field) raw itself is returned; otherwise the
// result is raw with only the changed strings re-encoded. A reference
// that does not resolve is a *utcp.Error with code variable_not_found
// whose message and Details ("variable", "variables", "path",
// "namespace") name the namespaced key(s) and where they are used; values
// never appear in errors. raw that is not valid JSON is an
// invalid_template error (only checked when raw has a '$').
func Substitute(raw json.RawMessage, namespace string, r *Resolver) (json.RawMessage, error) {
	if !HasVariables(raw) {
		return raw, nil
	}
	if !json.Valid(raw) {
		return nil, utcp.NewError(utcp.CodeInvalidTemplate, "call template is not valid JSON")
	}
	type miss struct{ key, ref, path string }
	var missing, cross []miss
	out := walkStrings(raw, func(s string, w *walker) (string, bool) {
		v, changed, ms := expand(s, func(name string) (string, bool) {
			if CrossNamespace(namespace, name) {
				return "", false
			}
			return r.Lookup(Namespace(namespace, name))
		})
		for _, m := range ms {
			x := miss{Namespace(namespace, m.name), m.ref, w.path()}
			if CrossNamespace(namespace, m.name) {
				cross = append(cross, x)
			} else {
				missing = append(missing, x)
			}
		}
		return v, changed
	})
	if len(cross) > 0 {
		return nil, crossNamespaceError(namespace, cross[0].ref, cross[0].path)
	}
	if len(missing) == 0 {
		return out, nil
	}
	keys := make([]string, 0, len(missing))
	for _, m := range missing {
		keys = append(keys, m.key)
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	m := missing[0]
	where := ""
	if namespace != "" {
		where = fmt.Sprintf(" of manual %s", utcp.SanitizeName(namespace))
	}
	var msg string
	if len(keys) == 1 {
		msg = fmt.Sprintf("variable %s not found (referenced as %s at %s%s); set %s in the config variables, a dotenv file or the environment",
			m.key, m.ref, orTop(m.path), where, m.key)
	} else {
		parts := make([]string, len(missing))
		for i, x := range missing {
			parts[i] = fmt.Sprintf("%s (%s at %s)", x.key, x.ref, orTop(x.path))
		}
		msg = fmt.Sprintf("variables not found%s: %s; set them in the config variables, a dotenv file or the environment",
			where, strings.Join(parts, ", "))
	}
	e := utcp.NewError(utcp.CodeVariableNotFound, "%s", msg).
		WithDetail("variable", m.key).WithDetail("variables", keys).WithDetail("path", m.path)
	if namespace != "" {
		e.WithDetail("namespace", utcp.SanitizeName(namespace))
	}
	return nil, e
}

// CheckNamespace returns an invalid_template error for the first variable
// reference of the call template raw (under the same rules as Substitute)
// that CrossNamespace refuses for namespace, and nil when there is none or
// raw is not valid JSON. The gateway runs it on every template at
// registration, so a template that could read another manual's
// variables is refused before anything is resolved or dispatched.
func CheckNamespace(raw json.RawMessage, namespace string) error {
	if namespace == "" || !HasVariables(raw) || !json.Valid(raw) {
		return nil
	}
	var err error
	walkStrings(raw, func(s string, w *walker) (string, bool) {
		if err != nil {
			return "", false
		}
		_, _, ms := expand(s, func(string) (string, bool) { return "", false })
		for _, m := range ms {
			if CrossNamespace(namespace, m.name) {
				err = crossNamespaceError(namespace, m.ref, w.path())
				break
			}
		}
		return "", false
	})
	return err
}

func crossNamespaceError(namespace, ref, path string) error {
	ns := utcp.SanitizeName(namespace)
	return utcp.NewError(utcp.CodeInvalidTemplate,
		"variable reference %s at %s of manual %s could resolve into another manual's namespace (a name starting with '_' is read as part of a longer manual name); rename the variable so that it starts with a letter or digit",
		ref, orTop(path), ns).WithDetail("reference", ref).WithDetail("path", path).WithDetail("namespace", ns)
}

// RequiredVariables returns the keys, namespaced as Substitute looks them
// up, that the call template raw refers to: sorted, without duplicates,
// under the same rules as Substitute (keys, NoSubstitute fields, $ref
// strings, `$$` escapes and references CrossNamespace refuses do not
// count). It returns nil when there are
// none or raw is not valid JSON.
func RequiredVariables(raw json.RawMessage, namespace string) []string {
	if !HasVariables(raw) || !json.Valid(raw) {
		return nil
	}
	var keys []string
	walkStrings(raw, func(s string, _ *walker) (string, bool) {
		_, _, ms := expand(s, func(string) (string, bool) { return "", false })
		for _, m := range ms {
			if !CrossNamespace(namespace, m.name) {
				keys = append(keys, Namespace(namespace, m.name))
			}
		}
		return "", false
	})
	slices.Sort(keys)
	return slices.Compact(keys)
}

// reference is a variable reference in a string.
type reference struct {
	name string // NAME
	ref  string // as written: ${NAME} or $NAME
}

// expand substitutes the references in s using lookup. It returns the new
// string, whether anything changed, and the references lookup did not
// resolve (they are kept as written). Strings that match the $ref rule
// are returned unchanged.
func expand(s string, lookup func(name string) (string, bool)) (string, bool, []reference) {
	if strings.IndexByte(s, '$') < 0 || hasRef(s) {
		return s, false, nil
	}
	var b strings.Builder
	var missing []reference
	changed := false
	last := 0
	for i := 0; i < len(s); {
		if s[i] != '$' {
			i++
			continue
		}
		if i+1 < len(s) && s[i+1] == '$' { // "$$" is a literal '$'
			b.WriteString(s[last : i+1])
			i += 2
			last = i
			changed = true
			continue
		}
		name, end := "", i
		if i+1 < len(s) && s[i+1] == '{' {
			j := i + 2
			for j < len(s) && isWordByte(s[j]) {
				j++
			}
			if j > i+2 && j < len(s) && s[j] == '}' {
				name, end = s[i+2:j], j+1
			}
		} else {
			j := i + 1
			for j < len(s) && isWordByte(s[j]) {
				j++
			}
			if j > i+1 {
				name, end = s[i+1:j], j
			}
		}
		if name == "" { // a lone '$'
			i++
			continue
		}
		v, ok := lookup(name)
		if !ok {
			missing = append(missing, reference{name: name, ref: s[i:end]})
			i = end
			continue
		}
		b.WriteString(s[last:i])
		b.WriteString(v)
		i, last = end, end
		changed = true
	}
	if !changed {
		return s, false, missing
	}
	b.WriteString(s[last:])
	return b.String(), true, missing
}

// hasRef applies python-utcp's rule `\$ref(?![A-Za-z0-9_])`.
func hasRef(s string) bool {
	for i := 0; i < len(s); {
		j := strings.Index(s[i:], "$ref")
		if j < 0 {
			return false
		}
		k := i + j + 4
		if k >= len(s) || !isWordByte(s[k]) {
			return true
		}
		i = i + j + 1
	}
	return false
}

func isWordByte(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// walkFrame is one open container during walkStrings.
type walkFrame struct {
	obj       bool
	skip      bool // inside a NoSubstitute field
	patLen    int  // length of the walker's pattern path for this container
	key       []byte
	idx       int // index of the current element (arrays)
	expectKey bool
}

// walker scans a valid JSON document for string values.
type walker struct {
	raw   []byte
	stack []walkFrame
	pat   []byte // pattern path of the current value ("commands[].command")
}

// walkStrings calls fn for every string value of raw, which must be valid
// JSON, that contains a '$' and is not inside a NoSubstitute field. When
// fn reports a change the string is replaced. It returns raw itself when
// nothing changed. It is a plain byte scanner: substitution runs on every
// call of a tool whose template holds a variable.
func walkStrings(raw []byte, fn func(s string, w *walker) (string, bool)) []byte {
	w := &walker{raw: raw, stack: make([]walkFrame, 0, 8), pat: make([]byte, 0, 64)}
	var out []byte
	last := 0
	for i := 0; i < len(raw); {
		switch c := raw[i]; c {
		case ' ', '\t', '\r', '\n', ',', ':':
			i++
		case '}', ']':
			if len(w.stack) > 0 {
				w.stack = w.stack[:len(w.stack)-1]
			}
			i++
		case '{', '[':
			skip := w.enterValue()
			w.stack = append(w.stack, walkFrame{obj: c == '{', skip: skip, patLen: len(w.pat), expectKey: true})
			i++
		case '"':
			end := scanString(raw, i)
			if n := len(w.stack); n > 0 && w.stack[n-1].obj && w.stack[n-1].expectKey {
				w.stack[n-1].key = raw[i:end]
				w.stack[n-1].expectKey = false
				i = end
				continue
			}
			skip := w.enterValue()
			span := raw[i:end]
			if !skip && (bytes.IndexByte(span, '$') >= 0 || bytes.Contains(span, []byte(`\u0024`))) {
				if s := unquote(span); strings.IndexByte(s, '$') >= 0 {
					if repl, changed := fn(s, w); changed {
						if out == nil {
							out = make([]byte, 0, len(raw)+64)
						}
						out = append(out, raw[last:i]...)
						out = appendQuoted(out, repl)
						last = end
					}
				}
			}
			i = end
		default: // number, true, false, null
			w.enterValue()
			for i < len(raw) && !isDelimiter(raw[i]) {
				i++
			}
		}
	}
	if out == nil {
		return raw
	}
	return append(out, raw[last:]...)
}

// enterValue advances the innermost container to a new value, sets the
// pattern path to the value's, and reports whether the value is skipped.
func (w *walker) enterValue() bool {
	n := len(w.stack)
	if n == 0 {
		w.pat = w.pat[:0]
		return false
	}
	top := &w.stack[n-1]
	w.pat = w.pat[:top.patLen]
	if top.obj {
		top.expectKey = true
	} else {
		top.idx++
	}
	if top.skip {
		return true
	}
	if top.obj {
		if len(w.pat) > 0 {
			w.pat = append(w.pat, '.')
		}
		key := top.key
		if len(key) >= 2 {
			key = key[1 : len(key)-1]
		}
		if bytes.IndexByte(key, '\\') >= 0 {
			w.pat = append(w.pat, unquote(top.key)...)
		} else {
			w.pat = append(w.pat, key...)
		}
	} else {
		w.pat = append(w.pat, "[]"...)
	}
	for _, p := range NoSubstitute {
		if string(w.pat) == p {
			return true
		}
	}
	return false
}

// path returns the JSON path of the value being visited.
func (w *walker) path() string {
	p := ""
	for _, f := range w.stack {
		if f.obj {
			p = joinKey(p, unquote(f.key))
		} else {
			p = joinIndex(p, f.idx-1)
		}
	}
	return p
}

// scanString returns the index just past the JSON string starting at
// raw[i] (a '"').
func scanString(raw []byte, i int) int {
	for j := i + 1; j < len(raw); j++ {
		switch raw[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(raw)
}

// unquote decodes a JSON string literal (with its quotes).
func unquote(lit []byte) string {
	if len(lit) < 2 {
		return ""
	}
	body := lit[1 : len(lit)-1]
	if bytes.IndexByte(body, '\\') < 0 {
		return string(body)
	}
	var s string
	_ = json.Unmarshal(lit, &s)
	return s
}

func isDelimiter(c byte) bool {
	switch c {
	case ',', ']', '}', ' ', '\t', '\r', '\n', ':':
		return true
	}
	return false
}

// appendQuoted appends s as a JSON string literal: quotes, backslashes
// and control characters escaped, invalid UTF-8 replaced by U+FFFD, HTML
// characters left alone.
func appendQuoted(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
