package manuals

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/utcpd/utcpd/utcp"
)

// TemplateParser parses one call template by its call_template_type.
// *transports.Registry satisfies it. ParseTemplate returns the template
// with Unknown listing the fields its transport does not know; a template
// it cannot use is an error (invalid_template).
type TemplateParser interface {
	ParseTemplate(raw json.RawMessage) (utcp.CallTemplate, error)
}

// FieldLister is optionally implemented by a TemplateParser that can list
// every field a template of type typ may have (base fields included), for
// "did you mean" hints. It returns nil for an unknown type.
type FieldLister interface {
	KnownFields(typ string) []string
}

// TypeLister is optionally implemented by a TemplateParser that can list
// the call_template_types it knows (*transports.Registry does). Validate
// uses it to check allowed_communication_protocols.
type TypeLister interface {
	Types() []string
}

// parserFields returns the known fields of typ from p when it is a
// FieldLister, else nil (no hints).
func parserFields(p TemplateParser, typ string) []string {
	if fl, ok := p.(FieldLister); ok {
		return fl.KnownFields(typ)
	}
	return nil
}

// Validate checks a parsed configuration as deeply as utcpd can without
// contacting anything, and returns every problem found, sorted by file
// and line (nil when there is none):
//
//   - every warning of cfg.Warnings, as a warning, or as an invalid_config
//     error when strict is set and the warning's StrictError is true;
//   - every manual call template parsed with p: a template p rejects is an
//     error with p's code (invalid_template); each unknown field p reports
//     is a warning (an error when strict) naming the closest known field,
//     unless cfg.Warnings already has it;
//   - allowed_communication_protocols entries p does not know, when p is
//     a TypeLister (warnings, errors when strict);
//   - dotenv files that do not exist and are not optional (errors).
//
// Validate reads no variables; see CheckVariables.
func Validate(cfg *Config, p TemplateParser, strict bool) []Problem {
	if cfg == nil {
		return nil
	}
	var out []Problem
	seen := map[string]bool{}
	for _, w := range cfg.Warnings {
		out = append(out, problemFromWarning(w, strict && w.StrictError()))
		seen[w.File+"\x00"+w.Path] = true
	}
	warn := func(t Template, path, suggestion, format string, args ...any) {
		if seen[t.File+"\x00"+path] {
			return
		}
		w := Warning{Kind: WarnUnknownField, File: t.File, Line: cfg.line(t.File, path), Path: path,
			Message: fmt.Sprintf(format, args...), Suggestion: suggestion}
		out = append(out, problemFromWarning(w, strict))
	}
	for _, l := range cfg.Loaders {
		if l.Optional {
			continue
		}
		if _, err := os.Stat(l.EnvFilePath); err != nil {
			out = append(out, loaderProblem(l, err))
		}
	}
	var types []string
	if tl, ok := p.(TypeLister); ok && p != nil {
		types = tl.Types()
	}
	for _, t := range cfg.ManualCallTemplates {
		if p == nil {
			break
		}
		ct, err := p.ParseTemplate(t.Raw)
		if err != nil {
			out = append(out, Problem{Severity: SeverityError, Code: utcp.CodeOf(err), File: t.File, Line: t.Line, Path: t.Path,
				Message: fmt.Sprintf("manual %s: %v", t.Name, err)})
			continue
		}
		known := parserFields(p, t.Type)
		for _, k := range ct.Unknown {
			warn(t, joinKey(t.Path, k), suggest(k, known), "unknown field %q ignored", k)
		}
		if types != nil {
			for i, proto := range ct.AllowedCommunicationProtocols {
				if !slices.Contains(types, proto) {
					path := joinIndex(joinKey(t.Path, "allowed_communication_protocols"), i)
					w := Warning{Kind: WarnUnknownValue, File: t.File, Line: cfg.line(t.File, path), Path: path,
						Message:    fmt.Sprintf("unknown call_template_type %q in allowed_communication_protocols (known: %s)", proto, strings.Join(types, ", ")),
						Suggestion: suggest(proto, types)}
					out = append(out, problemFromWarning(w, strict))
				}
			}
		}
	}
	sortProblems(out)
	return out
}

func loaderProblem(l Loader, err error) Problem {
	msg := fmt.Sprintf("dotenv file %s cannot be read: %v", l.EnvFilePath, err)
	if errors.Is(err, fs.ErrNotExist) {
		msg = fmt.Sprintf("dotenv file %s does not exist (set \"optional\": true to allow that)", l.EnvFilePath)
	}
	return Problem{Severity: SeverityError, Code: utcp.CodeInvalidConfig, File: l.File, Line: l.Line, Path: l.Path, Message: msg}
}

// CheckVariables reports, for every manual call template of cfg, each
// variable it needs (RequiredVariables, under the manual's namespace) that
// r cannot resolve, as a variable_not_found error naming the namespaced
// key. Variables of tool templates discovered later are not known here.
func CheckVariables(cfg *Config, r *Resolver) []Problem {
	if cfg == nil {
		return nil
	}
	var out []Problem
	for _, t := range cfg.ManualCallTemplates {
		for _, key := range RequiredVariables(t.Raw, t.Name) {
			if _, ok := r.Lookup(key); ok {
				continue
			}
			out = append(out, Problem{Severity: SeverityError, Code: utcp.CodeVariableNotFound, File: t.File, Line: t.Line, Path: t.Path,
				Message: fmt.Sprintf("manual %s needs variable %s, which is not set in the config variables, a dotenv file or the environment", t.Name, key)})
		}
	}
	return out
}

// ValidateManual parses every tool call template of m with p and returns
// every problem, located by JSON path ("tools[3].tool_call_template"):
// templates p rejects are errors, unknown fields are warnings (errors when
// strict). Tools without a template are skipped.
func ValidateManual(m *utcp.Manual, p TemplateParser, strict bool) []Problem {
	if m == nil || p == nil {
		return nil
	}
	var out []Problem
	for i, tool := range m.Tools {
		if tool.ToolCallTemplate == nil {
			continue
		}
		path := joinKey(joinIndex("tools", i), "tool_call_template")
		raw := tool.ToolCallTemplate.Raw
		if len(raw) == 0 {
			b, err := json.Marshal(tool.ToolCallTemplate)
			if err != nil {
				continue
			}
			raw = b
		}
		ct, err := p.ParseTemplate(raw)
		if err != nil {
			out = append(out, Problem{Severity: SeverityError, Code: utcp.CodeOf(err), Path: path, Message: fmt.Sprintf("tool %s: %v", tool.Name, err)})
			continue
		}
		known := parserFields(p, ct.Type)
		for _, k := range ct.Unknown {
			out = append(out, problemFromWarning(Warning{Kind: WarnUnknownField, Path: joinKey(path, k),
				Message: fmt.Sprintf("unknown field %q ignored", k), Suggestion: suggest(k, known)}, strict))
		}
	}
	return out
}

// line returns the line of path in file, 0 when unknown.
func (cfg *Config) line(file, path string) int {
	return cfg.docs[file].line(path)
}

// sortProblems orders problems by file (order of first appearance), then
// line, keeping the order of equal ones.
func sortProblems(ps []Problem) {
	files := map[string]int{}
	for _, p := range ps {
		if _, ok := files[p.File]; !ok {
			files[p.File] = len(files)
		}
	}
	slices.SortStableFunc(ps, func(a, b Problem) int {
		return cmp.Or(cmp.Compare(files[a.File], files[b.File]), cmp.Compare(a.Line, b.Line))
	})
}
