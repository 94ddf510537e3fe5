package mcp

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/transports/transporttest"
	"github.com/utcpd/utcpd/utcp"
)

// endlessServer is an MCP server (go-sdk, Streamable HTTP on
// 127.0.0.1:0) whose tools/list answers perPage tools and a nextCursor on
// every page, forever. It counts the pages it served.
func endlessServer(t *testing.T, perPage int) (url string, pages *atomic.Int64) {
	t.Helper()
	pages = &atomic.Int64{}
	srv := sdk.NewServer(&sdk.Implementation{Name: "endless", Version: "1"}, nil)
	srv.AddTool(&sdk.Tool{Name: "seed", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{}, nil
		})
	srv.AddReceivingMiddleware(func(next sdk.MethodHandler) sdk.MethodHandler {
		return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
			if method != "tools/list" {
				return next(ctx, method, req)
			}
			n := pages.Add(1)
			res := &sdk.ListToolsResult{NextCursor: "page" + strconv.FormatInt(n, 10)}
			for i := range perPage {
				res.Tools = append(res.Tools, &sdk.Tool{Name: "t" + strconv.FormatInt(n, 10) + "_" + strconv.Itoa(i), InputSchema: map[string]any{"type": "object"}})
			}
			return res, nil
		}
	})
	ts := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	return ts.URL, pages
}

func endlessTemplate(t *testing.T, url string) *utcp.CallTemplate {
	return parse(t, transporttest.Template(t, Type, map[string]any{"config": map[string]any{"mcpServers": map[string]any{
		"endless": map[string]any{"url": url},
	}}}))
}

// TestEndlessPagingRefused: a server that always answers a nextCursor
// (no tools on its pages, so no tool cap stops it) is refused after
// MaxListPages pages, and the manual is not kept.
func TestEndlessPagingRefused(t *testing.T) {
	url, pages := endlessServer(t, 0)
	tr := counted(newTestTransport(t, transports.Options{})) // Count releases what a failed registration started
	tmpl := endlessTemplate(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	m, err := tr.RegisterManual(ctx, tmpl)
	if err == nil || utcp.CodeOf(err) != utcp.CodeDiscoveryFailed || !strings.Contains(err.Error(), "100 pages") {
		t.Fatalf("RegisterManual = %v, %v; want discovery_failed naming the page limit", m, err)
	}
	if got := pages.Load(); got != MaxListPages {
		t.Fatalf("server paged %d times, want exactly %d", got, MaxListPages)
	}
	if _, err := tr.CallTool(ctx, &utcp.Call{Tool: "m.endless.seed", Manual: "m", Name: "endless.seed", Template: tmpl}); utcp.CodeOf(err) != utcp.CodeManualNotFound {
		t.Fatalf("the refused manual is still usable: %v", err)
	}
}

// TestPagedToolCapRefused: pages full of tools stop at the context's
// MaxTools, before the page cap.
func TestPagedToolCapRefused(t *testing.T) {
	url, pages := endlessServer(t, 50)
	tr := newTestTransport(t, transports.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ctx = transports.WithDiscoveryLimits(ctx, transports.DiscoveryLimits{MaxTools: 120})
	_, err := tr.RegisterManual(ctx, endlessTemplate(t, url))
	if utcp.CodeOf(err) != utcp.CodeDiscoveryFailed || !strings.Contains(err.Error(), "max_tools_per_manual") {
		t.Fatalf("RegisterManual: %v; want discovery_failed naming max_tools_per_manual", err)
	}
	if got := pages.Load(); got != 3 {
		t.Fatalf("server paged %d times, want 3 (150 tools > 120)", got)
	}
}
