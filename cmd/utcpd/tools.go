package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/utcp"
)

// gatewayFlags are the flags of commands that run a gateway in-process.
type gatewayFlags struct {
	config string
	strict bool
}

func (f *gatewayFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&f.config, "config", "c", "utcpd.json", "UTCP client configuration to load")
	cmd.Flags().BoolVar(&f.strict, "strict", false, "treat unknown configuration fields as errors")
}

// open loads the configuration and registers its manuals in-process.
func (f *gatewayFlags) open(cmd *cobra.Command) (*gateway.Gateway, error) {
	cfg, err := loadConfig(f.config, f.strict, cmd.ErrOrStderr())
	if err != nil {
		return nil, err
	}
	return newGateway(cmd.Context(), cfg, discardLogger(), cmd.ErrOrStderr())
}

func newToolsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "tools", Short: "List, search and show tools"}
	var gf gatewayFlags
	var asJSON bool
	list := &cobra.Command{
		Use:   "list",
		Short: "List every registered tool",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			g, err := gf.open(cmd)
			if err != nil {
				return err
			}
			defer g.Close()
			return printTools(cmd.OutOrStdout(), g.ListTools(), asJSON)
		},
	}
	var limit int
	var tags []string
	search := &cobra.Command{
		Use:   "search QUERY",
		Short: "Search tools by tags and description words (search_tools)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			g, err := gf.open(cmd)
			if err != nil {
				return err
			}
			defer g.Close()
			return printTools(cmd.OutOrStdout(), g.SearchTools(args[0], limit, tags), asJSON)
		},
	}
	search.Flags().IntVar(&limit, "limit", 10, "at most this many tools (0: no limit)")
	search.Flags().StringSliceVar(&tags, "tags", nil, "only tools with at least one of these tags")
	show := &cobra.Command{
		Use:   "show TOOL",
		Short: "Show one tool's definition as JSON",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			g, err := gf.open(cmd)
			if err != nil {
				return err
			}
			defer g.Close()
			t, err := g.Tool(args[0])
			if err != nil {
				return err
			}
			return writeJSON(cmd.OutOrStdout(), t)
		},
	}
	for _, c := range []*cobra.Command{list, search, show} {
		gf.add(c)
		if c != show {
			c.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of a table")
		}
	}
	cmd.AddCommand(list, search, show)
	return cmd
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
