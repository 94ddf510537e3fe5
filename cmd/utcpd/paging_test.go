package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// bigOpenAPI returns an OpenAPI document with n GET operations whose
// operationIds are a permutation of t0000..t(n-1), so that document
// order is not name order.
func bigOpenAPI(n int) string {
	paths := map[string]any{}
	for i := range n {
		id := fmt.Sprintf("t%04d", (i*7919)%n)
		paths[fmt.Sprintf("/items%d/{id}", i)] = map[string]any{"get": map[string]any{
			"operationId": id, "summary": "Item " + id,
			"parameters": []any{map[string]any{"name": "id", "in": "path", "required": true, "schema": map[string]any{"type": "string"}}},
			"responses":  map[string]any{"200": map[string]any{"description": "ok"}},
		}}
	}
	doc, _ := json.Marshal(map[string]any{
		"openapi": "3.0.3", "info": map[string]any{"title": "big", "version": "1"},
		"servers": []any{map[string]any{"url": "http://127.0.0.1:9"}}, "paths": paths,
	})
	return string(doc)
}

// TestListingPagesThrough1500Tools: a manual of 1,500 OpenAPI operations
// registered with the real binary is listed completely through
// next_cursor over REST (1000 + 500), by utcpd tools list (sorted by
// name), and streamed whole by /utcp and /v1/export.
func TestListingPagesThrough1500Tools(t *testing.T) {
	t.Parallel()
	const n = 1500
	dir := t.TempDir()
	d := startDaemon(t, daemonOpts{})
	doc := filepath.Join(dir, "big.json")
	writeFile(t, doc, bigOpenAPI(n))
	env := []string{"UTCPD_SERVER=" + d.URL}
	if out, errOut, code := cli(t, dir, env, "manuals", "add", doc); code != 0 || !strings.Contains(out, fmt.Sprintf("with %d tools", n)) {
		t.Fatalf("manuals add: exit %d\n%.500s\n%s", code, out, errOut)
	}
	var want []string
	for i := range n {
		want = append(want, fmt.Sprintf("big.t%04d", i))
	}

	// REST: two pages.
	var got []string
	cursor, pages := "", 0
	for {
		u := d.URL + "/v1/tools?limit=1000"
		if cursor != "" {
			u += "&cursor=" + url.QueryEscape(cursor)
		}
		status, body := request(t, http.MethodGet, u, "", "")
		var page struct {
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"`
			NextCursor *string `json:"next_cursor"`
		}
		if err := json.Unmarshal(body, &page); err != nil || status != http.StatusOK {
			t.Fatalf("GET %s: %d %.300s", u, status, body)
		}
		pages++
		for _, tl := range page.Tools {
			got = append(got, tl.Name)
		}
		if page.NextCursor == nil {
			break
		}
		if pages == 1 && len(page.Tools) != 1000 {
			t.Errorf("first page: %d tools, want 1000", len(page.Tools))
		}
		cursor = *page.NextCursor
		if pages > 3 {
			t.Fatal("more than 3 pages")
		}
	}
	if pages != 2 || !slices.Equal(got, want) {
		t.Errorf("REST listing: %d pages, %d tools (first %v), want 2 pages of the %d tools in name order", pages, len(got), got[:min(3, len(got))], n)
	}
	status, body := request(t, http.MethodGet, d.URL+"/v1/tools?cursor=not-a-cursor", "", "")
	if status != http.StatusBadRequest || !strings.Contains(string(body), `"invalid_request"`) || !strings.Contains(string(body), `"cursor"`) {
		t.Errorf("malformed cursor: %d %s", status, body)
	}

	// The CLI: every tool, sorted, in the table and in JSON.
	out, errOut, code := cli(t, dir, env, "tools", "list")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != n+1 {
		t.Fatalf("tools list: exit %d, %d lines\n%s", code, len(lines), errOut)
	}
	var names []string
	for _, l := range lines[1:] {
		names = append(names, strings.Fields(l)[0])
	}
	if !slices.Equal(names, want) {
		t.Errorf("tools list is not every tool sorted by name: %v ...", names[:5])
	}
	out, errOut, code = cli(t, dir, env, "tools", "list", "--json")
	var list struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil || code != 0 || len(list.Tools) != n || list.Tools[0].Name != "big.t0000" || list.Tools[n-1].Name != want[n-1] {
		t.Fatalf("tools list --json: exit %d, %d tools, %v\n%s", code, len(list.Tools), err, errOut)
	}
	out, errOut, code = cli(t, dir, env, "tools", "search", "item", "--limit", "1200")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); code != 0 || len(lines) != 1201 {
		t.Errorf("tools search --limit 1200 (two pages): exit %d, %d lines\n%s", code, len(lines), errOut)
	}

	// /utcp and the export stream every tool.
	status, body = request(t, http.MethodGet, d.URL+"/utcp", "", "")
	var manual struct {
		Tools []json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(body, &manual); err != nil || status != http.StatusOK || len(manual.Tools) < n {
		t.Errorf("/utcp: %d, %d tools, %v", status, len(manual.Tools), err)
	}
	status, body = request(t, http.MethodGet, d.URL+"/v1/export/anthropic?codemode=false", "", "")
	var exported []json.RawMessage
	if err := json.Unmarshal(body, &exported); err != nil || status != http.StatusOK || len(exported) != n {
		t.Errorf("/v1/export/anthropic: %d, %d tools, %v", status, len(exported), err)
	}
}
