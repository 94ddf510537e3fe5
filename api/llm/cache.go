package llm

import (
	"encoding/json"
	"io"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/utcpd/utcpd/utcp"
)

// Cache makes repeated exports of a gateway's tools cheap: it keeps each
// tool's encoded definition, per provider and strict variant, and the name
// mapping of the whole tool set, and re-renders only what changed.
//
// Tools are recognised by pointer. That is safe for the gateway's tools
// (gateway.ListTools, SearchTools): the registry never modifies a
// registered tool or its definition, and a replaced tool (refresh,
// reload, PUT) is a new *utcp.Tool, so it is rendered afresh. Callers
// passing other tools must not modify them after the first export either.
//
// The set is the list given as all (gateway.ListTools, within the
// caller's API key scope): when it holds the same pointers in the same
// order as one of the last maxSnapshots sets (one per key scope in use,
// typically), that set's mapping and renderings are used as they are;
// otherwise the mapping is computed again, the renderings of its tools
// that a kept set has are kept and the others made afresh, and the
// oldest set is dropped. A rendering is used only when it was made with
// the name the set's mapping gives (a collision appearing or vanishing
// elsewhere in the set can change a tool's name), so the memory held is
// bounded by the tools of the kept sets times the variants asked for.
//
// The zero Cache is ready to use; a Cache is safe for concurrent use. Its
// results are byte for byte those of Export with NewNames over all.
type Cache struct {
	mu    sync.Mutex                  // serialises rebuilds of snaps
	snaps atomic.Pointer[[]*snapshot] // the kept sets, the newest first
}

// maxSnapshots is how many tool sets a Cache keeps: the daemon's sets
// differ by API key scope.
const maxSnapshots = 8

// find returns the kept snapshot of all, nil if none.
func (c *Cache) find(all []*utcp.Tool) *snapshot {
	if ss := c.snaps.Load(); ss != nil {
		for _, s := range *ss {
			if slices.Equal(s.all, all) {
				return s
			}
		}
	}
	return nil
}

// snapshot is the cached state of one tool set. It is immutable except
// for the renderings inside its entries, which are atomic.
type snapshot struct {
	all     []*utcp.Tool
	names   *Names
	entries map[*utcp.Tool]*entry
}

// numVariants counts the renderings a tool can have (see variant).
const numVariants = 4

// entry holds one tool's renderings, by variant.
type entry struct {
	r [numVariants]atomic.Pointer[rendering]
}

// rendering is one encoded tool definition and the function name it was
// encoded with.
type rendering struct {
	name string
	data []byte
}

// variant numbers the distinct renderings of a tool: OpenAI, OpenAI
// strict, Anthropic, Gemini (strict only matters for OpenAI).
func variant(p Provider, opts ExportOptions) int {
	switch p {
	case OpenAI:
		if opts.Strict {
			return 1
		}
		return 0
	case Anthropic:
		return 2
	default:
		return 3
	}
}

// Names returns the mapping NewNames computes over the names of all,
// reusing the previous one when all is the same list as before.
func (c *Cache) Names(all []*utcp.Tool) *Names { return c.snapshot(all).names }

// Export returns what Export(p, tools, NewNames(names of all), opts)
// returns, from cached renderings where it can. tools is normally a
// selection of all; a tool outside all is rendered but not kept.
func (c *Cache) Export(p Provider, tools, all []*utcp.Tool, opts ExportOptions) (json.RawMessage, error) {
	if _, err := ParseProvider(string(p)); err != nil {
		return nil, err
	}
	s := c.snapshot(all)
	return render(p, tools, s.names, opts, s.entries)
}

// ExportPieces is Export for streaming: it returns the length of the
// export and a function writing it to w piece by piece from the cached
// per-tool renderings, so that no whole body is assembled. The bytes are
// Export's.
func (c *Cache) ExportPieces(p Provider, tools, all []*utcp.Tool, opts ExportOptions) (int, func(w io.Writer), error) {
	if _, err := ParseProvider(string(p)); err != nil {
		return 0, nil, err
	}
	s := c.snapshot(all)
	frags, err := renderFrags(p, tools, s.names, opts, s.entries)
	if err != nil {
		return 0, nil, err
	}
	return joinedLen(p, frags), func(w io.Writer) { writeJoined(w, p, frags) }, nil
}

// snapshot returns the snapshot of all, building it when no kept one
// holds that list.
func (c *Cache) snapshot(all []*utcp.Tool) *snapshot {
	if s := c.find(all); s != nil {
		return s
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.find(all); s != nil {
		return s
	}
	var kept []*snapshot
	if ss := c.snaps.Load(); ss != nil {
		kept = *ss
	}
	qs := make([]string, len(all))
	for i, t := range all {
		qs[i] = t.Name
	}
	s := &snapshot{all: slices.Clone(all), names: NewNames(qs), entries: make(map[*utcp.Tool]*entry, len(all))}
	for _, t := range all {
		if _, dup := s.entries[t]; dup {
			continue
		}
		e := (*entry)(nil)
		for _, old := range kept {
			if e = old.entries[t]; e != nil {
				break
			}
		}
		if e == nil {
			e = new(entry)
		}
		s.entries[t] = e
	}
	next := append([]*snapshot{s}, kept[:min(len(kept), maxSnapshots-1)]...)
	c.snaps.Store(&next)
	return s
}
