// Package holguard is the "holguard" guard kind: it asks HOL Guard 3
// (hol-guard, github.com/hashgraph-online/hol-guard) about the shell
// command a tool call would run.
//
// For each call that maps to a shell command it runs
//
//	<executable> command test <command> --json
//
// directly, with no shell in between: the command is one argv element,
// whatever quotes or semicolons it contains. HOL Guard only inspects the
// command ("side-effect free: it does not execute the command"), and so
// does this guard: nothing it renders is ever run by it.
//
// Which calls map to a command:
//
//   - command_from: the first entry whose tool glob matches the call's
//     qualified name (the requested name when it did not resolve) gives
//     the command: a value without braces names the argument holding the
//     whole command ("shell.run": "command"); a value with braces is a
//     template over the arguments ("ops.*": "{cmd} {flags}", {{ and }} for
//     literal braces). A string argument is used as it is, an array as
//     its elements (each a shell word) joined by spaces, anything else as
//     its JSON text; in a template a missing argument is empty. Entries
//     are tried in the order the configuration lists them.
//   - otherwise, every tool of the cli transport (protocol "cli"): its
//     call template's commands with each UTCP_ARG_<name>_UTCP_END
//     placeholder replaced by the argument's value, quoted the way a shell
//     would read it back as one word (the way the cli transport passes
//     it), the steps joined by newlines.
//
// Any other call is unmapped and gets unmapped_decision; so are MCP
// resource reads and prompts (guard.Call.Kind "resource" and "prompt")
// unless a command_from glob matches their name (a utcpd URI, or
// manual.server.prompt). A mapped call
// whose command cannot be built (its argument is missing, the template has
// no commands, the result is blank) is denied.
//
// Decisions (HOL Guard's JSON contract, peers.md A; the verdict is never
// in the exit status):
//
//	exit 0, JSON parses, status native_unavailable        -> error (fail closed)
//	exit 0, JSON parses, minimum_action "block"            -> deny
//	exit 0, JSON parses, classification.explicitly_benign
//	        is true and minimum_action "allow"             -> allow
//	minimum_action "review" or "monitor"                   -> review
//	minimum_action "allow" without explicitly_benign:
//	        status "no_match"                              -> no_match_decision (review)
//	        any other status                               -> review
//	minimum_action missing or unknown, classification
//	        missing, a field of the wrong type, output that
//	        is not exactly one JSON object, a non-zero exit,
//	        a timeout, a missing executable                -> error (fail closed)
//
// An error verdict denies the call (guard_error). The verdict's Details is
// HOL Guard's JSON output, compacted, whenever it parsed.
//
// Configuration (exact field names; an unknown field is an error):
//
//	{
//	  "kind": "holguard",
//	  "executable": "hol-guard",
//	  "timeout": "5s",
//	  "command_from": {"shell.run": "command", "ops.*": "{cmd} {flags}"},
//	  "unmapped_decision": "deny",
//	  "no_match_decision": "review",
//	  "cache_ttl": "0s"
//	}
//
// executable: a path, or a name looked up in PATH when the call runs
// (default "hol-guard"). timeout: per inspection, default 5s; on expiry
// the whole process group is killed. unmapped_decision: allow, deny or
// review (default deny). no_match_decision: review or deny (default
// review). cache_ttl: how long a decision is reused for the same command
// (leading and trailing white space ignored); 0, the default, disables
// the cache; errors are never cached. "kind" and "name" are accepted and
// ignored.
//
// HOL Guard runs with the daemon's environment and working directory; its
// standard input is empty.
package holguard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/utcpd/utcpd/guard"
	"github.com/utcpd/utcpd/guard/internal/kindcfg"
)

// Kind is the guard kind this package registers in guard.Default.
const Kind = "holguard"

// Defaults for the configuration.
const (
	// DefaultExecutable is the HOL Guard command.
	DefaultExecutable = "hol-guard"
	// DefaultTimeout bounds one inspection.
	DefaultTimeout = 5 * time.Second
)

