package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/utcpd/utcpd/gateway/ratelimit"
	"github.com/utcpd/utcpd/internal/glob"
	"github.com/utcpd/utcpd/registry"
	"github.com/utcpd/utcpd/utcp"
)

// Scope is what one API key may see and call: the single decision behind
// both listing and calling on every front, so that a caller never sees a
// tool it cannot call, nor can call one it does not see (Allows). The nil
// *Scope, and a Scope with no restriction, allow every tool.
//
// A tool (qualified name "manual.tool") is allowed when all of these
// hold:
//
//   - Tools: no exclusion ("!glob") matches its qualified name, and, when
//     there is at least one inclusion, some inclusion matches it ("any
//     include and no exclude": the order of the patterns does not matter;
//     a list of exclusions alone allows every other tool);
//   - Manuals, when set: its manual is one of them (exact names);
//   - Tags, when set: it has at least one of them (compared
//     case-insensitively, as search's tags filter).
//
// A glob is matched against the whole qualified name: "*" matches any run
// of characters (dots and slashes included), "?" any one character, and
// every other character itself ("github.*" matches "github.repos/delete").
//
// The resources, resource templates and prompts of an MCP server belong to
// the server: they are allowed when the server's namespace "manual.server"
// is (AllowsServer): Manuals as for tools, Tools globs matched against
// "manual.server" (so "everything.*" or "everything.srv" gives them,
// "everything.srv.echo" does not), and a scope with Tags allows none of
// them (they carry no tags).
type Scope struct {
	tools   []string // as written, for String and the config echo
	include []glob.Glob
	exclude []glob.Glob
	manuals []string
	tags    []string // lowercased
	also    []*Scope // Narrow: every one of them must allow too
}

// NewScope compiles a scope from its tool globs (each optionally "!"
// prefixed), manual names and tags. It fails, naming the entry, on a glob
// that is empty, holds white space or control characters, a "!" after its
// start, or one of the reserved characters [ ] { } \; on an empty manual
// name or tag.
func NewScope(tools, manuals, tags []string) (*Scope, error) {
	s := &Scope{tools: slices.Clone(tools), manuals: slices.Clone(manuals)}
	for i, p := range tools {
		pat, excl := strings.CutPrefix(p, "!")
		if err := checkGlob(pat); err != nil {
			return nil, fmt.Errorf("tools[%d] %q: %w", i, p, err)
		}
		if excl {
			s.exclude = append(s.exclude, glob.Compile(pat))
		} else {
			s.include = append(s.include, glob.Compile(pat))
		}
	}
	for i, m := range manuals {
		if m == "" || utcp.SanitizeName(m) != m {
			return nil, fmt.Errorf("manuals[%d] %q: a manual name is made of letters, digits and _", i, m)
		}
	}
	for i, t := range tags {
		if strings.TrimSpace(t) == "" {
			return nil, fmt.Errorf("tags[%d]: a tag must not be empty", i)
		}
		s.tags = append(s.tags, strings.ToLower(t))
	}
	return s, nil
}

