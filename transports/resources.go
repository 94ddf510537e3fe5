package transports

import (
	"context"
	"encoding/json"

	"github.com/utcpd/utcpd/utcp"
)

// Resourcer is implemented by transports whose backends serve MCP
// resources, resource templates, prompts and completions (mcp). The
// gateway reaches it through ResourcerOf, which refuses manuals whose
// last registration ended as CallTool does.
//
// Every method names a manual by its call template, as registered
// (variables substituted), and one backend of it by server, a name
// Servers lists. Resources, templates, prompts and results are MCP JSON
// objects exactly as the backend sent them, with the backend's own URIs
// and names: mapping them to a front's namespace is the gateway's job.
// Implementations are safe for concurrent use.
type Resourcer interface {
	// Servers lists the backends of tmpl's manual, sorted; nil when the
	// transport holds no such manual.
	Servers(tmpl *utcp.CallTemplate) []string
	// Catalog lists every backend's resources, resource templates and
	// prompts (every page), in Servers order. A backend without one of
	// the features lists none of it.
	Catalog(ctx context.Context, tmpl *utcp.CallTemplate) ([]Catalog, error)
	// ReadResource answers resources/read of uri (a ReadResourceResult).
	ReadResource(ctx context.Context, tmpl *utcp.CallTemplate, server, uri string) (json.RawMessage, error)
	// GetPrompt answers prompts/get (a GetPromptResult).
	GetPrompt(ctx context.Context, tmpl *utcp.CallTemplate, server, name string, args map[string]string) (json.RawMessage, error)
	// Complete answers completion/complete for params (a CompleteParams,
	// its ref naming the backend's prompt or resource template).
	Complete(ctx context.Context, tmpl *utcp.CallTemplate, server string, params json.RawMessage) (json.RawMessage, error)
	// Subscribe asks the backend for notifications/resources/updated of
	// uri; they arrive through Options.OnResourceEvent. Subscribing twice
	// is one subscription.
	Subscribe(ctx context.Context, tmpl *utcp.CallTemplate, server, uri string) error
	// Unsubscribe ends Subscribe's subscription; unknown URIs are no
	// error.
	Unsubscribe(ctx context.Context, tmpl *utcp.CallTemplate, server, uri string) error
}

// Catalog is what one backend of a manual lists besides its tools.
type Catalog struct {
	// Server is the backend's name in its manual.
	Server string
	// Resources, ResourceTemplates and Prompts are MCP objects as listed.
	Resources, ResourceTemplates, Prompts []json.RawMessage
}

// Kinds of ResourceEvent.
const (
	// ResourcesChanged: notifications/resources/list_changed.
	ResourcesChanged = "resources_list_changed"
	// PromptsChanged: notifications/prompts/list_changed.
	PromptsChanged = "prompts_list_changed"
	// ResourceUpdated: notifications/resources/updated of URI.
	ResourceUpdated = "resource_updated"
)

// ResourceEvent is a backend's notification about its resources or
// prompts (Options.OnResourceEvent).
type ResourceEvent struct {
	// Manual and Server name the backend.
	Manual, Server string
	// Kind is ResourcesChanged, PromptsChanged or ResourceUpdated.
	Kind string
	// URI is the updated resource's URI at the backend (ResourceUpdated).
	URI string
}

// ResourcerOf returns c's Resourcer, when the transport it wraps is one.
// Its methods refuse a manual (tmpl.Name) whose last registration ended
// with manual_not_found, as c's CallTool does.
func ResourcerOf(c Counted) (Resourcer, bool) {
	r, ok := c.Unwrap().(Resourcer)
	if !ok {
		return nil, false
	}
	if cc, ok := c.(*counted); ok {
		return &countedResourcer{c: cc, r: r}, true
	}
	if cs, ok := c.(*countedStreamer); ok {
		return &countedResourcer{c: cs.counted, r: r}, true
	}
	return r, true
}

type countedResourcer struct {
	c *counted
	r Resourcer
}

func (cr *countedResourcer) check(tmpl *utcp.CallTemplate) error {
	if tmpl == nil {
		return nil
	}
	return cr.c.check(&utcp.Call{Manual: tmpl.Name})
}

func (cr *countedResourcer) Servers(tmpl *utcp.CallTemplate) []string {
	if cr.check(tmpl) != nil {
		return nil
	}
	return cr.r.Servers(tmpl)
}

func (cr *countedResourcer) Catalog(ctx context.Context, tmpl *utcp.CallTemplate) ([]Catalog, error) {
	if err := cr.check(tmpl); err != nil {
		return nil, err
	}
	return cr.r.Catalog(ctx, tmpl)
}

func (cr *countedResourcer) ReadResource(ctx context.Context, tmpl *utcp.CallTemplate, server, uri string) (json.RawMessage, error) {
	if err := cr.check(tmpl); err != nil {
		return nil, err
	}
	return cr.r.ReadResource(ctx, tmpl, server, uri)
}

func (cr *countedResourcer) GetPrompt(ctx context.Context, tmpl *utcp.CallTemplate, server, name string, args map[string]string) (json.RawMessage, error) {
	if err := cr.check(tmpl); err != nil {
		return nil, err
	}
	return cr.r.GetPrompt(ctx, tmpl, server, name, args)
}

func (cr *countedResourcer) Complete(ctx context.Context, tmpl *utcp.CallTemplate, server string, params json.RawMessage) (json.RawMessage, error) {
	if err := cr.check(tmpl); err != nil {
		return nil, err
	}
	return cr.r.Complete(ctx, tmpl, server, params)
}

func (cr *countedResourcer) Subscribe(ctx context.Context, tmpl *utcp.CallTemplate, server, uri string) error {
	if err := cr.check(tmpl); err != nil {
		return err
	}
	return cr.r.Subscribe(ctx, tmpl, server, uri)
}

func (cr *countedResourcer) Unsubscribe(ctx context.Context, tmpl *utcp.CallTemplate, server, uri string) error {
	if err := cr.check(tmpl); err != nil {
		return err
	}
	return cr.r.Unsubscribe(ctx, tmpl, server, uri)
}
