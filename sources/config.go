package sources

import (
	"context"
	"sync/atomic"

	"github.com/utcpd/utcpd/manuals"
)

// Config is the source of the configuration file's manual call templates.
type Config struct {
	r   *Reconciler
	cfg atomic.Pointer[manuals.Config]
}

// NewConfig returns the source of cfg's manuals (nil: none), registered
// through r.
func NewConfig(r *Reconciler, cfg *manuals.Config) *Config {
	c := &Config{r: r}
	c.cfg.Store(cfg)
	return c
}

// Set replaces the configuration; the next Sync applies it.
func (c *Config) Set(cfg *manuals.Config) { c.cfg.Store(cfg) }

// Sync registers the configuration's manuals. It always reports a change.
func (c *Config) Sync(ctx context.Context, vars *manuals.Resolver, force bool) (Stats, bool) {
	return c.r.Sync(ctx, ConfigWanted(c.cfg.Load()), vars, force), true
}

// ConfigWanted lists the manuals of a configuration: its usable manual
// call templates, and its rejected ones (manuals.Config.Rejected) with
// their Err.
func ConfigWanted(cfg *manuals.Config) []Wanted {
	if cfg == nil {
		return nil
	}
	out := make([]Wanted, 0, len(cfg.ManualCallTemplates)+len(cfg.Rejected))
	for _, t := range cfg.ManualCallTemplates {
		out = append(out, Wanted{Name: t.Name, Raw: t.Raw, Origin: t.Location})
	}
	for _, r := range cfg.Rejected {
		out = append(out, Wanted{Name: r.Name, Raw: r.Raw, Origin: r.Location, Err: r.Err()})
	}
	return out
}
