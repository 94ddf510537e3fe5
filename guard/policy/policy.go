// Package policy is the "policy" guard kind: an ordered list of rules
// over the tool's name, manual, protocol, the caller and the arguments,
// decided locally, first match wins.
//
// Configuration (every field name is exact; an unknown field is an error):
//
//	{
//	  "kind": "policy",
//	  "default": "deny",
//	  "rules": [
//	    {"name": "no-etc", "tools": ["files.*"],
//	     "args": [{"pointer": "/path", "regex": "^/etc/"}],
//	     "decision": "deny", "reason": "system files are off limits"},
//	    {"tools": ["billing.*"], "principals": ["finance-*"], "decision": "allow"},
//	    {"tools": ["billing.refund"], "args": [{"pointer": "/amount", "equals": 0}], "decision": "allow"},
//	    {"tools": ["billing.*"], "decision": "review"}
//	  ]
//	}
//
// default (required) is the decision when no rule matches: allow, deny or
// review. Rules are tried in order and the first one that matches decides
// (decision: allow, deny or review; reason is shown to the caller). A rule
// matches when every condition it has matches (AND); a condition given as a
// list matches when any of its values does (OR); a condition that is
// absent or an empty list matches everything, so a rule with no
// conditions matches every call.
//
//   - tools: globs matched against the qualified name ("manual.tool"), or
//     the requested name when it did not resolve.
//   - manuals, protocols (call_template_type), principals: globs matched
//     against the call's manual, protocol and principal. A name that did
//     not resolve has an empty manual and protocol; an anonymous caller has
//     the principal "", which only the pattern "" (or "*") matches.
//   - kinds: globs matched against the kind of action (guard.Call.Kind):
//     "tool" for a tool call, "resource" for an MCP resources/read and
//     "prompt" for an MCP prompts/get of an MCP server behind utcpd. For
//     those two, tools matches the resource's utcpd URI
//     ("utcpd://manual.server/<the server's URI>") or the prompt's name
//     ("manual.server.prompt"), manuals and protocols the MCP server's
//     manual and "mcp", and args a resource read's {"uri": <the server's
//     URI>} or a prompt's arguments. A rule without kinds matches every
//     kind, so {"manuals": ["files"], "decision": "deny"} denies the
//     manual's resources and prompts as well as its tools.
//   - args: conditions on the arguments, each a JSON Pointer (RFC 6901)
//     into the arguments object and exactly one of regex (Go RE2 syntax,
//     unanchored unless the pattern anchors it) or equals (any JSON value,
//     compared as JSON: numbers by value, objects regardless of key
//     order). A pointer that does not resolve does not match. regex tests
//     strings as they are and any other value as its compact JSON text
//     (42, true, null, {"a":1}), so a deny rule cannot be dodged by
//     passing a number or an array; "regex": "" matches whenever the
//     pointer resolves.
//
// Globs: '*' matches any run of characters, dots included ("billing.*"
// matches "billing.charge" and "billing.sub.refund"; "*.delete" matches a
// delete tool in any manual), '?' matches one character, everything else
// matches itself, case-sensitively. There are no character classes or
// escapes.
//
// When the daemon loads its guards it first substitutes ${VAR} and $VAR
// references in each entry, so a regex that needs a '$' followed by a
// letter, digit or underscore writes it "$$" (an end anchor, "\\.sh$",
// needs nothing).
//
// "kind" and "name" are accepted and ignored. The verdict's Details is
// {"rule": <index into rules>, "name": <the rule's name, if any>} or
// {"default": true}.
//
// Rules are compiled once, in New: regular expressions, pointers, globs,
// and an index of the rules by exact tool name and literal tool-name
// prefix, so a call only looks at the rules that can match its name (plus
// those whose tools are absent or start with a wildcard). A reload builds
// a new Policy.
package policy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"regexp"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"

	"github.com/utcpd/utcpd/guard"
	"github.com/utcpd/utcpd/guard/internal/kindcfg"
)

// Kind is the guard kind this package registers in guard.Default.
const Kind = "policy"

func init() {
	guard.MustRegister(guard.Info{Kind: Kind, New: New})
}

// Config is the policy's configuration section.
type Config struct {
	// Default decides calls no rule matches: allow, deny or review.
	// Required.
	Default guard.Decision `json:"default"`
	// Rules are tried in order; the first that matches decides.
	Rules []Rule `json:"rules,omitempty"`
}