// Limits on what is read from HOL Guard.
const (
	maxOutput    = 16 << 20 // standard output; more is an error
	maxStderr    = 64 << 10 // standard error kept for the log
	maxCacheSize = 4096     // cached commands
	// waitDelay bounds the wait for hol-guard's output pipes to close
	// once it has exited or been killed (a helper it left behind may hold
	// them). It is generous because on a loaded machine reading the last
	// of the output can itself take a while.
	waitDelay = 2 * time.Second
)

func init() {
	guard.MustRegister(guard.Info{Kind: Kind, New: New})
}

type config struct {
	Executable       string           `json:"executable,omitempty"`
	Timeout          kindcfg.Duration `json:"timeout,omitempty"`
	CommandFrom      commandFrom      `json:"command_from,omitempty"`
	UnmappedDecision guard.Decision   `json:"unmapped_decision,omitempty"`
	NoMatchDecision  guard.Decision   `json:"no_match_decision,omitempty"`
	CacheTTL         kindcfg.Duration `json:"cache_ttl,omitempty"`
}

// commandFrom is the command_from object, its entries in order.
type commandFrom []struct {
	glob kindcfg.Glob
	m    mapping
}

// UnmarshalJSON decodes the object keeping its order, and checks every
// entry.
func (c *commandFrom) UnmarshalJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok == nil {
		*c = nil
		return nil
	}
	if tok != json.Delim('{') {
		return fmt.Errorf("command_from must be an object mapping tool globs to an argument name or a template")
	}
	seen := map[string]bool{}
	var out commandFrom
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key := tok.(string)
		var spec string
		if err := dec.Decode(&spec); err != nil {
			return fmt.Errorf("command_from[%q] must be a string (an argument name or a template)", key)
		}
		if key == "" {
			return fmt.Errorf("command_from: an empty tool glob matches nothing")
		}
		if seen[key] {
			return fmt.Errorf("command_from[%q] is listed twice", key)
		}
		seen[key] = true
		m, err := parseMapping(key, spec)
		if err != nil {
			return fmt.Errorf("command_from[%q]: %w", key, err)
		}
		out = append(out, struct {
			glob kindcfg.Glob
			m    mapping
		}{kindcfg.CompileGlob(key), m})
	}
	*c = out
	return nil
}

// Guard is a HOL Guard guard, a guard.Guard. It is safe for concurrent
// use; every inspection runs its own hol-guard process.
type Guard struct {
	log        *slog.Logger
	executable string
	timeout    time.Duration
	from       commandFrom
	unmapped   guard.Decision
	noMatch    guard.Decision
	ttl        time.Duration

	// For tests.
	maxOutput int
	now       func() time.Time

	mu    sync.Mutex
	cache map[string]cached

	warnSchema sync.Once
}

type cached struct {
	v       guard.Verdict
	expires time.Time
}

var _ guard.Guard = (*Guard)(nil)

// New builds a HOL Guard guard from its configuration section, decoded
// strictly (see the package documentation). It is the guard.Info.New of
// the holguard kind. A missing executable is not an error here (it may be
// installed later) but is logged; calls then fail closed.
func New(cfg json.RawMessage, log *slog.Logger) (guard.Guard, error) {
	var c config
	if err := kindcfg.Decode(cfg, Kind, &c); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	g := &Guard{
		log:        log,
		executable: c.Executable,
		timeout:    time.Duration(c.Timeout),
		from:       c.CommandFrom,
		unmapped:   c.UnmappedDecision,
		noMatch:    c.NoMatchDecision,
		ttl:        time.Duration(c.CacheTTL),
		maxOutput:  maxOutput,
		now:        time.Now,
	}
	if g.executable == "" {
		g.executable = DefaultExecutable
	}
	if strings.TrimSpace(g.executable) != g.executable || strings.ContainsRune(g.executable, 0) {
		return nil, fmt.Errorf("field executable: %q is not a usable file name", g.executable)
	}
	if g.timeout == 0 {
		g.timeout = DefaultTimeout
	}
	switch g.unmapped {
	case "":
		g.unmapped = guard.Deny
	case guard.Allow, guard.Deny, guard.Review:
	default:
		return nil, fmt.Errorf("field unmapped_decision: invalid decision %q: want allow, deny or review", g.unmapped)
	}
	switch g.noMatch {
	case "":
		g.noMatch = guard.Review
	case guard.Review, guard.Deny:
	default:
		return nil, fmt.Errorf("field no_match_decision: invalid decision %q: want review or deny", g.noMatch)
	}
	if g.ttl > 0 {
		g.cache = map[string]cached{}
	}
	if _, err := exec.LookPath(g.executable); err != nil {
		log.Warn("hol-guard executable not found; calls it would inspect fail closed until it is installed",
			"executable", g.executable, "err", err)
	}
	return g, nil
}

