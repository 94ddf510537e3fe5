package manuals

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/utcpd/utcpd/utcp"
)

// TemplateChecker is optionally implemented by a TemplateParser that can
// run, on a parsed template with its variables substituted, the checks a
// registration runs before it contacts anything (*transports.Registry
// does: allowed_hosts, plain http to a host that is not loopback, a file
// template's file). ResolveTemplate calls it.
type TemplateChecker interface {
	CheckTemplate(tmpl *utcp.CallTemplate) error
}

// ResolveTemplate is the step of a registration between parsing a manual
// call template and discovering its manual, shared by the gateway and by
// utcpd config validate so that the two judge a template alike: the
// variables of tmpl (parsed with p, its name already sanitised) are
// substituted under the namespace (the manual name) from vars, the result
// is parsed again, and, when p is a TemplateChecker, checked with
// CheckTemplate. It returns the template to discover with (tmpl itself
// when it has no variables). A variable vars cannot resolve is a
// variable_not_found error; a refusal has the checker's code
// (invalid_template, or discovery_failed for a file that does not exist).
func ResolveTemplate(p TemplateParser, tmpl *utcp.CallTemplate, namespace string, vars *Resolver) (*utcp.CallTemplate, error) {
	resolved := tmpl
	if HasVariables(tmpl.Raw) {
		raw, err := Substitute(tmpl.Raw, namespace, vars)
		if err != nil {
			return nil, err
		}
		parsed, err := p.ParseTemplate(raw)
		if err != nil {
			return nil, err
		}
		parsed.Name = tmpl.Name
		resolved = &parsed
	}
	if c, ok := p.(TemplateChecker); ok {
		if err := c.CheckTemplate(resolved); err != nil {
			return nil, err
		}
	}
	return resolved, nil
}

// CheckConfig is the one validation pass over a configuration file that
// utcpd config validate and utcpd serve share. It parses data as
// ParseConfig does, with every manual call template also parsed by
// opts.Parser (normally *transports.Registry), but never stops at an
// error: it returns the configuration made of the parts that can be used
// and every problem of the file, sorted by file and line.
//
// An error with Manual set is one manual's: its transport refuses its
// template (an unknown call_template_type, with a "did you mean" and,
// when one is close, the rest of the template checked as that type; a
// required field missing; a value refused), and the template is in
// cfg.Rejected rather than cfg.ManualCallTemplates. Every other error is
// the file's, as ParseConfig reports them: malformed JSON or YAML, a
// malformed section, a template that is not an object, has no
// call_template_type (a key close to it is named, "did you mean", and
// the rest of the template is still checked as if it were spelled right)
// or a name that is not a string, two manuals with one name, a dotenv
// file that does not exist, and with opts.Strict an unknown field or
// value anywhere. Warnings inside a template have its Manual set. cfg is
// nil only when the document itself cannot be read.
//
// CheckConfig reads no variables; Preflight runs the checks that need
// them.
func CheckConfig(path string, data []byte, opts Options) (*Config, []Problem) {
	c, ok := parseConfig(path, data, opts, true)
	if !ok {
		return nil, c.errs
	}
	cfg := c.cfg
	out := c.errs
	var warnings []Problem
	for i, p := range cfg.WarningProblems() {
		if opts.Strict && cfg.Warnings[i].StrictError() {
			out = append(out, problemFromWarning(cfg.Warnings[i], true)) // the file's, as in ParseConfig
			continue
		}
		warnings = append(warnings, p)
	}
	for _, l := range cfg.Loaders {
		if l.Optional {
			continue
		}
		if _, err := os.Stat(l.EnvFilePath); err != nil {
			out = append(out, loaderProblem(l, err))
		}
	}
	for _, r := range cfg.Rejected {
		out = append(out, r.Problems...)
	}
	out = append(out, warnings...) // after the errors of the same line
	slices.SortStableFunc(cfg.Rejected, func(a, b Rejected) int { return compareLocation(cfg, a.Template, b.Template) })
	sortProblems(out)
	return cfg, out
}

// WarningProblems returns cfg.Warnings as warning problems, in order,
// each inside a manual call template with that template's Manual set:
// what Summarize folds.
func (cfg *Config) WarningProblems() []Problem {
	out := make([]Problem, 0, len(cfg.Warnings))
	for _, w := range cfg.Warnings {
		p := problemFromWarning(w, false)
		if i := rejectedAt(cfg, w.File, w.Path); i >= 0 {
			p.Manual = cfg.Rejected[i].Name
		} else if i := templateAt(cfg.ManualCallTemplates, w.File, w.Path); i >= 0 {
			p.Manual = cfg.ManualCallTemplates[i].Name
		}
		out = append(out, p)
	}
	return out
}

// compareLocation orders templates by file (as first read), then line.
func compareLocation(cfg *Config, a, b Template) int {
	if a.File != b.File {
		return strings.Compare(a.File, b.File)
	}
	return a.Line - b.Line
}

