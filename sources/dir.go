package sources

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/utcpd/utcpd/manuals"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/utcp"
)

// MaxFileBytes caps a file of the manuals folder.
const MaxFileBytes = 16 << 20

// dirFile is what the folder watcher knows of one *.json file.
type dirFile struct {
	mod  time.Time
	size int64
	// want is the file's manual while the file is good; nil while broken.
	want *Wanted
	// name is the manual name of the file's last good version, "" if it
	// never was good.
	name string
}

// Dir is the source of a manuals folder: it turns the folder's *.json
// files into manuals. A file holding a manual call template registers that template (named by
// its "name", else by the file's base name); a file holding a UTCP manual
// or an OpenAPI document registers a file call template pointing at it,
// named by the file's base name. Names are sanitised. A file that stops
// parsing keeps its last good version serving.
type Dir struct {
	dir   string
	log   *slog.Logger
	set   *Reconciler
	files map[string]*dirFile
	// readErr is the last error reading the folder, logged once.
	readErr string
}

var (
	_ Source = (*Dir)(nil)
	_ Source = (*Config)(nil)
)

// NewDir returns the source of the manuals folder dir, registered
// through set.
func NewDir(dir string, set *Reconciler, log *slog.Logger) *Dir {
	return &Dir{dir: dir, set: set, log: log, files: map[string]*dirFile{}}
}

// Path is the folder.
func (d *Dir) Path() string { return d.dir }

// Sync looks at the folder and syncs the manual set when a file was
// added, changed (modification time or size) or removed, or when force is
// set (SIGHUP: every file is read again and failed registrations are
// retried). When the folder cannot be read the registered manuals stay.
func (d *Dir) Sync(ctx context.Context, vars *manuals.Resolver, force bool) (Stats, bool) {
	entries, err := os.ReadDir(d.dir)
	if err != nil {
		if msg := err.Error(); msg != d.readErr {
			d.readErr = msg
			d.log.Error("reading the manuals folder; its manuals stay as they are", "dir", d.dir, "err", err)
		}
		return Stats{}, false
	}
	if d.readErr != "" {
		d.readErr = ""
		d.log.Info("manuals folder readable again", "dir", d.dir)
	}
	changed := force
	seen := map[string]bool{}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		path := filepath.Join(d.dir, e.Name())
		info, err := os.Stat(path) // follows symbolic links
		if err != nil || !info.Mode().IsRegular() {
			continue
		}
		seen[path] = true
		f := d.files[path]
		if f != nil && !force && f.mod.Equal(info.ModTime()) && f.size == info.Size() {
			continue
		}
		if f == nil {
			f = &dirFile{}
			d.files[path] = f
		}
		f.mod, f.size = info.ModTime(), info.Size()
		changed = true
		w, err := ReadDirFile(path)
		if err != nil {
			f.want = nil
			if f.name != "" {
				d.log.Error("manuals folder: file is broken; its last good version keeps serving", "file", path, "manual", f.name, "err", err)
			} else {
				d.log.Error("manuals folder: file not loaded", "file", path, "err", err)
			}
			continue
		}
		f.want = w
	}
	for path := range d.files {
		if !seen[path] {
			delete(d.files, path)
			changed = true
		}
	}
	if !changed {
		return Stats{}, false
	}
	paths := slices.Sorted(maps.Keys(d.files))
	var want []Wanted
	owner := map[string]string{}
	for _, path := range paths {
		f := d.files[path]
		w := f.want
		if w == nil {
			if f.name == "" {
				continue
			}
			w = &Wanted{Name: f.name, Origin: path, Keep: true}
		}
		if other, taken := owner[w.Name]; taken {
			d.log.Error("manuals folder: two files give the same manual name; the first one is used", "manual", w.Name, "file", path, "used", other)
			continue
		}
		owner[w.Name] = path
		want = append(want, *w)
	}
	st := d.set.Sync(ctx, want, vars, force)
	// A file is good (its name remembered) once its manual registered.
	for _, path := range paths {
		f := d.files[path]
		if f.want == nil {
			continue
		}
		if d.set.Registered(f.want.Name) && owner[f.want.Name] == path {
			f.name = f.want.Name
		}
	}
	return st, true
}