// Evaluate decides call (see the package documentation). Failures are
// error verdicts, never a Go error, except for a nil call.
func (g *Guard) Evaluate(ctx context.Context, call *guard.Call) (guard.Verdict, error) {
	if call == nil {
		return guard.Verdict{}, errors.New("holguard: no call to evaluate")
	}
	command, mapped, err := g.command(call)
	if !mapped {
		return guard.Verdict{Decision: g.unmapped,
			Reason: fmt.Sprintf("%s %q does not map to a shell command for HOL Guard (unmapped_decision %s)", call.KindOf(), name(call), g.unmapped)}, nil
	}
	if err != nil {
		return guard.Verdict{Decision: guard.Deny, Reason: "HOL Guard cannot inspect the call: " + err.Error()}, nil
	}
	key := strings.TrimSpace(command)
	if key == "" {
		return guard.Verdict{Decision: guard.Deny, Reason: "HOL Guard cannot inspect the call: the command is empty"}, nil
	}
	if strings.ContainsRune(command, 0) {
		return guard.Verdict{Decision: guard.Deny, Reason: "HOL Guard cannot inspect the call: the command contains a NUL byte"}, nil
	}
	if v, ok := g.cached(key); ok {
		return v, nil
	}
	v, cacheable := g.inspect(ctx, call, command)
	if cacheable {
		g.store(key, v)
	}
	return v, nil
}

func name(call *guard.Call) string {
	if call.Qualified != "" {
		return call.Qualified
	}
	return call.Tool
}

// command returns the shell command call maps to. mapped is false when
// it maps to none; err says why a mapped call's command cannot be built.
func (g *Guard) command(call *guard.Call) (cmd string, mapped bool, err error) {
	n := name(call)
	for i := range g.from {
		if g.from[i].glob.Match(n) {
			cmd, err := g.from[i].m.render(call.Arguments)
			return cmd, true, err
		}
	}
	if call.Protocol == "cli" {
		cmd, err := renderCLI(call.Template, call.Arguments)
		return cmd, true, err
	}
	return "", false, nil
}

func (g *Guard) cached(key string) (guard.Verdict, bool) {
	if g.cache == nil {
		return guard.Verdict{}, false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	c, ok := g.cache[key]
	if !ok {
		return guard.Verdict{}, false
	}
	if !g.now().Before(c.expires) {
		delete(g.cache, key)
		return guard.Verdict{}, false
	}
	return c.v, true
}

func (g *Guard) store(key string, v guard.Verdict) {
	if g.cache == nil {
		return
	}
	now := g.now()
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.cache) >= maxCacheSize {
		for k, c := range g.cache {
			if !now.Before(c.expires) {
				delete(g.cache, k)
			}
		}
		if len(g.cache) >= maxCacheSize {
			clear(g.cache)
		}
	}
	g.cache[key] = cached{v: v, expires: now.Add(g.ttl)}
}

