package guard

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"

	"github.com/utcpd/utcpd/utcp"
)

// The built-in guard kinds, registered in Default.
const (
	KindAllowAll = "allow_all" // AllowAll
	KindDenyAll  = "deny_all"  // DenyAll
)

// Info describes one guard kind to a Registry.
type Info struct {
	// Kind is the name configurations use ("policy", "webhook"): lower
	// case, non-empty.
	Kind string
	// New builds a guard from its configuration section (raw JSON, possibly
	// empty) and a logger already tagged with the guard's kind and name. A
	// configuration it cannot use is an error (the caller reports it as
	// invalid_config).
	New func(cfg json.RawMessage, log *slog.Logger) (Guard, error)
}

// Registry maps guard kinds to their Info. It is safe for concurrent use.
type Registry struct {
	mu    sync.RWMutex
	infos map[string]Info
}

// NewRegistry returns an empty Registry.
func NewRegistry() *Registry { return &Registry{infos: map[string]Info{}} }

// Default is the Registry guard kind packages register into from init.
// Only cmd/utcpd and tests should read it; everything else takes a
// *Registry. It holds the built-in kinds allow_all and deny_all.
var Default = NewRegistry()

func init() {
	MustRegister(Info{Kind: KindAllowAll, New: builtin(AllowAll)})
	MustRegister(Info{Kind: KindDenyAll, New: builtin(DenyAll)})
}

// builtin returns the New of a kind that takes no configuration: it
// accepts an empty section, null or {}, and an object whose only fields
// are the entry's own "kind" and "name" (the daemon hands a guard its
// whole configuration entry).
func builtin(g Guard) func(json.RawMessage, *slog.Logger) (Guard, error) {
	return func(cfg json.RawMessage, _ *slog.Logger) (Guard, error) {
		switch c := string(bytes.TrimSpace(cfg)); c {
		case "", "null", "{}":
			return g, nil
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(cfg, &m); err != nil {
			return nil, fmt.Errorf("this guard kind takes no configuration")
		}
		delete(m, "kind")
		delete(m, "name")
		if len(m) > 0 {
			return nil, fmt.Errorf("this guard kind takes no configuration")
		}
		return g, nil
	}
}

// MustRegister registers info in Default and panics on error. Call it only
// from init functions.
func MustRegister(info Info) {
	if err := Default.Register(info); err != nil {
		panic(err)
	}
}

// Register adds info. It fails if the kind is empty or not lower case, is
// already registered, or info has no New.
func (r *Registry) Register(info Info) error {
	if info.Kind == "" || info.Kind != strings.ToLower(info.Kind) {
		return fmt.Errorf("guard: invalid kind %q", info.Kind)
	}
	if info.New == nil {
		return fmt.Errorf("guard: %s: New is required", info.Kind)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.infos[info.Kind]; ok {
		return fmt.Errorf("guard: kind %s registered twice", info.Kind)
	}
	r.infos[info.Kind] = info
	return nil
}

// Lookup returns the Info registered for kind.
func (r *Registry) Lookup(kind string) (Info, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	info, ok := r.infos[kind]
	return info, ok
}

// Kinds returns the registered kinds, sorted.
func (r *Registry) Kinds() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, 0, len(r.infos))
	for k := range r.infos {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// New builds a guard of the given kind. An unknown kind, or a
// configuration the kind rejects, is an invalid_config *utcp.Error; for an
// unknown kind Details "valid_kinds" lists the registered ones and
// "did_you_mean" the close ones. A nil log means slog.Default().
func (r *Registry) New(kind string, cfg json.RawMessage, log *slog.Logger) (Guard, error) {
	info, ok := r.Lookup(kind)
	if !ok {
		kinds := r.Kinds()
		return nil, utcp.NewError(utcp.CodeInvalidConfig, "unknown guard kind %q (valid kinds: %s)", kind, strings.Join(kinds, ", ")).
			WithDetail("kind", kind).WithDetail("valid_kinds", kinds).WithDetail("did_you_mean", utcp.Closest(kind, kinds, 3))
	}
	if log == nil {
		log = slog.Default()
	}
	g, err := info.New(cfg, log)
	if err != nil {
		return nil, utcp.Errorf(utcp.CodeInvalidConfig, "guard %s: %w", kind, err).WithDetail("kind", kind)
	}
	if g == nil {
		return nil, utcp.NewError(utcp.CodeInternal, "guard %s: New returned no guard", kind).WithDetail("kind", kind)
	}
	return g, nil
}
