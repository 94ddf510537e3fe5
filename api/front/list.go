package front

import (
	"context"
	"encoding/base64"
	"hash/fnv"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/utcpd/utcpd/api/httpx"
	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/utcp"
)

// MaxCursorBytes caps the length of a ?cursor= value.
const MaxCursorBytes = 4096

// Cursor kinds: the first byte of a decoded cursor.
const (
	cursorList   = "n" // "n" + the last qualified name of the page
	cursorSearch = "s" // "s" + offset + ":" + the query's fingerprint
)

// sortedTools caches the tools sorted by qualified name for one
// generation of the tool set.
type sortedTools struct {
	mu    sync.Mutex
	gen   uint64
	ok    bool
	tools []*utcp.Tool
}

// sorted returns every tool sorted by qualified name (byte order). The
// slice is shared: callers must not modify it.
func (h *Handler) sorted() []*utcp.Tool {
	gen := h.gen.Load() // before listing: a change after this lists again
	c := &h.byName
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ok && c.gen == gen {
		return c.tools
	}
	ts := h.g.ListTools(context.Background()) // every tool: listPage applies the scope
	slices.SortFunc(ts, func(a, b *utcp.Tool) int { return strings.Compare(a.Name, b.Name) })
	c.tools, c.gen, c.ok = ts, gen, true
	return ts
}

// listQuery is a parsed GET /v1/tools request.
type listQuery struct {
	q      string
	tags   []string
	limit  int
	after  string // list mode: the page starts after this name
	offset int    // search mode: the page starts at this rank
}

// fingerprint identifies a search (q and the tag set) so that a search
// cursor is not used with another one.
func fingerprint(q string, tags []string) string {
	norm := make([]string, len(tags))
	for i, t := range tags {
		norm[i] = strings.ToLower(t)
	}
	slices.Sort(norm)
	norm = slices.Compact(norm)
	f := fnv.New64a()
	f.Write([]byte(q))
	for _, t := range norm {
		f.Write([]byte{0})
		f.Write([]byte(t))
	}
	return strconv.FormatUint(f.Sum64(), 36)
}

// encodeListCursor returns the cursor of the listing page that starts
// after the tool named after.
func encodeListCursor(after string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(cursorList + after))
}

// encodeSearchCursor returns the cursor of the search page that starts at
// rank offset.
func encodeSearchCursor(offset int, q string, tags []string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(cursorSearch + strconv.Itoa(offset) + ":" + fingerprint(q, tags)))
}

// parseListQuery reads q, tags, limit and cursor.
func parseListQuery(r *http.Request) (listQuery, error) {
	v := r.URL.Query()
	lq := listQuery{q: v.Get("q"), limit: DefaultLimit}
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return lq, httpx.Errorf(utcp.CodeInvalidRequest, "limit must be a positive integer, got %q", s).WithDetail("parameter", "limit")
		}
		lq.limit = min(n, MaxLimit)
	}
	for _, s := range v["tags"] {
		for t := range strings.SplitSeq(s, ",") {
			if t = strings.TrimSpace(t); t != "" {
				lq.tags = append(lq.tags, t)
			}
		}
	}
	if c := v.Get("cursor"); c != "" {
		if err := lq.readCursor(c); err != nil {
			return lq, err
		}
	}
	return lq, nil
}

// readCursor decodes an opaque cursor into lq.
func (lq *listQuery) readCursor(c string) error {
	bad := func(why string) error {
		return httpx.Errorf(utcp.CodeInvalidRequest, "cursor: %s; use the next_cursor of a previous answer unchanged, or leave cursor out for the first page", why).
			WithDetail("parameter", "cursor")
	}
	if len(c) > MaxCursorBytes {
		return bad("longer than " + strconv.Itoa(MaxCursorBytes) + " bytes")
	}
	raw, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || len(raw) < 2 {
		return bad("not a cursor of this daemon")
	}
	body := string(raw[1:])
	switch string(raw[:1]) {
	case cursorList:
		if lq.q != "" {
			return bad("it belongs to a listing (no q), not to a search")
		}
		lq.after = body
		return nil
	case cursorSearch:
		if lq.q == "" {
			return bad("it belongs to a search (q), not to a listing")
		}
		off, fp, ok := strings.Cut(body, ":")
		n, err := strconv.Atoi(off)
		if !ok || err != nil || n < 0 || n > 1<<30 {
			return bad("not a cursor of this daemon")
		}
		if fp != fingerprint(lq.q, lq.tags) {
			return bad("it belongs to another q or tags")
		}
		lq.offset = n
		return nil
	}
	return bad("not a cursor of this daemon")
}

func (h *Handler) list(w http.ResponseWriter, r *http.Request) {
	lq, err := parseListQuery(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	native, err := mcpParam(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	var page []*utcp.Tool
	next := ""
	if lq.q == "" {
		page, next = h.listPage(gateway.ScopeFrom(r.Context()), lq)
	} else {
		found := h.g.SearchTools(r.Context(), lq.q, lq.offset+lq.limit+1, lq.tags)
		if lq.offset < len(found) {
			page = found[lq.offset:min(len(found), lq.offset+lq.limit)]
		}
		if len(found) > lq.offset+lq.limit {
			next = encodeSearchCursor(lq.offset+lq.limit, lq.q, lq.tags)
		}
	}
	out := ToolList{Tools: make([]Tool, 0, len(page)), NextCursor: next}
	for _, t := range page {
		tool := toTool(t)
		if native {
			tool.MCP = t.MCP
		}
		out.Tools = append(out.Tools, tool)
	}
	if native {
		w.Header().Set(HeaderMCP, "1")
	}
	httpx.WriteJSON(w, http.StatusOK, out)
}

// listPage returns the listing page of lq (tools sorted by name, after
// lq.after, having one of lq.tags when given) and the next page's cursor
// ("" on the last page).
func (h *Handler) listPage(sc *gateway.Scope, lq listQuery) ([]*utcp.Tool, string) {
	all := h.sorted()
	i, _ := slices.BinarySearchFunc(all, lq.after, func(t *utcp.Tool, name string) int { return strings.Compare(t.Name, name) })
	if i < len(all) && lq.after != "" && all[i].Name == lq.after {
		i++
	}
	var want map[string]bool
	if len(lq.tags) > 0 {
		want = make(map[string]bool, len(lq.tags))
		for _, t := range lq.tags {
			want[strings.ToLower(t)] = true
		}
	}
	page := make([]*utcp.Tool, 0, min(lq.limit, len(all)-i))
	for ; i < len(all); i++ {
		t := all[i]
		if (want != nil && !hasTag(t, want)) || !sc.Allows(t) {
			continue
		}
		if len(page) == lq.limit {
			// One more match exists: there is a next page.
			return page, encodeListCursor(page[len(page)-1].Name)
		}
		page = append(page, t)
	}
	return page, ""
}

// hasTag reports whether t has one of the lowercased tags in want.
func hasTag(t *utcp.Tool, want map[string]bool) bool {
	for _, tag := range t.Tags {
		if want[strings.ToLower(tag)] {
			return true
		}
	}
	return false
}
