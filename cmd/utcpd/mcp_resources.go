package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"

	"github.com/utcpd/utcpd/api/front"
	"github.com/utcpd/utcpd/api/mcpfront"
	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/utcp"
)

// The MCP servers' resources, templates, prompts and completions over a
// daemon's REST front, for "utcpd mcp --connect" (see docs/mcp.md).
// Subscriptions are not bridged: the REST front has no way to push an
// update, so the front declares no resources.subscribe. List
// changes are seen when the tools are polled (--poll).

var (
	_ mcpfront.ResourceBackend     = (*restBackend)(nil)
	_ mcpfront.SubscriptionRefuser = (*restBackend)(nil)
)

// RefusesSubscriptions reports that the bridge cannot relay updates.
func (b *restBackend) RefusesSubscriptions() bool { return true }

// Catalog reads GET /v1/resources and GET /v1/prompts.
func (b *restBackend) Catalog(ctx context.Context) (*gateway.MCPCatalog, error) {
	var res front.ResourceList
	if err := b.c.do(ctx, http.MethodGet, "/v1/resources", nil, nil, &res); err != nil {
		return nil, fromRemote(err)
	}
	var pr front.PromptList
	if err := b.c.do(ctx, http.MethodGet, "/v1/prompts", nil, nil, &pr); err != nil {
		return nil, fromRemote(err)
	}
	out := &gateway.MCPCatalog{}
	for _, r := range res.Resources {
		out.Resources = append(out.Resources, gateway.MCPItem{Kind: gateway.ItemResource, Name: r.URI, Native: member(r.MCP, "uri"), Manual: r.Manual, Server: r.Server, Object: r.MCP})
	}
	for _, r := range res.ResourceTemplates {
		out.ResourceTemplates = append(out.ResourceTemplates, gateway.MCPItem{Kind: gateway.ItemResourceTemplate, Name: r.URITemplate, Native: member(r.MCP, "uriTemplate"), Manual: r.Manual, Server: r.Server, Object: r.MCP})
	}
	for _, p := range pr.Prompts {
		out.Prompts = append(out.Prompts, gateway.MCPItem{Kind: gateway.ItemPrompt, Name: p.Name, Native: member(p.MCP, "name"), Manual: p.Manual, Server: p.Server, Object: p.MCP})
	}
	return out, nil
}

// member is the string member key of the JSON object o.
func member(o json.RawMessage, key string) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(o, &m) != nil {
		return ""
	}
	var s string
	_ = json.Unmarshal(m[key], &s)
	return s
}

// ReadResource reads GET /v1/resources/read?uri=.
func (b *restBackend) ReadResource(ctx context.Context, uri string, opts gateway.CallOptions) (json.RawMessage, error) {
	q := timeoutQuery(opts.Timeout)
	if q == nil {
		q = url.Values{}
	}
	q.Set("uri", uri)
	var out json.RawMessage
	if err := b.c.do(ctx, http.MethodGet, "/v1/resources/read", q, nil, &out); err != nil {
		return nil, fromRemote(err)
	}
	return out, nil
}

// GetPrompt posts to /v1/prompts/{name}/get.
func (b *restBackend) GetPrompt(ctx context.Context, name string, args map[string]string, opts gateway.CallOptions) (json.RawMessage, error) {
	var out json.RawMessage
	if err := b.c.do(ctx, http.MethodPost, "/v1/prompts/"+pathEscape(name)+"/get", timeoutQuery(opts.Timeout), front.PromptRequest{Arguments: args}, &out); err != nil {
		return nil, fromRemote(err)
	}
	return out, nil
}

// Complete posts to /v1/completions.
func (b *restBackend) Complete(ctx context.Context, params json.RawMessage, opts gateway.CallOptions) (json.RawMessage, error) {
	var out json.RawMessage
	if err := b.c.do(ctx, http.MethodPost, "/v1/completions", timeoutQuery(opts.Timeout), params, &out); err != nil {
		return nil, fromRemote(err)
	}
	return out, nil
}

var errNoSubscriptions = utcp.NewError(utcp.CodeUnsupported,
	"utcpd mcp --connect cannot subscribe to resources (the daemon's REST front cannot push updates); connect to the daemon's /mcp instead")

// SubscribeResource is refused (see above).
func (b *restBackend) SubscribeResource(context.Context, string) error { return errNoSubscriptions }

// UnsubscribeResource has nothing to end.
func (b *restBackend) UnsubscribeResource(context.Context, string) error { return nil }

// WatchResources reports nothing: the poll of the tools (Subscribe)
// reads the lists again.
func (b *restBackend) WatchResources(func(gateway.ResourceNotice)) (cancel func()) { return func() {} }