// Rule is one policy rule. Every condition present must match; an absent
// or empty condition matches everything.
type Rule struct {
	// Name labels the rule in verdict details and logs. Optional.
	Name string `json:"name,omitempty"`
	// Tools are globs over the qualified tool name (the requested name
	// when it did not resolve).
	Tools []string `json:"tools,omitempty"`
	// Manuals are globs over the tool's manual name.
	Manuals []string `json:"manuals,omitempty"`
	// Protocols are globs over the tool's call_template_type.
	Protocols []string `json:"protocols,omitempty"`
	// Principals are globs over the caller's principal ("" if anonymous).
	Principals []string `json:"principals,omitempty"`
	// Kinds are globs over the kind of action (guard.Call.Kind): "tool"
	// (a tool call), "resource" (an MCP resources/read, whose name for
	// tools is its utcpd URI) or "prompt" (an MCP prompts/get, named
	// manual.server.prompt). Absent: every kind.
	Kinds []string `json:"kinds,omitempty"`
	// Args are conditions on the arguments; all must match.
	Args []ArgMatch `json:"args,omitempty"`
	// Decision is the rule's verdict: allow, deny or review. Required.
	Decision guard.Decision `json:"decision"`
	// Reason explains the decision to the caller. Optional.
	Reason string `json:"reason,omitempty"`
}

// ArgMatch is a condition on one argument value.
type ArgMatch struct {
	// Pointer is an RFC 6901 JSON Pointer into the arguments object: ""
	// is the whole object, "/path" its member path, "/a/0" the first
	// element of the array a; "~1" stands for '/' and "~0" for '~'.
	Pointer string `json:"pointer"`
	// Regex, a Go RE2 expression, must match the value: a string as it
	// is, anything else as its compact JSON text. Exactly one of Regex
	// and Equals is set.
	Regex *string `json:"regex,omitempty"`
	// Equals is a JSON value the argument must equal, compared as JSON.
	Equals json.RawMessage `json:"equals,omitempty"`
}

// Policy is a compiled policy, a guard.Guard. It is immutable and safe
// for concurrent use; Evaluate never blocks and does not allocate on its
// common paths.
type Policy struct {
	rules    []rule
	verdicts []guard.Verdict // verdicts[i] is rules[i]'s, kept apart so that rules stay compact
	def      guard.Verdict
	pointers int // distinct pointers, the size of the per-call memo

	// The index over tool names. Rule indexes in every list ascend.
	exact      map[string][]int32 // a literal tool pattern -> rules
	prefix     map[string][]int32 // a non-empty literal prefix of a wildcard pattern -> rules
	prefixLens []int              // the distinct lengths of the keys of prefix, ascending
	always     []int32            // rules any tool name may match
}

var _ guard.Guard = (*Policy)(nil)

// rule is a compiled rule; a nil condition matches everything.
type rule struct {
	tools, manuals, protocols, principals, kinds kindcfg.Globs
	args                                         []argCond
}

type argCond struct {
	pointer []string
	slot    int            // the pointer's index in the per-call memo
	re      *regexp.Regexp // nil: equals
	// lit is a literal every match of re contains (at the start when
	// anchored): a cheap test that rules most non-matching values out
	// before the regexp runs.
	lit      string
	anchored bool
	equals   any // decoded with UseNumber
}

// New builds a policy guard from its configuration section, decoded
// strictly (see the package documentation). It is the guard.Info.New of
// the policy kind.
func New(cfg json.RawMessage, log *slog.Logger) (guard.Guard, error) {
	var c Config
	if err := kindcfg.Decode(cfg, Kind, &c); err != nil {
		return nil, err
	}
	p, err := Compile(c)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	for i, r := range c.Rules {
		if i < len(c.Rules)-1 && len(r.Tools)+len(r.Manuals)+len(r.Protocols)+len(r.Principals)+len(r.Kinds)+len(r.Args) == 0 {
			log.Warn("policy rule matches every call; the rules after it never match",
				"rule", i, "unreachable", len(c.Rules)-1-i)
			break
		}
	}
	log.Debug("policy loaded", "rules", len(c.Rules), "default", string(c.Default),
		"indexed_exact", len(p.exact), "indexed_prefixes", len(p.prefix), "unindexed", len(p.always))
	return p, nil
}