// Watch polls the folder every interval until ctx ends, calling Sync
// under lock (which serialises it with the SIGHUP reload).
func (d *Dir) Watch(ctx context.Context, interval time.Duration, lock func() func(), vars func() *manuals.Resolver) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		unlock := lock()
		if ctx.Err() == nil {
			if st, changed := d.Sync(ctx, vars(), false); changed {
				d.log.Info("manuals folder reloaded", "dir", d.dir, "added", st.Added, "replaced", st.Replaced,
					"removed", st.Removed, "failed", st.Failed, "unchanged", st.Unchanged)
			}
		}
		unlock()
	}
}

// ReadDirFile reads one file of the manuals folder and returns the
// manual it stands for.
func ReadDirFile(path string) (*Wanted, error) {
	data, err := ReadCapped(path, MaxFileBytes)
	if err != nil {
		return nil, err
	}
	base := utcp.SanitizeName(strings.TrimSuffix(filepath.Base(path), filepath.Ext(path)))
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, fmt.Errorf("not a JSON object: a file of the manuals folder holds one manual call template or one manual")
	}
	var head map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &head); err != nil {
		return nil, utcp.Errorf(utcp.CodeInvalidTemplate, "invalid JSON: %w", err)
	}
	_, hasType := head["call_template_type"]
	_, hasLegacyType := head["provider_type"]
	isDoc := !hasType && !hasLegacyType
	if isDoc {
		_, openapi := head["openapi"]
		_, swagger := head["swagger"]
		_, paths := head["paths"]
		// The folder is trusted like the configuration: the file
		// template allows the protocols the manual's tools name.
		allowed, err := DocumentProtocols("file", trimmed, openapi || swagger || paths)
		if err != nil {
			return nil, err
		}
		abs, err := filepath.Abs(path)
		if err != nil {
			return nil, err
		}
		raw, _ := json.Marshal(map[string]any{"name": base, "call_template_type": "file", "file_path": abs, "allowed_communication_protocols": allowed})
		return &Wanted{Name: base, Raw: raw, Origin: path, Extra: data}, nil
	}
	raw := json.RawMessage(trimmed)
	var name string
	_ = json.Unmarshal(head["name"], &name) // not a string: no name
	if name == "" {
		head["name"], _ = json.Marshal(base)
		raw, _ = json.Marshal(head)
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	t, _, err := manuals.PrepareTemplate(raw, dir)
	if err != nil {
		return nil, err
	}
	if _, err := transports.Default.ParseTemplate(t.Raw); err != nil {
		return nil, err
	}
	return &Wanted{Name: t.Name, Raw: t.Raw, Origin: path}, nil
}

// ReadCapped reads a file of at most limit bytes.
func ReadCapped(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if info.Size() > limit {
		return nil, fmt.Errorf("file is larger than %d bytes", limit)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("file is larger than %d bytes", limit)
	}
	return data, nil
}

// DocumentProtocols returns what a call template of type own that carries
// the manual or OpenAPI document data must allow so that none of its tools
// is dropped: own, and the call_template_type of every tool template of a
// manual (http for an OpenAPI document, whose operations become http
// tools). A document that is neither is an error.
func DocumentProtocols(own string, data []byte, isOpenAPI bool) ([]string, error) {
	allowed := []string{own}
	switch {
	case manuals.IsManual(data):
		m, _, err := manuals.ParseManual(data)
		if err != nil {
			return nil, err
		}
		for _, t := range m.Tools {
			if t.ToolCallTemplate != nil && t.ToolCallTemplate.Type != "" && !slices.Contains(allowed, t.ToolCallTemplate.Type) {
				allowed = append(allowed, t.ToolCallTemplate.Type)
			}
		}
	case isOpenAPI:
		if !slices.Contains(allowed, "http") {
			allowed = append(allowed, "http")
		}
	default:
		return nil, fmt.Errorf("neither a manual call template (no call_template_type) nor a UTCP manual (no tools array) nor an OpenAPI document")
	}
	return allowed, nil
}
