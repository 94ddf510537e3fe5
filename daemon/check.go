package daemon

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/utcpd/utcpd/manuals"
	"github.com/utcpd/utcpd/sources"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/utcp"
)

// MaxConfigBytes caps a configuration file (and a legacy providers file
// it names).
const MaxConfigBytes = 32 << 20

// CheckOptions tune CheckConfig.
type CheckOptions struct {
	// Strict turns unknown fields and ignored settings (also in the
	// gateway section) into errors.
	Strict bool
	// Preflight also runs manuals.Preflight on every usable manual call
	// template: the checks registration runs before any network I/O,
	// with the configuration's variables (utcpd config validate). serve
	// leaves it off: registration runs the same manuals.ResolveTemplate
	// on each manual, so that a failure shows once, as that manual's
	// failure, and is retried as such.
	Preflight bool
	// Guards also builds the guard chain of the gateway section
	// (ValidateGuards) as the daemon does at start. A reload leaves it
	// off: the daemon rebuilds the chain itself and keeps the last good
	// one when the new one does not load, while the rest of the file
	// applies.
	Guards bool
	// Base are the settings the gateway section is read onto (the
	// defaults, for serve and validate; zero for a reload, which takes
	// only the guard keys from it).
	Base Settings
}

// Checked is what CheckConfig found.
type Checked struct {
	// Config is the configuration to serve: the manual call templates
	// that can be used in Config.Cfg.ManualCallTemplates, the rejected
	// ones (each with its problems) in Config.Cfg.Rejected. nil when
	// Fatal.
	Config *Config
	// Settings are Base with the gateway section read onto it.
	Settings Settings
	// Problems are every problem of the file, sorted by file and line,
	// warnings that repeat across manual call templates summarised
	// (manuals.Summarize). A problem with Manual set is that manual's.
	Problems []manuals.Problem
	// Fatal is set when an error is not one manual's (see
	// manuals.CheckConfig; a bad gateway key, a guard that does not load):
	// serve refuses to start (exit 2) and a reload keeps the last good
	// configuration. The errors of single manuals (what their transport
	// refuses, and the preflight's) are not fatal: serve registers the
	// other manuals and reports those as failed.
	Fatal bool
}

// Errors returns the problems that are errors.
func (c *Checked) Errors() []manuals.Problem {
	var out []manuals.Problem
	for _, p := range c.Problems {
		if p.Severity == manuals.SeverityError {
			out = append(out, p)
		}
	}
	return out
}

// CheckConfig is the one validation path of a configuration file, which
// utcpd config validate and utcpd serve (at start and at every reload)
// share, so that the two never disagree: it reads the file at path (at
// most MaxConfigBytes) and runs every check that registering its
// manuals runs except network I/O, collecting every problem in one pass —
// the document and its sections (manuals.CheckConfig: each manual call
// template parsed by its transport, unknown fields with the closest known
// one, a misspelled or unknown call_template_type with a "did you mean"
// that hides nothing else), the variables and dotenv loaders
// (manuals.NewResolver), with opts.Preflight the checks that need the
// variables (manuals.Preflight: plain http to a host that is not
// loopback, a file template's file, variables that do not resolve — the
// last as warnings), the gateway section (ApplyGateway) and the guard
// chain (ValidateGuards).
func CheckConfig(path string, opts CheckOptions) *Checked {
	out := &Checked{Settings: opts.Base}
	var data []byte
	read := func(name string) ([]byte, error) {
		b, err := sources.ReadCapped(name, MaxConfigBytes)
		if name == path {
			data = b
		}
		return b, err
	}
	b, err := read(path)
	if err != nil {
		out.Problems = []manuals.Problem{{Severity: manuals.SeverityError, Code: utcp.CodeInvalidConfig, File: path,
			Message: fmt.Sprintf("cannot read configuration: %v", err)}}
		out.Fatal = true
		return out
	}
	cfg, ps := manuals.CheckConfig(path, b, manuals.Options{Strict: opts.Strict, Parser: transports.Default, ReadFile: read})
	if cfg == nil {
		out.Problems, out.Fatal = ps, true
		return out
	}
	vars, err := manuals.NewResolver(cfg, manuals.ResolverOptions{})
	if err != nil {
		vars = nil
		// A missing dotenv file is reported already, with its location.
		if !slices.ContainsFunc(ps, func(p manuals.Problem) bool { return strings.HasPrefix(p.Path, "load_variables_from") }) {
			ps = append(ps, resolverProblem(path, err))
		}
	}
	if opts.Preflight {
		ps = append(ps, manuals.Preflight(cfg, transports.Default, vars)...)
	}
	errs, warnings := ApplyGateway(&out.Settings, cfg, data, opts.Strict)
	ps = append(append(ps, errs...), warnings...)
	if opts.Guards && len(errs) == 0 && vars != nil {
		if p := ValidateGuards(cfg, &out.Settings, data); p != nil {
			ps = append(ps, *p)
		}
	}
	sortProblems(ps)
	out.Problems = manuals.Summarize(ps)
	for _, p := range out.Problems {
		if p.Severity == manuals.SeverityError && p.Manual == "" {
			out.Fatal = true
		}
	}
	if !out.Fatal {
		out.Config = &Config{Path: path, Cfg: cfg, Data: data, Vars: vars}
	}
	return out
}

// resolverProblem is a problem of the configuration's variables: an error
// of manuals.NewResolver, whose message names its location.
func resolverProblem(path string, err error) manuals.Problem {
	p := manuals.Problem{Severity: manuals.SeverityError, Code: utcp.CodeOf(err), Message: err.Error()}
	if ue, ok := errors.AsType[*utcp.Error](err); ok {
		p.Message = ue.Message
		if v, ok := ue.Details["path"].(string); ok {
			p.Path = v
		}
	}
	if p.Code == "" {
		p.Code = utcp.CodeInvalidConfig
	}
	if !strings.HasPrefix(p.Message, path) {
		p.File = path
	}
	return p
}

// sortProblems orders problems by file (order of first appearance), then
// line, keeping the order of equal ones.
func sortProblems(ps []manuals.Problem) {
	files := map[string]int{}
	for _, p := range ps {
		if _, ok := files[p.File]; !ok {
			files[p.File] = len(files)
		}
	}
	slices.SortStableFunc(ps, func(a, b manuals.Problem) int {
		return cmp.Or(cmp.Compare(files[a.File], files[b.File]), cmp.Compare(a.Line, b.Line))
	})
}