// Compile checks c and compiles it into a Policy: default and every
// decision must be allow, deny or review; tool, manual and protocol
// patterns must not be empty; every pointer must be valid and every arg
// condition must have exactly one of regex (which must compile) and
// equals.
func Compile(c Config) (*Policy, error) {
	if err := checkDecision(c.Default); err != nil {
		return nil, fmt.Errorf("field default: %w", err)
	}
	p := &Policy{
		rules:    make([]rule, len(c.Rules)),
		verdicts: make([]guard.Verdict, len(c.Rules)),
		exact:    map[string][]int32{},
		prefix:   map[string][]int32{},
		def: guard.Verdict{
			Decision: c.Default,
			Reason:   fmt.Sprintf("no policy rule matched (default %s)", c.Default),
			Details:  fixed(json.RawMessage(`{"default":true}`)),
		},
	}
	if len(c.Rules) > math.MaxInt32 {
		return nil, fmt.Errorf("too many rules")
	}
	slots := map[string]int{}
	for i, rc := range c.Rules {
		r, v, err := compileRule(i, rc, slots)
		if err != nil {
			return nil, fmt.Errorf("rules[%d]: %w", i, err)
		}
		p.rules[i], p.verdicts[i] = r, v
		p.index(int32(i), r.tools) // nil: any tool
	}
	p.pointers = len(slots)
	for k := range p.prefix {
		if !slices.Contains(p.prefixLens, len(k)) {
			p.prefixLens = append(p.prefixLens, len(k))
		}
	}
	slices.Sort(p.prefixLens)
	return p, nil
}

func checkDecision(d guard.Decision) error {
	switch d {
	case guard.Allow, guard.Deny, guard.Review:
		return nil
	case "":
		return errors.New("a decision is required: allow, deny or review")
	}
	return fmt.Errorf("invalid decision %q: want allow, deny or review", d)
}

func compileRule(i int, rc Rule, slots map[string]int) (rule, guard.Verdict, error) {
	var none guard.Verdict
	if err := checkDecision(rc.Decision); err != nil {
		return rule{}, none, fmt.Errorf("field decision: %w", err)
	}
	for field, pats := range map[string][]string{"tools": rc.Tools, "manuals": rc.Manuals, "protocols": rc.Protocols, "kinds": rc.Kinds} {
		if slices.Contains(pats, "") {
			return rule{}, none, fmt.Errorf("field %s: an empty pattern matches nothing; remove it", field)
		}
	}
	r := rule{
		tools:      condition(rc.Tools),
		manuals:    condition(rc.Manuals),
		protocols:  condition(rc.Protocols),
		principals: condition(rc.Principals),
		kinds:      condition(rc.Kinds),
	}
	for j, a := range rc.Args {
		ac, err := compileArg(a)
		if err != nil {
			return rule{}, none, fmt.Errorf("args[%d]: %w", j, err)
		}
		slot, ok := slots[a.Pointer]
		if !ok {
			slot = len(slots)
			slots[a.Pointer] = slot
		}
		ac.slot = slot
		r.args = append(r.args, ac)
	}
	details := map[string]any{"rule": i}
	label := fmt.Sprintf("rules[%d]", i)
	if rc.Name != "" {
		details["name"] = rc.Name
		label += fmt.Sprintf(" (%s)", rc.Name)
	}
	d, err := json.Marshal(details)
	if err != nil {
		return rule{}, none, err
	}
	reason := rc.Reason
	if reason == "" {
		reason = fmt.Sprintf("policy %s matched: %s", label, rc.Decision)
	}
	return r, guard.Verdict{Decision: rc.Decision, Reason: reason, Details: fixed(d)}, nil
}

// condition compiles a list of patterns; nil when it matches everything
// (it is empty, or one of its patterns is all stars).
func condition(patterns []string) kindcfg.Globs {
	for _, p := range patterns {
		if p != "" && strings.Trim(p, "*") == "" {
			return nil
		}
	}
	if len(patterns) == 0 {
		return nil
	}
	return kindcfg.CompileGlobs(patterns)
}

// fixed caps b's capacity at its length, so a caller that appends to a
// shared Details copies it instead of writing into ours.
func fixed(b json.RawMessage) json.RawMessage { return b[:len(b):len(b)] }

