package manuals

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/utcpd/utcpd/utcp"
)

// WarningKind classifies a Warning. Kinds decide what strict mode does
// with a warning (see Warning.StrictError).
type WarningKind string

// The warning kinds.
const (
	// WarnUnknownField: a field neither UTCP nor utcpd knows. It is
	// ignored. Strict mode makes it an error.
	WarnUnknownField WarningKind = "unknown_field"
	// WarnUnknownValue: a value utcpd does not know but keeps (for
	// example an unknown tool_search_strategy_type). Strict mode makes it
	// an error.
	WarnUnknownValue WarningKind = "unknown_value"
	// WarnIgnored: a field that is dropped because another one wins (a
	// legacy field next to its v1.1 name, a duplicate key). Strict mode
	// makes it an error.
	WarnIgnored WarningKind = "ignored"
	// WarnLegacy: legacy v0.1/v0.2 syntax that was rewritten to v1.1.
	// Informational; strict mode keeps it a warning.
	WarnLegacy WarningKind = "legacy"
	// WarnNotice: a value utcpd changed (a manual name sanitised or
	// generated, a relative path made absolute). Informational; strict
	// mode keeps it a warning.
	WarnNotice WarningKind = "notice"
)

// Warning is a non-fatal finding in a manual, template or configuration.
type Warning struct {
	// Kind classifies the warning; it decides what strict mode does.
	Kind WarningKind `json:"kind"`
	// File is the file the finding is in; "" for documents that did not
	// come from a file (remote manuals, admin API bodies).
	File string `json:"file,omitempty"`
	// Line is the 1-based line in File, 0 when unknown.
	Line int `json:"line,omitempty"`
	// Path is the JSON path of the field, e.g.
	// "manual_call_templates[2].metadata"; "" for the whole document.
	Path string `json:"path,omitempty"`
	// Message says what was found and what utcpd did about it. It never
	// contains variable values.
	Message string `json:"message"`
	// Suggestion is the closest known field name for an unknown field
	// ("did you mean"), "" if none is close.
	Suggestion string `json:"suggestion,omitempty"`
}

// StrictError reports whether strict mode turns w into an error: true for
// unknown fields and values and for ignored fields, false for legacy
// rewrites and notices.
func (w Warning) StrictError() bool {
	switch w.Kind {
	case WarnUnknownField, WarnUnknownValue, WarnIgnored:
		return true
	}
	return false
}

// String formats w as "file:line: path: message (did you mean "x"?)".
func (w Warning) String() string {
	return formatFinding(w.File, w.Line, w.Path, w.Message, w.Suggestion)
}

// Severity is the weight of a Problem.
type Severity string

// The severities.
const (
	SeverityError   Severity = "error"
	SeverityWarning Severity = "warning"
)

// Problem is one finding of Validate, or one of the errors ParseConfig
// collected: an error or a warning with its location.
type Problem struct {
	// Severity is error or warning.
	Severity Severity `json:"severity"`
	// Code is the error code for errors (invalid_config, invalid_template,
	// manual_exists, variable_not_found, ...); "" for warnings.
	Code utcp.Code `json:"code,omitempty"`
	// Kind is the warning kind when the problem came from a Warning.
	Kind WarningKind `json:"kind,omitempty"`
	// File, Line and Path locate the problem as in Warning; any may be
	// empty.
	File string `json:"file,omitempty"`
	Line int    `json:"line,omitempty"`
	Path string `json:"path,omitempty"`
	// Message describes the problem; it never contains variable values.
	Message string `json:"message"`
	// Suggestion is a "did you mean" hint, "" if none.
	Suggestion string `json:"suggestion,omitempty"`
	// Manual is the sanitised name of the manual call template the
	// problem is about, "" for a problem of the configuration as a whole.
	// An error with a Manual makes only that manual unusable; one without
	// makes the configuration unusable (see CheckConfig).
	Manual string `json:"manual,omitempty"`
}

// String formats p as "file:line: path: message (did you mean "x"?)",
// prefixed with "warning: " for warnings.
func (p Problem) String() string {
	s := formatFinding(p.File, p.Line, p.Path, p.Message, p.Suggestion)
	if p.Severity == SeverityWarning {
		return "warning: " + s
	}
	return s
}

// problemFromWarning converts w, as an error when asError is set.
func problemFromWarning(w Warning, asError bool) Problem {
	p := Problem{Severity: SeverityWarning, Kind: w.Kind, File: w.File, Line: w.Line, Path: w.Path, Message: w.Message, Suggestion: w.Suggestion}
	if asError {
		p.Severity = SeverityError
		p.Code = utcp.CodeInvalidConfig
	}
	return p
}

// ProblemsOf returns the problems an error from ParseConfig or LoadConfig
// carries (every error found, in document order), or nil when err is not
// such an error.
func ProblemsOf(err error) []Problem {
	var ue *utcp.Error
	if !errors.As(err, &ue) {
		return nil
	}
	ps, _ := ue.Details["problems"].([]Problem)
	return ps
}

// formatLocation returns "file:line: path", leaving out the empty parts.
func formatLocation(file string, line int, path string) string {
	var b strings.Builder
	if file != "" {
		b.WriteString(file)
		if line > 0 {
			b.WriteByte(':')
			b.WriteString(strconv.Itoa(line))
		}
	}
	if path != "" {
		if b.Len() > 0 {
			b.WriteString(": ")
		}
		b.WriteString(path)
	}
	return b.String()
}

func formatFinding(file string, line int, path, msg, suggestion string) string {
	loc := formatLocation(file, line, path)
	s := msg
	if loc != "" {
		s = loc + ": " + msg
	}
	if suggestion != "" {
		s += fmt.Sprintf(" (did you mean %q?)", suggestion)
	}
	return s
}

// maxListedProblems caps the problems an error message lists; Details
// and the error chain hold all of them.
const maxListedProblems = 20

// problemsError turns the collected errors into one *utcp.Error. Its code
// is the first problem's; its message lists up to maxListedProblems of
// them; every problem is in Details["problems"] and, as an *utcp.Error
// each, in the chain (so errors.Is finds any code).
func problemsError(ps []Problem) error {
	if len(ps) == 0 {
		return nil
	}
	first := ps[0]
	e := &utcp.Error{Code: first.Code, Message: first.String()}
	if len(ps) > 1 {
		var b strings.Builder
		fmt.Fprintf(&b, "%d problems:", len(ps))
		errs := make([]error, len(ps))
		for i, p := range ps {
			errs[i] = problemAsError(p)
			if i < maxListedProblems {
				b.WriteString("\n  ")
				b.WriteString(p.String())
			}
		}
		if len(ps) > maxListedProblems {
			fmt.Fprintf(&b, "\n  ... and %d more", len(ps)-maxListedProblems)
		}
		e.Message = b.String()
		e.Err = errors.Join(errs...)
	}
	if first.File != "" {
		e.WithDetail("file", first.File)
	}
	if first.Line > 0 {
		e.WithDetail("line", first.Line)
	}
	if first.Path != "" {
		e.WithDetail("path", first.Path)
	}
	e.WithDetail("problems", ps)
	return e
}

func problemAsError(p Problem) *utcp.Error {
	return &utcp.Error{Code: p.Code, Message: p.String()}
}

// suggest returns the closest of candidates to name, or "".
func suggest(name string, candidates []string) string {
	if c := utcp.Closest(name, candidates, 1); len(c) > 0 && c[0] != name {
		return c[0]
	}
	return ""
}