// output is the part of HOL Guard's command-inspection JSON the decision
// reads (schema_version 2). Unknown fields are ignored; a known field of
// the wrong type fails the decode.
type output struct {
	SchemaVersion  *json.Number `json:"schema_version"`
	Status         *string      `json:"status"`
	Classification *struct {
		ExplicitlyBenign *bool   `json:"explicitly_benign"`
		ActionClass      *string `json:"action_class"`
		Reason           *string `json:"reason"`
		Recovery         *string `json:"recovery"`
	} `json:"classification"`
	MinimumAction     *string `json:"minimum_action"`
	ControllingRuleID *string `json:"controlling_rule_id"`
}

// inspect runs hol-guard on command and decides. cacheable reports a
// verdict that HOL Guard decided (not a failure).
func (g *Guard) inspect(ctx context.Context, call *guard.Call, command string) (v guard.Verdict, cacheable bool) {
	fail := func(reason string, details json.RawMessage) (guard.Verdict, bool) {
		return guard.Verdict{Decision: guard.Error, Reason: "HOL Guard: " + reason, Details: details}, false
	}
	if err := ctx.Err(); err != nil {
		return fail(fmt.Sprintf("call abandoned before inspection: %v", err), nil)
	}
	rctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	cmd := exec.CommandContext(rctx, g.executable, "command", "test", command, "--json")
	// Output past the cap ends the inspection at once (the process would
	// otherwise block on a full pipe until the timeout).
	stdout := &capped{max: g.maxOutput, onOver: cancel}
	stderr := &capped{max: maxStderr}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.WaitDelay = waitDelay
	ownProcessGroup(cmd)
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start)
	log := g.log.With("tool", name(call), "took", took)
	switch {
	case errors.Is(err, exec.ErrNotFound) || errors.Is(err, exec.ErrDot) || cmd.Process == nil && err != nil && rctx.Err() == nil:
		log.Warn("hol-guard could not be started", "executable", g.executable, "err", err)
		return fail(fmt.Sprintf("cannot run %q: %v", g.executable, err), nil)
	case ctx.Err() != nil:
		return fail(fmt.Sprintf("call abandoned during inspection: %v", ctx.Err()), nil)
	case stdout.over:
		log.Warn("hol-guard output too large; its process group was killed", "limit", g.maxOutput)
		return fail(fmt.Sprintf("output exceeds %d bytes", g.maxOutput), nil)
	case rctx.Err() != nil:
		log.Warn("hol-guard timed out; its process group was killed", "timeout", g.timeout)
		return fail(fmt.Sprintf("inspection timed out after %v", g.timeout), nil)
	}
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		log.Warn("hol-guard failed", "exit_status", exitErr.ExitCode())
		log.Debug("hol-guard standard error", "stderr", stderr.String())
		d, _ := json.Marshal(map[string]int{"exit_status": exitErr.ExitCode()})
		return fail(fmt.Sprintf("hol-guard exited with status %d (%s)", exitErr.ExitCode(), exitReason(exitErr)), d)
	}
	if err != nil && !errors.Is(err, exec.ErrWaitDelay) {
		// ErrWaitDelay: it exited 0 but its output pipe stayed open past
		// waitDelay. The output read so far is used only if it is one
		// complete JSON object.
		log.Warn("hol-guard failed", "err", err)
		return fail(fmt.Sprintf("running hol-guard: %v", err), nil)
	}
	raw := bytes.TrimSpace(stdout.buf.Bytes())
	var out output
	if err := decodeOne(raw, &out); err != nil {
		log.Warn("hol-guard output is not the expected JSON", "err", err, "bytes", len(raw))
		return fail(fmt.Sprintf("malformed output: %v", err), nil)
	}
	var details bytes.Buffer
	if err := json.Compact(&details, raw); err != nil {
		return fail(fmt.Sprintf("malformed output: %v", err), nil)
	}
	v = g.decide(&out, details.Bytes())
	if v.Decision == guard.Error {
		log.Warn("hol-guard could not classify", "reason", v.Reason)
		return v, false
	}
	if out.SchemaVersion != nil && out.SchemaVersion.String() != "2" {
		g.warnSchema.Do(func() {
			g.log.Warn("hol-guard reports an unexpected schema_version; decisions still follow the version 2 fields",
				"schema_version", out.SchemaVersion.String())
		})
	}
	log.Debug("hol-guard decided", "decision", string(v.Decision), "minimum_action", deref(out.MinimumAction), "status", deref(out.Status))
	return v, true
}

