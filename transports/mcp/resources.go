package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/utcp"
)

// resState is what a server keeps for the resources of its manual: the
// URIs the gateway subscribed to, subscribed again on every new session.
type resState struct {
	mu   sync.Mutex
	subs map[string]bool
}

var _ transports.Resourcer = (*Transport)(nil)

// resourceHandlers adds to opts the handlers that relay the server's
// notifications about its resources and prompts to
// Options.OnResourceEvent (keeping the handler register_resources_as_tools
// set).
func (s *server) resourceHandlers(opts *sdk.ClientOptions) {
	if s.t.onResource == nil {
		return
	}
	emit := func(kind, uri string) {
		s.t.onResource(transports.ResourceEvent{Manual: s.m.name, Server: s.name, Kind: kind, URI: uri})
	}
	prev := opts.ResourceListChangedHandler
	opts.ResourceListChangedHandler = func(ctx context.Context, req *sdk.ResourceListChangedRequest) {
		if prev != nil {
			prev(ctx, req)
		}
		emit(transports.ResourcesChanged, "")
	}
	opts.PromptListChangedHandler = func(context.Context, *sdk.PromptListChangedRequest) {
		emit(transports.PromptsChanged, "")
	}
	opts.ResourceUpdatedHandler = func(_ context.Context, req *sdk.ResourceUpdatedNotificationRequest) {
		if req != nil && req.Params != nil {
			emit(transports.ResourceUpdated, req.Params.URI)
		}
	}
}

// resubscribe subscribes a new session to every URI the gateway
// subscribed to (the old session's subscriptions went with it).
func (s *server) resubscribe(sess *session) {
	s.rs.mu.Lock()
	uris := make([]string, 0, len(s.rs.subs))
	for u := range s.rs.subs {
		uris = append(uris, u)
	}
	s.rs.mu.Unlock()
	for _, u := range uris {
		ctx, cancel := s.callContext(sess.ctx)
		if err := sess.cs.Subscribe(ctx, &sdk.SubscribeParams{URI: u}); err != nil {
			s.log.Warn("mcp: subscribing the new session to a resource failed", "uri", u, "err", err)
		}
		cancel()
	}
}

// Servers lists the servers of tmpl's manual (transports.Resourcer).
func (t *Transport) Servers(tmpl *utcp.CallTemplate) []string {
	if tmpl == nil {
		return nil
	}
	m := t.lookup(tmpl, tmpl.Name)
	if m == nil {
		return nil
	}
	return m.names()
}

// serverOf finds one server of tmpl's manual.
func (t *Transport) serverOf(tmpl *utcp.CallTemplate, name string) (*server, error) {
	if tmpl == nil {
		return nil, utcp.Errorf(utcp.CodeInvalidTemplate, "mcp: no call template: %w", transports.ErrInvalidTemplate)
	}
	t.mu.Lock()
	closed := t.closed
	t.mu.Unlock()
	if closed {
		return nil, errClosed
	}
	m := t.lookup(tmpl, tmpl.Name)
	if m == nil {
		return nil, utcp.Errorf(utcp.CodeManualNotFound, "mcp: manual %q is not registered: %w", tmpl.Name, transports.ErrNotRegistered)
	}
	s := m.servers[name]
	if s == nil {
		return nil, utcp.NewError(utcp.CodeToolNotFound, "mcp: manual %q has no server %q", tmpl.Name, name).WithDetail("server", name)
	}
	return s, nil
}

