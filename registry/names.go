package registry

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/utcpd/utcpd/utcp"
)

// QualifiedName returns the registry name of a tool called tool in manual:
// tool itself when it already starts with "manual.", and "manual.tool"
// otherwise. This is the rule python-utcp and typescript-utcp apply after
// discovery; it never strips or replaces an existing different prefix, so
// an MCP tool "server.tool" becomes "manual.server.tool".
func QualifiedName(manual, tool string) string {
	if len(tool) > len(manual) && tool[len(manual)] == '.' && strings.HasPrefix(tool, manual) {
		return tool
	}
	return manual + "." + tool
}

// SplitName splits a qualified name at its FIRST dot into the manual name
// and the rest (the tool's short name, which may itself contain dots). ok
// is false when qualified has no dot or either side of the first dot is
// empty; manual and rest are then "".
func SplitName(qualified string) (manual, rest string, ok bool) {
	manual, rest, found := strings.Cut(qualified, ".")
	if !found || manual == "" || rest == "" {
		return "", "", false
	}
	return manual, rest, true
}

// NewTool returns a registry Tool for def discovered in manual: its name
// is QualifiedName(manual, def.Name), and Def is a shallow copy of *def
// whose Name is that qualified name (slices and schemas are shared with
// def, so def must not be modified afterwards). ext becomes Tool.Ext.
func NewTool(manual string, def *utcp.Tool, ext any) *Tool {
	d := *def
	d.Name = QualifiedName(manual, def.Name)
	return &Tool{Name: d.Name, Manual: manual, Def: &d, Ext: ext}
}

// DropDuplicates returns tools without the later occurrences of a
// qualified name (the first one wins, as in discovery order) and the names
// it dropped, each once, in order of first drop. Add and Replace reject a
// manual with duplicate names; a caller that prefers to keep the manual
// (for example because a remote server lists a tool twice) filters it
// with DropDuplicates first and logs what was dropped. tools is not
// modified; when nothing is dropped the result is tools itself.
func DropDuplicates(tools []*Tool) (kept []*Tool, dropped []string) {
	seen := make(map[string]bool, len(tools))
	for i, t := range tools {
		if t == nil {
			continue
		}
		if !seen[t.Name] {
			seen[t.Name] = true
			if kept != nil {
				kept = append(kept, t)
			}
			continue
		}
		if kept == nil {
			kept = append(make([]*Tool, 0, len(tools)), tools[:i]...)
		}
		if !containsString(dropped, t.Name) {
			dropped = append(dropped, t.Name)
		}
	}
	if kept == nil {
		return tools, nil
	}
	return kept, dropped
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// isWordRune reports whether r is matched by Python's Unicode-aware \w:
// letters, numbers and the underscore.
func isWordRune(r rune) bool {
	if r < utf8.RuneSelf {
		return r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
	}
	return unicode.IsLetter(r) || unicode.IsNumber(r)
}

// eachWord calls fn for every maximal run of word runes in s (Python's
// re.findall(r'\w+', s)), in order, duplicates included. The words are
// substrings of s.
func eachWord(s string, fn func(w string)) {
	start := -1
	for i, r := range s {
		if isWordRune(r) {
			if start < 0 {
				start = i
			}
			continue
		}
		if start >= 0 {
			fn(s[start:i])
			start = -1
		}
	}
	if start >= 0 {
		fn(s[start:])
	}
}

// distinctWords returns the distinct \w+ words of s in order of first
// occurrence.
func distinctWords(s string) []string {
	var out []string
	eachWord(s, func(w string) {
		if !containsString(out, w) {
			out = append(out, w)
		}
	})
	return out
}