func compileArg(a ArgMatch) (argCond, error) {
	ptr, err := parsePointer(a.Pointer)
	if err != nil {
		return argCond{}, fmt.Errorf("field pointer: %w", err)
	}
	ac := argCond{pointer: ptr}
	switch {
	case a.Regex != nil && a.Equals != nil:
		return argCond{}, errors.New("set one of regex and equals, not both")
	case a.Regex != nil:
		re, err := regexp.Compile(*a.Regex)
		if err != nil {
			return argCond{}, fmt.Errorf("field regex: %w", err)
		}
		ac.re = re
		ac.lit, _ = re.LiteralPrefix()
		ac.anchored = anchoredAtStart(*a.Regex)
	case a.Equals != nil:
		v, err := decodeValue(a.Equals)
		if err != nil {
			return argCond{}, fmt.Errorf("field equals: %w", err)
		}
		ac.equals = v
	default:
		return argCond{}, errors.New("one of regex and equals is required")
	}
	return ac, nil
}

// index adds rule i to the lists of the tool names it may match.
func (p *Policy) index(i int32, tools kindcfg.Globs) {
	add := func(m map[string][]int32, k string) {
		if l := m[k]; len(l) == 0 || l[len(l)-1] != i {
			m[k] = append(l, i)
		}
	}
	if len(tools) == 0 {
		p.always = append(p.always, i)
		return
	}
	for _, g := range tools {
		if g.Prefix() == "" && !g.Literal() {
			p.always = append(p.always, i)
			return
		}
	}
	for _, g := range tools {
		if g.Literal() {
			add(p.exact, g.String())
		} else {
			add(p.prefix, g.Prefix())
		}
	}
}

// Evaluate returns the verdict of the first rule that matches call, or the
// default verdict. It does not block, so it does not look at ctx. A nil
// call is an error.
func (p *Policy) Evaluate(_ context.Context, call *guard.Call) (guard.Verdict, error) {
	if call == nil {
		return guard.Verdict{}, errors.New("policy: no call to evaluate")
	}
	if i := p.first(call); i >= 0 {
		return p.verdicts[i], nil
	}
	return p.def, nil
}

// first returns the index of the first rule that matches call, or -1. It
// merges, in rule order, the index lists that apply to the call's name.
func (p *Policy) first(call *guard.Call) int32 {
	name := call.Qualified
	if name == "" {
		name = call.Tool
	}
	var buf [16][]int32
	lists := buf[:0]
	var m memo
	if l := p.exact[name]; len(l) > 0 {
		lists = append(lists, l)
	}
	for _, n := range p.prefixLens {
		if n > len(name) {
			break
		}
		if l := p.prefix[name[:n]]; len(l) > 0 {
			lists = append(lists, l)
		}
	}
	if len(p.always) > 0 {
		lists = append(lists, p.always)
	}
	if len(lists) == 1 {
		for _, i := range lists[0] {
			if p.rules[i].match(call, name, &m, p.pointers) {
				return i
			}
		}
		return -1
	}
	for {
		next, found := int32(math.MaxInt32), false
		for _, l := range lists {
			if len(l) > 0 && l[0] < next {
				next, found = l[0], true
			}
		}
		if !found {
			return -1
		}
		for j, l := range lists {
			if len(l) > 0 && l[0] == next {
				lists[j] = l[1:]
			}
		}
		if p.rules[next].match(call, name, &m, p.pointers) {
			return next
		}
	}
}

func (r *rule) match(call *guard.Call, name string, m *memo, pointers int) bool {
	if len(r.tools) > 0 && !r.tools.Match(name) ||
		len(r.manuals) > 0 && !r.manuals.Match(call.Manual) ||
		len(r.protocols) > 0 && !r.protocols.Match(call.Protocol) ||
		len(r.principals) > 0 && !r.principals.Match(call.Principal) ||
		len(r.kinds) > 0 && !r.kinds.Match(call.KindOf()) {
		return false
	}
	if len(r.args) == 0 {
		return true
	}
	for i := range r.args {
		if !r.args[i].match(call, m.slot(r.args[i].slot, pointers)) {
			return false
		}
	}
	return true
}

func (a *argCond) match(call *guard.Call, s *slot) bool {
	if !s.resolved {
		var doc any = call.Arguments
		if call.Arguments == nil {
			doc = map[string]any{}
		}
		s.v, s.ok = resolve(doc, a.pointer)
		s.resolved = true
	}
	if !s.ok {
		return false
	}
	if a.re == nil {
		return equal(s.v, a.equals)
	}
	if !s.texted {
		s.text, s.textOK = text(s.v)
		s.texted = true
	}
	if !s.textOK {
		return false
	}
	if a.lit != "" {
		if a.anchored && !strings.HasPrefix(s.text, a.lit) || !a.anchored && !strings.Contains(s.text, a.lit) {
			return false
		}
	}
	return a.re.MatchString(s.text)
}