// checkGlob reports what is wrong with a glob (without its "!").
func checkGlob(p string) error {
	if p == "" {
		return fmt.Errorf("a glob must not be empty")
	}
	if !utf8.ValidString(p) {
		return fmt.Errorf("a glob must be UTF-8")
	}
	for _, r := range p {
		switch {
		case unicode.IsSpace(r) || unicode.IsControl(r):
			return fmt.Errorf("a glob must not hold white space or control characters")
		case r == '!':
			return fmt.Errorf(`"!" is allowed only at the start of a glob (an exclusion)`)
		case strings.ContainsRune(`[]{}\`, r):
			return fmt.Errorf("%q is reserved in globs (only * and ? are wildcards)", r)
		}
	}
	return nil
}

// Narrow returns the scope that allows what both s and o allow (a key's
// scope narrowed by its toolsets, say). Either may be nil. The fronts
// cache renderings by scope (the pointer), so compute a key's narrowed
// scope once, not per request.
func (s *Scope) Narrow(o *Scope) *Scope {
	switch {
	case o.All():
		return s
	case s.All():
		return o
	}
	return &Scope{also: []*Scope{s, o}}
}

// own reports whether s itself (without Narrow's scopes) restricts
// nothing.
func (s *Scope) own() bool {
	return len(s.include) == 0 && len(s.exclude) == 0 && len(s.manuals) == 0 && len(s.tags) == 0
}

// All reports whether s allows every tool (nil or unrestricted).
func (s *Scope) All() bool {
	if s == nil {
		return true
	}
	if !s.own() {
		return false
	}
	for _, o := range s.also {
		if !o.All() {
			return false
		}
	}
	return true
}

// Allows reports whether the scope allows the tool def (by its qualified
// name and tags; see Scope). It implements registry.Scope.
func (s *Scope) Allows(def *utcp.Tool) bool {
	if s == nil {
		return true
	}
	for _, o := range s.also {
		if !o.Allows(def) {
			return false
		}
	}
	if s.own() {
		return true
	}
	if def == nil {
		return false
	}
	manual, _, _ := strings.Cut(def.Name, ".")
	if len(s.manuals) > 0 && !slices.Contains(s.manuals, manual) {
		return false
	}
	if len(s.tags) > 0 && !slices.ContainsFunc(def.Tags, func(t string) bool { return slices.Contains(s.tags, strings.ToLower(t)) }) {
		return false
	}
	return s.allowsName(def.Name)
}

// AllowsServer reports whether the scope allows the resources, resource
// templates and prompts of the MCP server server of manual (see Scope).
func (s *Scope) AllowsServer(manual, server string) bool {
	if s == nil {
		return true
	}
	for _, o := range s.also {
		if !o.AllowsServer(manual, server) {
			return false
		}
	}
	if s.own() {
		return true
	}
	if len(s.tags) > 0 || len(s.manuals) > 0 && !slices.Contains(s.manuals, manual) {
		return false
	}
	return s.allowsName(manual + "." + server)
}

func (s *Scope) allowsName(name string) bool {
	for _, g := range s.exclude {
		if g.Match(name) {
			return false
		}
	}
	if len(s.include) == 0 {
		return true
	}
	for _, g := range s.include {
		if g.Match(name) {
			return true
		}
	}
	return false
}

// MayAllowManual reports whether the scope may allow some tool of the
// manual: false only when it allows none (the manual is not one of
// Manuals, no inclusion can match a name starting "manual.", or an
// exclusion matches every such name), so that the registry skips the
// manual's tools at once. It implements registry.ManualScope.
func (s *Scope) MayAllowManual(manual string) bool {
	if s == nil {
		return true
	}
	for _, o := range s.also {
		if !o.MayAllowManual(manual) {
			return false
		}
	}
	if s.own() {
		return true
	}
	if len(s.manuals) > 0 && !slices.Contains(s.manuals, manual) {
		return false
	}
	prefix := manual + "."
	for _, g := range s.exclude {
		if g.Covers(prefix) {
			return false
		}
	}
	if len(s.include) == 0 {
		return true
	}
	for _, g := range s.include {
		if lp := g.Prefix(); strings.HasPrefix(prefix, lp) || strings.HasPrefix(lp, prefix) {
			return true
		}
	}
	return false
}

// registry returns s as a registry.Scope, nil when it allows everything
// (the registry's fast paths).
func (s *Scope) registry() registry.Scope {
	if s.All() {
		return nil
	}
	return s
}

// String returns the scope as its patterns, for messages.
func (s *Scope) String() string {
	if s.All() {
		return "all tools"
	}
	var parts []string
	if len(s.tools) > 0 {
		parts = append(parts, "tools "+strings.Join(s.tools, ", "))
	}
	if len(s.manuals) > 0 {
		parts = append(parts, "manuals "+strings.Join(s.manuals, ", "))
	}
	if len(s.tags) > 0 {
		parts = append(parts, "tags "+strings.Join(s.tags, ", "))
	}
	for _, o := range s.also {
		if !o.All() {
			parts = append(parts, "("+o.String()+")")
		}
	}
	return strings.Join(parts, "; ")
}

type scopeKey struct{}

// WithScope returns a copy of ctx carrying the caller's scope (the front
// middleware sets it next to the principal). Every listing and call of
// the Gateway made with the context is decided by it.
func WithScope(ctx context.Context, s *Scope) context.Context {
	return context.WithValue(ctx, scopeKey{}, s)
}

// ScopeFrom returns the scope WithScope attached to ctx; nil (every tool)
// when none. An API key with a toolsets list (APIKey.Toolsets) is usable
// only through those toolsets: outside them its scope allows nothing
// (toolsets.go).
func ScopeFrom(ctx context.Context) *Scope {
	if toolsetOnly(ctx) {
		return noTools
	}
	s, _ := ctx.Value(scopeKey{}).(*Scope)
	return s
}

type apiKeyKey struct{}

// WithAPIKey returns a copy of ctx carrying the API key that
// authenticated the caller and, when the key has one, its scope (as
// WithScope). The fronts' key checks set it, so that what enforces a
// key's limits (RateLimit, MaxConcurrent, Toolsets) finds the key.
func WithAPIKey(ctx context.Context, k *APIKey) context.Context {
	if k == nil {
		return ctx
	}
	ctx = context.WithValue(ctx, apiKeyKey{}, k)
	if k.Scope != nil {
		ctx = WithScope(ctx, k.Scope)
	}
	return ctx
}

// APIKeyFrom returns the API key WithAPIKey attached to ctx, nil when
// none (no keys configured, stdio, the daemon's own calls). It must not
// be modified.
func APIKeyFrom(ctx context.Context) *APIKey {
	k, _ := ctx.Value(apiKeyKey{}).(*APIKey)
	return k
}

// APIKey is one entry of gateway.api_keys: a bearer key, the principal
// that names its caller (audit, policy principals, reviews, metrics), the
// scope of what it may list and call, and limits that other parts of the
// daemon enforce (Toolsets, RateLimit, MaxConcurrent are carried here,
// validated for shape only).
//
// The key itself is never logged nor encoded: Key and SHA256 are not
// JSON fields, and LogValue and String show the name alone.
type APIKey struct {
	// Name is the principal: the configured name of a named key, or
	// "key:" and the first 8 hex digits of the key's SHA-256 for a plain
	// string key (PlainKey).
	Name string
	// Key is the bearer token, when known (a plain key, or a named key's
	// key_env resolved); SHA256, when Key is empty, is the hex SHA-256
	// of the token (key_sha256). Digest is computed from either.
	Key    string `json:"-"`
	SHA256 string `json:"-"`
	// KeyEnv names the environment variable a named key is read from
	// (key_env); the daemon resolves it into Key at start (ResolveEnv).
	KeyEnv string
	// Scope decides what the key lists and calls; nil: everything.
	Scope *Scope
	// Toolsets, when set, names the only toolsets the key may use: it
	// reaches no tool outside them (ScopeFrom gives it a scope of
	// nothing there) and finds every other toolset not_found
	// (Gateway.ToolsetFor); inside them Scope still applies.
	Toolsets []string
	// RateLimit, when set, caps the key's calls; MaxConcurrent, when
	// positive, its calls in flight. Not enforced here: the daemon makes
	// each a gateway/ratelimit rule for the key's principal
	// ("apikey:<name>"), which Options.RateLimits enforces.
	RateLimit     *RateLimit
	MaxConcurrent int
}

// PlainKey is the APIKey of a plain string entry of gateway.api_keys: its
// principal is "key:<8 hex of its SHA-256>" and it may call every tool.
func PlainKey(key string) APIKey {
	d := sha256.Sum256([]byte(key))
	return APIKey{Name: "key:" + hex.EncodeToString(d[:4]), Key: key}
}

// Digest returns the SHA-256 of the key, and false when the key is not
// known (neither Key nor a valid SHA256).
func (k *APIKey) Digest() ([sha256.Size]byte, bool) {
	if k.Key != "" {
		return sha256.Sum256([]byte(k.Key)), true
	}
	var d [sha256.Size]byte
	b, err := hex.DecodeString(k.SHA256)
	if err != nil || len(b) != sha256.Size {
		return d, false
	}
	copy(d[:], b)
	return d, true
}

// ResolveEnv reads a named key's KeyEnv through lookup (os.LookupEnv in
// the daemon) into Key. It fails, naming the key and the variable (never
// a value), when the variable is unset or empty. Keys without KeyEnv are
// left as they are.
func (k *APIKey) ResolveEnv(lookup func(string) (string, bool)) error {
	if k.KeyEnv == "" {
		return nil
	}
	v, ok := lookup(k.KeyEnv)
	if !ok || strings.TrimSpace(v) == "" {
		return fmt.Errorf("API key %q: the environment variable %s named by key_env is unset or empty", k.Name, k.KeyEnv)
	}
	k.Key = v
	return nil
}

// LogValue shows the key's name only.
func (k APIKey) LogValue() slog.Value { return slog.StringValue(k.Name) }

// String shows the key's name only.
func (k APIKey) String() string { return "API key " + k.Name }

// RateLimit is a key's rate_limit, "<count>/<period>": Count calls per
// Per.
type RateLimit struct {
	Count int
	Per   time.Duration
}

// ParseRateLimit reads "<count>/<period>": count a positive integer,
// period "s", "m" or "h" (also "sec", "second", "min", "minute", "hour")
// or a positive Go duration ("10s"): "5/s", "100/m", "20/10s".
func ParseRateLimit(s string) (RateLimit, error) {
	n, per, err := ratelimit.ParseCount(s)
	if err != nil {
		return RateLimit{}, fmt.Errorf(`rate_limit %q is not "<count>/<period>", such as "5/s", "100/m" or "20/10s"`, s)
	}
	return RateLimit{Count: n, Per: per}, nil
}

// String returns the limit as "<count>/<period>".
func (r RateLimit) String() string {
	switch r.Per {
	case time.Second:
		return strconv.Itoa(r.Count) + "/s"
	case time.Minute:
		return strconv.Itoa(r.Count) + "/m"
	case time.Hour:
		return strconv.Itoa(r.Count) + "/h"
	}
	return strconv.Itoa(r.Count) + "/" + r.Per.String()
}

// ValidKeyName reports whether name may name an API key: 1 to 64 of
// A-Z a-z 0-9 _ - and '.', starting with a letter or digit, and not a
// principal utcpd uses itself ("cli", "stdio", or starting with "utcpd",
// such as the admin's "utcpd-admin"). Plain keys' "key:..." principals
// hold a colon, so no name collides with them.
func ValidKeyName(name string) bool {
	if name == "" || len(name) > 64 || name == "cli" || name == "stdio" || strings.HasPrefix(strings.ToLower(name), "utcpd") {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case (c == '_' || c == '-' || c == '.') && i > 0:
		default:
			return false
		}
	}
	return true
}