func exitReason(e *exec.ExitError) string {
	if e.ExitCode() == 2 {
		return "usage error or a command it cannot read"
	}
	if e.ExitCode() < 0 {
		return "killed by a signal"
	}
	return "it crashed"
}

// decodeOne decodes raw, which must hold exactly one JSON object.
func decodeOne(raw []byte, out *output) error {
	if len(raw) == 0 {
		return errors.New("no output")
	}
	if raw[0] != '{' {
		return errors.New("the output is not a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(out); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("unexpected text after the JSON object")
	}
	return nil
}

// decide maps HOL Guard's classification to a verdict.
func (g *Guard) decide(out *output, details json.RawMessage) guard.Verdict {
	v := guard.Verdict{Details: details}
	status := deref(out.Status)
	if status == "native_unavailable" {
		v.Decision = guard.Error
		v.Reason = "HOL Guard: its native runtime is unavailable"
		if c := out.Classification; c != nil && c.Recovery != nil && *c.Recovery != "" {
			v.Reason += " (" + *c.Recovery + ")"
		}
		return v
	}
	if out.Classification == nil || out.MinimumAction == nil {
		v.Decision = guard.Error
		v.Reason = "HOL Guard: malformed output: classification and minimum_action are required"
		return v
	}
	c := out.Classification
	benign := c.ExplicitlyBenign != nil && *c.ExplicitlyBenign
	what := describe(out)
	switch action := *out.MinimumAction; action {
	case "block":
		v.Decision, v.Reason = guard.Deny, "HOL Guard blocks this command"+what
	case "review", "monitor":
		v.Decision, v.Reason = guard.Review, fmt.Sprintf("HOL Guard requires review (minimum_action %s)%s", action, what)
	case "allow":
		switch {
		case benign:
			v.Decision, v.Reason = guard.Allow, "HOL Guard classifies the command as explicitly benign"
		case status == "no_match":
			v.Decision = g.noMatch
			v.Reason = "HOL Guard matched no rule but did not classify the command as benign (no_match is not an allow)"
		default:
			v.Decision, v.Reason = guard.Review, fmt.Sprintf("HOL Guard did not classify the command as benign (status %s)%s", status, what)
		}
	default:
		v.Decision = guard.Error
		v.Reason = fmt.Sprintf("HOL Guard: unknown minimum_action %q", action)
	}
	return v
}

// describe summarises why HOL Guard objects: ": <action class or reason>
// (<rule>)", or "".
func describe(out *output) string {
	var parts []string
	c := out.Classification
	switch {
	case c.ActionClass != nil && *c.ActionClass != "":
		parts = append(parts, *c.ActionClass)
	case c.Reason != nil && *c.Reason != "":
		parts = append(parts, *c.Reason)
	}
	if out.ControllingRuleID != nil && *out.ControllingRuleID != "" {
		parts = append(parts, "rule "+*out.ControllingRuleID)
	}
	if len(parts) == 0 {
		return ""
	}
	return ": " + strings.Join(parts, ", ")
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// capped is an io.Writer that keeps at most max bytes and drops the
// rest; the first write past the cap calls onOver, if set.
type capped struct {
	buf    bytes.Buffer
	max    int
	over   bool
	onOver func()
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.buf.Len(); len(p) > room {
		c.buf.Write(p[:max(room, 0)])
		if !c.over && c.onOver != nil {
			c.onOver()
		}
		c.over = true
		return len(p), nil
	}
	return c.buf.Write(p)
}

func (c *capped) String() string {
	s := c.buf.String()
	if c.over {
		s += " [truncated]"
	}
	return s
}
