package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/utcp"
)

// listTools lists the server's tools (every page) and, when the template
// asks for it, its resources as tools.
func (s *server) listTools(ctx context.Context) ([]utcp.Tool, error) {
	var tools []utcp.Tool
	resources := map[string]string{}
	_, err := s.invoke(ctx, func(ctx context.Context, sess *session) error {
		tools = tools[:0]
		clear(resources)
		var caps *sdk.ServerCapabilities
		if ir := sess.cs.InitializeResult(); ir != nil {
			caps = ir.Capabilities
		}
		maxTools := listLimit(ctx)
		if caps == nil || caps.Tools != nil {
			err := pages(ctx, s.name, "tools/list", maxTools, func(ctx context.Context, cursor string) (string, int, error) {
				res, err := sess.cs.ListTools(ctx, &sdk.ListToolsParams{Cursor: cursor})
				if err != nil {
					return "", 0, err
				}
				for _, tool := range res.Tools {
					tools = append(tools, convertTool(s.name, tool))
				}
				return res.NextCursor, len(tools), nil
			})
			if err != nil {
				return err
			}
		}
		if s.m.spec.RegisterResourcesAsTools && (caps == nil || caps.Resources != nil) {
			var list []*sdk.Resource
			err := pages(ctx, s.name, "resources/list", maxTools-len(tools), func(ctx context.Context, cursor string) (string, int, error) {
				res, err := sess.cs.ListResources(ctx, &sdk.ListResourcesParams{Cursor: cursor})
				if err != nil {
					return "", 0, err
				}
				list = append(list, res.Resources...)
				return res.NextCursor, len(list), nil
			})
			if err != nil {
				return err
			}
			for _, r := range list {
				tool := resourceTool(s.name, r)
				local := strings.TrimPrefix(tool.Name, s.name+".")
				if _, dup := resources[local]; dup {
					continue
				}
				resources[local] = r.URI
				tools = append(tools, tool)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.resMu.Lock()
	s.resources = maps.Clone(resources)
	s.resMu.Unlock()
	return tools, nil
}

// MaxListPages caps the pages of one server's tools/list (and
// resources/list): a server that answers a nextCursor forever is refused
// after that many pages instead of being paged without end.
const MaxListPages = 100

// listLimit is the most tools one manual may list: the context's
// transports.DiscoveryLimits.MaxTools, or the default.
func listLimit(ctx context.Context) int {
	if n := transports.DiscoveryLimitsFrom(ctx).MaxTools; n > 0 {
		return n
	}
	return transports.DefaultMaxToolsPerManual
}

// pages runs one paginated list: page fetches the page at cursor and
// returns the next cursor and the number of items gathered so far. A
// server without the method (method not found) lists nothing. Past
// MaxListPages pages, or past max items, the listing is refused with a
// discovery_failed error naming the limit; nothing of it is kept.
func pages(ctx context.Context, server, method string, max int, page func(ctx context.Context, cursor string) (string, int, error)) error {
	cursor := ""
	for n := 1; ; n++ {
		next, items, err := page(ctx, cursor)
		if err != nil {
			var we *jsonrpc.Error
			if errors.As(err, &we) && we.Code == jsonrpc.CodeMethodNotFound {
				return nil
			}
			return err
		}
		if items > max {
			return transports.TooManyTools(listLimit(ctx))
		}
		if next == "" {
			return nil
		}
		if n >= MaxListPages {
			return utcp.NewError(utcp.CodeDiscoveryFailed,
				"mcp: server %s: %s still answers a nextCursor after %d pages (the limit of pages per listing); refusing the listing", server, method, MaxListPages).
				WithDetail("limit_pages", MaxListPages).WithDetail("limit", "mcp_list_pages")
		}
		cursor = next
	}
}

// resourceURI returns the URI behind a resource tool name.
func (s *server) resourceURI(tool string) (string, bool) {
	s.resMu.Lock()
	defer s.resMu.Unlock()
	uri, ok := s.resources[tool]
	return uri, ok
}

// convertTool turns an MCP tool into a UTCP tool named "<server>.<tool>":
// inputSchema becomes inputs, outputSchema outputs, the title stands in
// for a missing description, the annotations become tags, and title,
// annotations, icons and _meta are kept as the server listed them in
// utcp.Tool.MCP.
func convertTool(server string, tool *sdk.Tool) utcp.Tool {
	out := utcp.Tool{Name: server + "." + tool.Name, Description: tool.Description}
	if out.Description == "" {
		out.Description = tool.Title
	}
	if out.Description == "" && tool.Annotations != nil {
		out.Description = tool.Annotations.Title
	}
	out.Inputs = rawSchema(tool.InputSchema)
	if out.Inputs == nil {
		out.Inputs = json.RawMessage(`{"type":"object"}`)
	}
	out.Outputs = rawSchema(tool.OutputSchema)
	out.Tags = []string{"mcp", server}
	if a := tool.Annotations; a != nil {
		if a.ReadOnlyHint {
			out.Tags = append(out.Tags, "read_only")
		}
		if a.DestructiveHint != nil && *a.DestructiveHint && !a.ReadOnlyHint {
			out.Tags = append(out.Tags, "destructive")
		}
		if a.IdempotentHint {
			out.Tags = append(out.Tags, "idempotent")
		}
		if a.OpenWorldHint != nil && *a.OpenWorldHint {
			out.Tags = append(out.Tags, "open_world")
		}
	}
	out.MCP = toolMetadata(tool)
	return out
}

// metadata is the JSON object of utcp.Tool.MCP: what an MCP server
// listed for a tool besides its name, description and schemas. Absent
// members were not listed.
type metadata struct {
	Title       string               `json:"title,omitempty"`
	Annotations *sdk.ToolAnnotations `json:"annotations,omitempty"`
	Icons       []sdk.Icon           `json:"icons,omitempty"`
	Meta        sdk.Meta             `json:"_meta,omitempty"`
}

// toolMetadata is the utcp.Tool.MCP of tool, nil when it lists none.
func toolMetadata(tool *sdk.Tool) json.RawMessage {
	md := metadata{Title: tool.Title, Annotations: tool.Annotations, Icons: tool.Icons, Meta: tool.Meta}
	if md.Title == "" && md.Annotations == nil && len(md.Icons) == 0 && len(md.Meta) == 0 {
		return nil
	}
	b, err := json.Marshal(md)
	if err != nil {
		return nil
	}
	return b
}

func rawSchema(v any) json.RawMessage {
	if v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil || string(b) == "null" {
		return nil
	}
	return b
}

// resourceTool is the tool that reads resource r: "<server>.resource_<name>"
// with the name's characters outside [A-Za-z0-9_-] replaced by '_'.
func resourceTool(server string, r *sdk.Resource) utcp.Tool {
	name := r.Name
	if name == "" {
		name = r.URI
	}
	var b strings.Builder
	for _, c := range name {
		if c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' {
			b.WriteRune(c)
		} else {
			b.WriteByte('_')
		}
	}
	desc := r.Description
	if desc == "" {
		desc = r.Title
	}
	if desc == "" {
		desc = "Reads the resource " + r.URI
	}
	return utcp.Tool{
		Name:        server + ".resource_" + b.String(),
		Description: desc,
		Inputs:      json.RawMessage(`{"type":"object","properties":{}}`),
		Tags:        []string{"mcp", server, "resource"},
	}
}
