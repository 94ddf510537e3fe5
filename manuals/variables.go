package manuals

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/joho/godotenv"

	"github.com/utcpd/utcpd/utcp"
)

// Namespace returns the key under which variable key is looked up for a
// manual: the manual name, sanitised with utcp.SanitizeName, with every
// '_' doubled, then '_', then key. A manual "web_scraper" and key
// "API_KEY" give "web__scraper_API_KEY"; "github" and "TOKEN" give
// "github_TOKEN". An empty manual name means no namespace: key itself.
// This is python-utcp's and typescript-utcp's rule.
//
// The rule is injective only for keys that do not start with '_': in
// Namespace(m, k) every run of '_' that comes from m has even length, so
// the first run of odd length holds the separator, and when k does not
// start with '_' that run ends at the separator; m and k are read back
// from the result (SplitNamespace). A key starting with '_' breaks this:
// manual "evil" with key "_x_API_KEY" gives "evil__x_API_KEY", which is
// manual "evil_x" with key "API_KEY". Substitute therefore refuses such
// references (CrossNamespace) whenever there is a namespace.
func Namespace(manual, key string) string {
	if manual == "" {
		return key
	}
	ns := utcp.SanitizeName(manual)
	return strings.ReplaceAll(ns, "_", "__") + "_" + key
}

// CrossNamespace reports whether a reference to key from a template of
// manual could resolve into another manual's namespace: with a namespace
// (manual != ""), a key that is empty or starts with '_'. Every other
// key of [A-Za-z0-9_]+ is namespaced unambiguously.
func CrossNamespace(manual, key string) bool {
	return manual != "" && (key == "" || key[0] == '_')
}

// SplitNamespace reads a namespaced variable name back into the
// sanitised manual name and the key that Namespace made it from; ok is
// false when name is not Namespace(m, k) for any sanitised manual m and
// key k that CrossNamespace accepts. It is Namespace's inverse, which
// shows that two different accepted (manual, key) pairs never share a
// namespaced name.
func SplitNamespace(name string) (manual, key string, ok bool) {
	for i := 0; i < len(name); {
		if name[i] != '_' {
			i++
			continue
		}
		j := i
		for j < len(name) && name[j] == '_' {
			j++
		}
		if (j-i)%2 == 0 {
			i = j
			continue
		}
		// The first odd run: its last '_' is the separator.
		ns, k := name[:j-1], name[j:]
		if ns == "" || k == "" {
			return "", "", false
		}
		return strings.ReplaceAll(ns, "__", "_"), k, true
	}
	return "", "", false
}

// ResolverOptions configure NewResolver.
type ResolverOptions struct {
	// LookupEnv reads the process environment, last in the lookup order.
	// Nil means os.LookupEnv; tests inject a map.
	LookupEnv func(key string) (string, bool)
}

// Resolver looks variables up by exact key in, in order: the
// configuration's variables, each dotenv loader, the environment. The
// first non-empty value wins; an empty value counts as missing (as in
// python-utcp). A Resolver is safe for concurrent use. A nil *Resolver
// resolves nothing.
//
// Dotenv files are re-read when they change (checked by modification
// time and size at each lookup), so a rotated secret is picked up without
// a restart; Reload forces a re-read. When a file that was read becomes
// unreadable, the last values read stay in use.
type Resolver struct {
	vars  map[string]string
	files []*dotenvFile
	env   func(string) (string, bool)
}