// within reports whether the JSON path p is the template path t or under it.
func within(t, p string) bool {
	return t == "" || p == t || strings.HasPrefix(p, t+".") || strings.HasPrefix(p, t+"[")
}

// templateAt returns the index of the template of ts whose file is file
// and whose path holds path, -1 if none.
func templateAt(ts []Template, file, path string) int {
	for i, t := range ts {
		if t.File == file && within(t.Path, path) {
			return i
		}
	}
	return -1
}

func rejectedAt(cfg *Config, file, path string) int {
	for i, r := range cfg.Rejected {
		if r.File == file && within(r.Path, path) {
			return i
		}
	}
	return -1
}

// Preflight runs ResolveTemplate on every usable manual call template of
// cfg (parsed with p) and returns, for each template it refuses, a
// problem of that manual: what registration would refuse before any
// network I/O (plain http to a host that is not loopback, a file template
// whose file does not exist, allowed_hosts that do not parse). A
// variable vars cannot resolve is a warning with code variable_not_found
// (the daemon may run with other variables; there it fails the manual);
// the template's other checks are then skipped. vars nil means the
// variables are unknown (the configuration's resolver could not be
// built): templates with variables are skipped.
func Preflight(cfg *Config, p TemplateParser, vars *Resolver) []Problem {
	if cfg == nil || p == nil {
		return nil
	}
	var out []Problem
	for _, t := range cfg.ManualCallTemplates {
		if vars == nil && HasVariables(t.Raw) {
			continue
		}
		ct, err := p.ParseTemplate(t.Raw)
		if err != nil {
			continue // CheckConfig reported it
		}
		ct.Name = t.Name
		if _, err := ResolveTemplate(p, &ct, t.Name, vars); err != nil {
			pr := Problem{Severity: SeverityError, Code: utcp.CodeOf(err), File: t.File, Line: t.Line, Path: t.Path, Manual: t.Name,
				Message: fmt.Sprintf("manual %s: %v", t.Name, err)}
			if pr.Code == utcp.CodeVariableNotFound {
				pr.Severity = SeverityWarning
				pr.Message += " (utcpd serve fails this manual unless its environment sets the variable)"
			}
			out = append(out, pr)
		}
	}
	return out
}

// minSummarised is the number of manual call templates a warning must
// repeat in before Summarize folds it into one line.
const minSummarised = 4

// Summarize folds warnings that repeat across the manual call templates
// of one file into one warning each: a legacy file of 240 providers gives
// "[*].provider_type: 240 providers: legacy field provider_type renamed
// to call_template_type" instead of 240 lines. Warnings are the same when
// they have the same file, kind, message and suggestion and the same path
// inside their templates; a group of fewer than four is left as it is.
// The summary takes the place (and line) of the group's first warning;
// errors and every other warning keep their order.
func Summarize(ps []Problem) []Problem {
	type key struct {
		file, rel, msg, suggestion string
		kind                       WarningKind
	}
	keyOf := func(p Problem) (key, bool) {
		if p.Severity != SeverityWarning || p.Manual == "" {
			return key{}, false
		}
		list, rel, ok := splitTemplatePath(p.Path)
		if !ok {
			return key{}, false
		}
		return key{file: p.File, rel: list + "\x00" + rel, msg: p.Message, suggestion: p.Suggestion, kind: p.Kind}, true
	}
	count := map[key]int{}
	for _, p := range ps {
		if k, ok := keyOf(p); ok {
			count[k]++
		}
	}
	out := make([]Problem, 0, len(ps))
	done := map[key]bool{}
	for _, p := range ps {
		k, ok := keyOf(p)
		if !ok || count[k] < minSummarised {
			out = append(out, p)
			continue
		}
		if done[k] {
			continue
		}
		done[k] = true
		list, rel, _ := splitTemplatePath(p.Path)
		what := "manual call templates"
		if list == "" || list == "providers" {
			what = "providers"
		}
		s := p
		s.Manual = ""
		s.Path = joinPath(list+"[*]", rel)
		s.Message = fmt.Sprintf("%d %s: %s", count[k], what, p.Message)
		out = append(out, s)
	}
	return out
}

// splitTemplatePath splits a path inside a list of templates,
// "providers[3].metadata", into the list ("providers"; "" for a bare
// list) and the path inside the template ("metadata").
func splitTemplatePath(path string) (list, rel string, ok bool) {
	i := strings.IndexByte(path, '[')
	if i < 0 {
		return "", "", false
	}
	j := strings.IndexByte(path[i:], ']')
	if j < 0 {
		return "", "", false
	}
	idx := path[i+1 : i+j]
	if idx == "" || strings.Trim(idx, "0123456789") != "" {
		return "", "", false
	}
	rest := path[i+j+1:]
	rest = strings.TrimPrefix(rest, ".")
	return path[:i], rest, true
}
