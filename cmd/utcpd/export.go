package main

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/utcpd/utcpd/api/llm"
)

func newToolsExportCmd() *cobra.Command {
	var tf targetFlags
	var format, query string
	var strict, withCodeMode bool
	var tags []string
	var limit int
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "export --format openai|anthropic|gemini",
		Short: "Print the tools as an LLM provider's tool definitions",
		Long: `export prints the tools (all, or those matching --q and --tags) as the tool
definitions of an LLM API, ready to send with a request:

  openai     [{"type": "function", "function": {"name", "description", "parameters"}}]
             (--strict: strict functions, schemas rewritten for OpenAI's strict mode)
  anthropic  [{"name", "description", "input_schema"}]
  gemini     [{"functionDeclarations": [{"name", "description", "parameters"}]}]

Qualified names map to provider names: "." becomes "__" (weather.get →
weather__get); a name containing "__", "_." or "._", another character, or
too long becomes a readable prefix, "___" and 8 hex digits of its SHA-256.
POST /v1/llm/{provider}/tool_calls on the daemon runs the calls a model makes.
A daemon with CodeMode puts codemode__run first (--codemode=false leaves it
out); --limit counts it.
` + toolsModes + `
In-process, --strict-config treats unknown configuration fields as errors.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := llm.ParseProvider(format)
			if err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			c, err := tf.remote(cmd)
			if err != nil {
				return err
			}
			if c != nil {
				ctx, cancel := withTimeout(cmd.Context(), timeout)
				defer cancel()
				v := url.Values{}
				if query != "" {
					v.Set("q", query)
				}
				if len(tags) > 0 {
					v.Set("tags", strings.Join(tags, ","))
				}
				if limit > 0 {
					v.Set("limit", strconv.Itoa(limit))
				}
				if strict {
					v.Set("strict", "true")
				}
				if !withCodeMode {
					v.Set("codemode", "false")
				}
				var out any
				if err := c.do(ctx, http.MethodGet, "/v1/export/"+string(p), v, nil, &out); err != nil {
					return err
				}
				return writeJSON(cmd.OutOrStdout(), out)
			}
			g, err := tf.open(cmd)
			if err != nil {
				return err
			}
			defer g.Close()
			out, err := llm.ExportTools(cmd.Context(), g, p, llm.ExportQuery{Q: query, Tags: tags, Limit: max(limit, 0), Options: llm.ExportOptions{Strict: strict}})
			if err != nil {
				return err
			}
			return writeJSON(cmd.OutOrStdout(), out)
		},
	}
	// The target flags, with --strict-config for the configuration's
	// strictness: --strict belongs to OpenAI's strict mode here.
	fl := cmd.Flags()
	fl.StringVarP(&tf.config, "config", "c", defaultConfigFile, "in-process: UTCP client configuration to load (default $UTCPD_CONFIG, else utcpd.json)")
	fl.BoolVar(&tf.strict, "strict-config", false, "in-process: treat unknown configuration fields as errors")
	fl.StringVarP(&tf.server, "server", "s", "", "use the running daemon at this URL (default http://127.0.0.1:8787 when there is no ./utcpd.json) [$UTCPD_SERVER]")
	fl.StringVar(&tf.apiKey, "api-key", "", "with --server: API key for the REST front; prefer $UTCPD_API_KEY, flags show in ps [$UTCPD_API_KEY]")
	fl.StringVarP(&format, "format", "f", "", "openai, anthropic or gemini (required)")
	fl.BoolVar(&strict, "strict", false, "openai: strict functions (schemas rewritten for OpenAI's strict mode)")
	fl.StringVarP(&query, "q", "q", "", "only tools matching this search query (search_tools)")
	fl.StringSliceVar(&tags, "tags", nil, "only tools with at least one of these tags (comma-separated)")
	fl.IntVar(&limit, "limit", 0, "at most this many tool definitions, codemode__run included (0: all)")
	fl.BoolVar(&withCodeMode, "codemode", true, "with --server: put codemode__run first when the daemon offers CodeMode (false: leave it out)")
	fl.DurationVar(&timeout, "timeout", 30*time.Second, "with --server: give up after this long")
	_ = cmd.MarkFlagRequired("format")
	return cmd
}