// NewResolver builds the Resolver of cfg (nil cfg: environment only). It
// reads every dotenv loader of cfg; a missing file is an invalid_config
// error naming the loader and the file, unless the loader is optional.
// It then substitutes the configuration's variables once, as python-utcp
// does: ${VAR} and $VAR in their values are resolved against the loaders
// and the environment (not other configuration variables), `$$` is a
// literal '$', and a value matching the $ref rule is kept as written. A
// reference that does not resolve is a variable_not_found error naming the
// variable and the configuration key that refers to it.
func NewResolver(cfg *Config, opts ResolverOptions) (*Resolver, error) {
	r := &Resolver{vars: map[string]string{}, env: opts.LookupEnv}
	if r.env == nil {
		r.env = os.LookupEnv
	}
	if cfg == nil {
		return r, nil
	}
	for _, l := range cfg.Loaders {
		f := &dotenvFile{path: l.EnvFilePath, optional: l.Optional, location: l.Location}
		if err := f.reload(); err != nil {
			return nil, err
		}
		r.files = append(r.files, f)
	}
	external := func(key string) (string, bool) { return r.lookupExternal(key) }
	keys := sortedKeys(cfg.Variables)
	var missing []string
	var first *utcp.Error
	for _, k := range keys {
		v, _, miss := expand(cfg.Variables[k], external)
		for _, m := range miss {
			if first == nil {
				path := joinKey("variables", k)
				first = utcp.NewError(utcp.CodeVariableNotFound,
					"%s: configuration variable %s refers to %s, which is not set in a dotenv file or the environment",
					formatLocation(cfg.Path, cfg.line(cfg.Path, path), path), k, m.name).
					WithDetail("variable", m.name).WithDetail("path", path)
			}
			missing = append(missing, m.name)
		}
		r.vars[k] = v
	}
	if first != nil {
		slices.Sort(missing)
		first.WithDetail("variables", slices.Compact(missing))
		return nil, first
	}
	return r, nil
}

// Lookup returns the value of the variable key (an exact, already
// namespaced key) and whether it is set to a non-empty value.
func (r *Resolver) Lookup(key string) (string, bool) {
	if r == nil {
		return "", false
	}
	if v := r.vars[key]; v != "" {
		return v, true
	}
	return r.lookupExternal(key)
}

// lookupExternal looks key up in the loaders, then the environment.
func (r *Resolver) lookupExternal(key string) (string, bool) {
	for _, f := range r.files {
		if v := f.get(key); v != "" {
			return v, true
		}
	}
	if v, ok := r.env(key); ok && v != "" {
		return v, true
	}
	return "", false
}

// Reload re-reads every dotenv file now. A file that cannot be read keeps
// its previous values; the errors (a missing non-optional file, a parse
// error) are returned joined.
func (r *Resolver) Reload() error {
	if r == nil {
		return nil
	}
	var errs []error
	for _, f := range r.files {
		if err := f.reload(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// dotenvFile is one dotenv loader's file and its last values.
type dotenvFile struct {
	path     string
	optional bool
	location string

	mu     sync.Mutex
	vals   map[string]string
	mod    time.Time
	size   int64
	exists bool
}

// get returns the value of key, re-reading the file first when it
// changed since it was last read.
func (f *dotenvFile) get(key string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	fi, err := os.Stat(f.path)
	switch {
	case err == nil && (!f.exists || !fi.ModTime().Equal(f.mod) || fi.Size() != f.size):
		_ = f.readLocked() // on failure the old values stay
	case err != nil && errors.Is(err, fs.ErrNotExist) && f.exists && f.optional:
		f.vals, f.exists = nil, false
	}
	return f.vals[key]
}

func (f *dotenvFile) reload() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.readLocked()
}

func (f *dotenvFile) readLocked() error {
	fi, err := os.Stat(f.path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) && f.optional {
			f.vals, f.exists = nil, false
			return nil
		}
		return f.err(err)
	}
	data, err := readFileCapped(f.path)
	if err != nil {
		return f.err(err)
	}
	vals, err := godotenv.UnmarshalBytes(data)
	if err != nil {
		return f.err(fmt.Errorf("malformed dotenv file: %w", err))
	}
	f.vals, f.mod, f.size, f.exists = vals, fi.ModTime(), fi.Size(), true
	return nil
}

func (f *dotenvFile) err(err error) error {
	where := f.location
	if where != "" {
		where += ": "
	}
	msg := fmt.Sprintf("%sdotenv file %s cannot be read: %v", where, f.path, err)
	if errors.Is(err, fs.ErrNotExist) {
		msg = fmt.Sprintf("%sdotenv file %s does not exist; create it or set \"optional\": true on the loader", where, f.path)
	}
	return (&utcp.Error{Code: utcp.CodeInvalidConfig, Message: msg, Err: err}).WithDetail("env_file_path", f.path)
}
