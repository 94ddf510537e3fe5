// Package procenv builds the environment of a child process a transport
// starts (cli commands, MCP stdio servers) from the variables it may
// inherit and its own.
package procenv

import (
	"os"
	"slices"
	"strings"
)

// Env is the environment of a child process (cli commands, MCP stdio
// servers): variables in the order first set, a later Set of a name
// replacing its value in place. The zero value is empty and ready.
type Env struct {
	vars  map[string]string
	order []string
}

// Inherit returns an Env holding the variables of the daemon's
// environment whose names match one of patterns: a pattern is a name, or
// a prefix followed by "*" (LC_*).
func Inherit(patterns []string) *Env {
	e := &Env{}
	for _, kv := range os.Environ() {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			continue
		}
		for _, pat := range patterns {
			if pat == k || strings.HasSuffix(pat, "*") && strings.HasPrefix(k, strings.TrimSuffix(pat, "*")) {
				e.Set(k, v)
				break
			}
		}
	}
	return e
}

// Set sets k to v.
func (e *Env) Set(k, v string) {
	if e.vars == nil {
		e.vars = map[string]string{}
	}
	if _, ok := e.vars[k]; !ok {
		e.order = append(e.order, k)
	}
	e.vars[k] = v
}

// SetAll sets the variables of m, in the order of their names.
func (e *Env) SetAll(m map[string]string) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		e.Set(k, m[k])
	}
}

// List returns the environment as "k=v" strings, for exec.Cmd.Env.
func (e *Env) List() []string {
	env := make([]string, 0, len(e.order))
	for _, k := range e.order {
		env = append(env, k+"="+e.vars[k])
	}
	return env
}
