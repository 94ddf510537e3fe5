package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/utcpd/utcpd/api/front"
	"github.com/utcpd/utcpd/utcp"
)

const toolsModes = `
Every tools command runs either against a running daemon (--server URL, or
$UTCPD_SERVER; the REST front's API key from --api-key or $UTCPD_API_KEY), or
in-process: it loads the configuration file (--config, default $UTCPD_CONFIG,
else utcpd.json), registers its manuals and answers from them.`

func newToolsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tools",
		Short: "List, search and show tools",
		Long:  "tools lists, searches and shows the registered tools.\n" + toolsModes,
	}
	cmd.AddCommand(newToolsListCmd(), newToolsSearchCmd(), newToolsShowCmd(), newToolsExportCmd())
	return cmd
}

func newToolsListCmd() *cobra.Command {
	var tf targetFlags
	var asJSON bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List every registered tool, sorted by name",
		Long: `list prints every registered tool, sorted by qualified name (manual.tool): the
name, tags and the first line of its description. From a daemon it pages
through GET /v1/tools (1000 tools a page, following next_cursor).
` + toolsModes,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := tf.remote(cmd)
			if err != nil {
				return err
			}
			if c != nil {
				ctx, cancel := withTimeout(cmd.Context(), timeout)
				defer cancel()
				tools, err := remoteTools(ctx, c, url.Values{}, 0)
				if err != nil {
					return err
				}
				return printTools(cmd.OutOrStdout(), tools, asJSON)
			}
			g, err := tf.open(cmd)
			if err != nil {
				return err
			}
			defer g.Close()
			tools := g.ListTools(cmd.Context())
			slices.SortFunc(tools, func(a, b *utcp.Tool) int { return strings.Compare(a.Name, b.Name) })
			return printTools(cmd.OutOrStdout(), tools, asJSON)
		},
	}
	tf.add(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "with --server: give up after this long")
	return cmd
}

func newToolsSearchCmd() *cobra.Command {
	var tf targetFlags
	var asJSON bool
	var limit int
	var tags []string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "search QUERY",
		Short: "Search tools by tags and description words (search_tools)",
		Long: `search ranks the tools by how well their tags and description words match
QUERY (UTCP's tag_and_description_word_match) and prints the best ones.
` + toolsModes,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := tf.remote(cmd)
			if err != nil {
				return err
			}
			if c != nil {
				ctx, cancel := withTimeout(cmd.Context(), timeout)
				defer cancel()
				q := url.Values{"q": {args[0]}}
				if len(tags) > 0 {
					q.Set("tags", strings.Join(tags, ","))
				}
				tools, err := remoteTools(ctx, c, q, max(limit, 0))
				if err != nil {
					return err
				}
				return printTools(cmd.OutOrStdout(), tools, asJSON)
			}
			g, err := tf.open(cmd)
			if err != nil {
				return err
			}
			defer g.Close()
			return printTools(cmd.OutOrStdout(), g.SearchTools(cmd.Context(), args[0], limit, tags), asJSON)
		},
	}
	tf.add(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	cmd.Flags().IntVar(&limit, "limit", 10, "at most this many tools (0: no limit)")
	cmd.Flags().StringSliceVar(&tags, "tags", nil, "only tools with at least one of these tags (comma-separated)")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "with --server: give up after this long")
	return cmd
}

func newToolsShowCmd() *cobra.Command {
	var tf targetFlags
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "show TOOL",
		Short: "Show one tool's definition as JSON",
		Long: `show prints one tool (manual.tool, or an unambiguous tool name) as JSON: name,
description, tags, input and output schemas. In-process it includes the tool's
call template with secret-looking values redacted; from a daemon it includes
the tool's auth metadata (never credentials).
` + toolsModes,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := tf.remote(cmd)
			if err != nil {
				return err
			}
			if c != nil {
				ctx, cancel := withTimeout(cmd.Context(), timeout)
				defer cancel()
				var t json.RawMessage
				if err := c.do(ctx, http.MethodGet, "/v1/tools/"+pathEscape(args[0]), nil, nil, &t); err != nil {
					return err
				}
				return writeJSON(cmd.OutOrStdout(), t)
			}
			g, err := tf.open(cmd)
			if err != nil {
				return err
			}
			defer g.Close()
			t, err := g.Tool(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			shown := *t
			if t.ToolCallTemplate != nil {
				tmpl := *t.ToolCallTemplate
				tmpl.Raw = utcp.Redact(tmpl.Raw)
				shown.ToolCallTemplate = &tmpl
			}
			return writeJSON(cmd.OutOrStdout(), &shown)
		},
	}
	tf.add(cmd)
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "with --server: give up after this long")
	return cmd
}

// remoteTools asks the daemon's REST front for the tools q selects, at
// most limit of them (0: all), following next_cursor from page to page.
func remoteTools(ctx context.Context, c *client, q url.Values, limit int) ([]*utcp.Tool, error) {
	return remoteToolsAt(ctx, c, "/v1/tools", q, limit)
}

// remoteToolsAt is remoteTools from the listing at path (a toolset's:
// /v1/toolsets/{toolset}/tools).
func remoteToolsAt(ctx context.Context, c *client, path string, q url.Values, limit int) ([]*utcp.Tool, error) {
	var out []*utcp.Tool
	q = maps.Clone(q)
	for {
		page := front.MaxLimit
		if limit > 0 {
			page = min(page, limit-len(out))
		}
		q.Set("limit", strconv.Itoa(page))
		var list front.ToolList
		if err := c.do(ctx, http.MethodGet, path, q, nil, &list); err != nil {
			return nil, err
		}
		for _, t := range list.Tools {
			out = append(out, &utcp.Tool{Name: t.Name, Description: t.Description, Tags: t.Tags, Inputs: t.Inputs, Outputs: t.Outputs, MCP: t.MCP})
		}
		if list.NextCursor == "" || (limit > 0 && len(out) >= limit) {
			return out, nil
		}
		if list.NextCursor == q.Get("cursor") || len(list.Tools) == 0 {
			return nil, fmt.Errorf("GET %s: the daemon answered the same cursor again", path)
		}
		q.Set("cursor", list.NextCursor)
	}
}

func printTools(w io.Writer, tools []*utcp.Tool, asJSON bool) error {
	if asJSON {
		if tools == nil {
			tools = []*utcp.Tool{}
		}
		return writeJSON(w, map[string]any{"tools": tools})
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tTAGS\tDESCRIPTION")
	for _, t := range tools {
		desc := t.Description
		if i := strings.IndexByte(desc, '\n'); i >= 0 {
			desc = desc[:i]
		}
		if len(desc) > 80 {
			desc = desc[:77] + "..."
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", t.Name, strings.Join(t.Tags, ","), desc)
	}
	return tw.Flush()
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