// Catalog lists every server's resources, templates and prompts
// (transports.Resourcer), at most the manual's tool limit of each.
func (t *Transport) Catalog(ctx context.Context, tmpl *utcp.CallTemplate) ([]transports.Catalog, error) {
	names := t.Servers(tmpl)
	if names == nil {
		return nil, utcp.Errorf(utcp.CodeManualNotFound, "mcp: manual %q is not registered: %w", tmplName(tmpl), transports.ErrNotRegistered)
	}
	out := make([]transports.Catalog, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() {
			s, err := t.serverOf(tmpl, name)
			if err == nil {
				ctx, cancel := context.WithTimeout(ctx, s.connectTimeout())
				defer cancel()
				out[i], err = s.catalog(ctx)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("server %s: %w", names[i], err)
		}
	}
	return out, nil
}

func tmplName(tmpl *utcp.CallTemplate) string {
	if tmpl == nil {
		return ""
	}
	return tmpl.Name
}

// catalog lists one server's resources, templates and prompts.
func (s *server) catalog(ctx context.Context) (transports.Catalog, error) {
	c := transports.Catalog{Server: s.name}
	_, err := s.invoke(ctx, func(ctx context.Context, sess *session) error {
		c.Resources, c.ResourceTemplates, c.Prompts = nil, nil, nil
		var caps *sdk.ServerCapabilities
		if ir := sess.cs.InitializeResult(); ir != nil {
			caps = ir.Capabilities
		}
		max := listLimit(ctx)
		if caps == nil || caps.Resources != nil {
			err := pages(ctx, s.name, "resources/list", max, func(ctx context.Context, cursor string) (string, int, error) {
				res, err := sess.cs.ListResources(ctx, &sdk.ListResourcesParams{Cursor: cursor})
				if err != nil {
					return "", 0, err
				}
				c.Resources = appendRaw(c.Resources, res.Resources)
				return res.NextCursor, len(c.Resources), nil
			})
			if err != nil {
				return err
			}
			err = pages(ctx, s.name, "resources/templates/list", max, func(ctx context.Context, cursor string) (string, int, error) {
				res, err := sess.cs.ListResourceTemplates(ctx, &sdk.ListResourceTemplatesParams{Cursor: cursor})
				if err != nil {
					return "", 0, err
				}
				c.ResourceTemplates = appendRaw(c.ResourceTemplates, res.ResourceTemplates)
				return res.NextCursor, len(c.ResourceTemplates), nil
			})
			if err != nil {
				return err
			}
		}
		if caps == nil || caps.Prompts != nil {
			err := pages(ctx, s.name, "prompts/list", max, func(ctx context.Context, cursor string) (string, int, error) {
				res, err := sess.cs.ListPrompts(ctx, &sdk.ListPromptsParams{Cursor: cursor})
				if err != nil {
					return "", 0, err
				}
				c.Prompts = appendRaw(c.Prompts, res.Prompts)
				return res.NextCursor, len(c.Prompts), nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	return c, err
}

func appendRaw[T any](out []json.RawMessage, items []T) []json.RawMessage {
	for _, it := range items {
		if b, err := json.Marshal(it); err == nil && string(b) != "null" {
			out = append(out, b)
		}
	}
	return out
}

// request runs one request on a live session of tmpl's server, within
// the server's call timeout, and returns its result as JSON.
func request[R any](ctx context.Context, t *Transport, tmpl *utcp.CallTemplate, server, what string, fn func(ctx context.Context, cs *sdk.ClientSession) (R, error)) (json.RawMessage, error) {
	s, err := t.serverOf(tmpl, server)
	if err != nil {
		return nil, err
	}
	ctx, cancel := s.callContext(ctx)
	defer cancel()
	var res R
	sess, err := s.invoke(ctx, func(ctx context.Context, sess *session) error {
		var err error
		res, err = fn(ctx, sess.cs)
		return err
	})
	if err != nil {
		return nil, s.requestError(ctx, sess, what, err)
	}
	b, err := json.Marshal(res)
	if err != nil {
		return nil, utcp.Errorf(utcp.CodeTransportError, "mcp: %s: encoding the answer to %s: %w", s.what(), what, err)
	}
	return b, nil
}

// requestError maps the failure of a resources, prompts or completion
// request: a JSON-RPC error the server answered keeps its code and
// message in the details rpc_code and rpc_message (so that an MCP front
// can answer it as the server did): method not found is unsupported,
// invalid params (an unknown prompt, missing arguments) invalid_arguments,
// -32002 (resource not found) not_found, any other tool_error; other
// failures are mapped as a call's.
func (s *server) requestError(ctx context.Context, sess *session, what string, err error) error {
	var we *jsonrpc.Error
	if ctx.Err() != nil || s.ctx.Err() != nil || (sess != nil && sess.ctx.Err() != nil) || !errors.As(err, &we) {
		return s.callError(ctx, sess, what, err)
	}
	code := utcp.CodeToolError
	switch we.Code {
	case jsonrpc.CodeMethodNotFound:
		code = utcp.CodeUnsupported
	case jsonrpc.CodeInvalidParams:
		code = utcp.CodeInvalidArguments
	case codeResourceNotFound:
		code = utcp.CodeNotFound
	}
	e := utcp.NewError(code, "mcp: %s: %s: %s (JSON-RPC error %d)", s.what(), what, we.Message, we.Code).
		WithDetail("rpc_code", we.Code).WithDetail("rpc_message", we.Message)
	if len(we.Data) > 0 && json.Valid(we.Data) {
		e = e.WithDetail("rpc_data", json.RawMessage(we.Data))
	}
	return e
}

// codeResourceNotFound is MCP's JSON-RPC error code for an unknown
// resource.
const codeResourceNotFound = -32002

// ReadResource reads uri from the server (transports.Resourcer).
func (t *Transport) ReadResource(ctx context.Context, tmpl *utcp.CallTemplate, server, uri string) (json.RawMessage, error) {
	return request(ctx, t, tmpl, server, uri, func(ctx context.Context, cs *sdk.ClientSession) (*sdk.ReadResourceResult, error) {
		return cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: uri})
	})
}

// GetPrompt gets one prompt of the server (transports.Resourcer).
func (t *Transport) GetPrompt(ctx context.Context, tmpl *utcp.CallTemplate, server, name string, args map[string]string) (json.RawMessage, error) {
	return request(ctx, t, tmpl, server, name, func(ctx context.Context, cs *sdk.ClientSession) (*sdk.GetPromptResult, error) {
		return cs.GetPrompt(ctx, &sdk.GetPromptParams{Name: name, Arguments: args})
	})
}

// Complete asks the server for completions (transports.Resourcer).
func (t *Transport) Complete(ctx context.Context, tmpl *utcp.CallTemplate, server string, params json.RawMessage) (json.RawMessage, error) {
	var p sdk.CompleteParams
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, utcp.Errorf(utcp.CodeInvalidRequest, "mcp: completion/complete parameters: %w", err)
	}
	return request(ctx, t, tmpl, server, "completion/complete", func(ctx context.Context, cs *sdk.ClientSession) (*sdk.CompleteResult, error) {
		return cs.Complete(ctx, &p)
	})
}

// Subscribe subscribes to uri at the server, and again on every new
// session of it (transports.Resourcer).
func (t *Transport) Subscribe(ctx context.Context, tmpl *utcp.CallTemplate, server, uri string) error {
	s, err := t.serverOf(tmpl, server)
	if err != nil {
		return err
	}
	if _, err := request(ctx, t, tmpl, server, "resources/subscribe", func(ctx context.Context, cs *sdk.ClientSession) (struct{}, error) {
		return struct{}{}, cs.Subscribe(ctx, &sdk.SubscribeParams{URI: uri})
	}); err != nil {
		return err
	}
	s.rs.mu.Lock()
	if s.rs.subs == nil {
		s.rs.subs = map[string]bool{}
	}
	s.rs.subs[uri] = true
	s.rs.mu.Unlock()
	return nil
}

// Unsubscribe ends a subscription (transports.Resourcer).
func (t *Transport) Unsubscribe(ctx context.Context, tmpl *utcp.CallTemplate, server, uri string) error {
	s, err := t.serverOf(tmpl, server)
	if err != nil {
		return err
	}
	s.rs.mu.Lock()
	delete(s.rs.subs, uri)
	s.rs.mu.Unlock()
	_, err = request(ctx, t, tmpl, server, "resources/unsubscribe", func(ctx context.Context, cs *sdk.ClientSession) (struct{}, error) {
		return struct{}{}, cs.Unsubscribe(ctx, &sdk.UnsubscribeParams{URI: uri})
	})
	return err
}