// memo remembers, for one call, what each distinct pointer resolved to
// and its text, so that many rules testing the same argument look it up
// once.
type memo struct {
	small [8]slot
	more  []slot
}

type slot struct {
	resolved, ok   bool
	v              any
	texted, textOK bool
	text           string
}

func (m *memo) slot(i, n int) *slot {
	if i < len(m.small) {
		return &m.small[i]
	}
	if m.more == nil {
		m.more = make([]slot, n-len(m.small))
	}
	return &m.more[i-len(m.small)]
}

// anchoredAtStart reports whether every match of the regular expression
// expr starts at the beginning of the text (it begins with ^ or \A
// outside multi-line mode).
func anchoredAtStart(expr string) bool {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return false
	}
	for re.Op == syntax.OpConcat || re.Op == syntax.OpCapture {
		if len(re.Sub) == 0 {
			return false
		}
		re = re.Sub[0]
	}
	return re.Op == syntax.OpBeginText
}

// text is the string a regex tests: a string as it is, anything else as
// compact JSON without HTML escaping.
func text(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case bool:
		return strconv.FormatBool(x), true
	case nil:
		return "null", true
	case json.Number:
		return x.String(), true
	}
	b, err := marshal(v)
	if err != nil {
		return "", false
	}
	return string(b), true
}

// decodeValue decodes one JSON value, numbers as json.Number so that
// equals compares them exactly.
func decodeValue(raw json.RawMessage) (any, error) {
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// errNoNumber marks a value that is not a JSON number.
var errNoNumber = errors.New("not a number")

// equal compares an argument value a with a configured value b (decoded
// with UseNumber) as JSON values.
func equal(a, b any) bool {
	switch y := b.(type) {
	case nil:
		return a == nil
	case string:
		x, ok := a.(string)
		return ok && x == y
	case bool:
		x, ok := a.(bool)
		return ok && x == y
	case json.Number:
		return numberEqual(a, y)
	case []any:
		x, ok := a.([]any)
		if !ok {
			if n, ok := normalize(a); ok {
				return equal(n, b)
			}
			return false
		}
		if len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equal(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		x, ok := a.(map[string]any)
		if !ok {
			if n, ok := normalize(a); ok {
				return equal(n, b)
			}
			return false
		}
		if len(x) != len(y) {
			return false
		}
		for k, yv := range y {
			xv, ok := x[k]
			if !ok || !equal(xv, yv) {
				return false
			}
		}
		return true
	}
	return false
}

// numberEqual compares a number of any Go numeric type (or json.Number)
// with y: exactly when both are integers, else as float64.
func numberEqual(a any, y json.Number) bool {
	xi, xf, err := number(a)
	if err != nil {
		return false
	}
	if yi, err := y.Int64(); err == nil && xi != nil {
		return *xi == yi
	}
	yf, err := y.Float64()
	return err == nil && xf == yf
}

// number returns a as an int64 (when it is an integer that fits) and as a
// float64.
func number(a any) (*int64, float64, error) {
	var i int64
	switch x := a.(type) {
	case json.Number:
		f, err := x.Float64()
		if err != nil {
			return nil, 0, errNoNumber
		}
		if n, err := x.Int64(); err == nil {
			return &n, f, nil
		}
		return nil, f, nil
	case float64:
		if x == math.Trunc(x) && x >= -(1<<63) && x < 1<<63 {
			i = int64(x)
			return &i, x, nil
		}
		return nil, x, nil
	case float32:
		return number(float64(x))
	case int:
		i = int64(x)
	case int8:
		i = int64(x)
	case int16:
		i = int64(x)
	case int32:
		i = int64(x)
	case int64:
		i = x
	case uint:
		return uintNumber(uint64(x))
	case uint8:
		i = int64(x)
	case uint16:
		i = int64(x)
	case uint32:
		i = int64(x)
	case uint64:
		return uintNumber(x)
	default:
		return nil, 0, errNoNumber
	}
	return &i, float64(i), nil
}

func uintNumber(x uint64) (*int64, float64, error) {
	if x > math.MaxInt64 {
		return nil, float64(x), nil
	}
	i := int64(x)
	return &i, float64(x), nil
}
