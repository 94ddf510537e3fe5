package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/utcpd/utcpd/api/admin"
	"github.com/utcpd/utcpd/manuals"
	"github.com/utcpd/utcpd/sources"
	"github.com/utcpd/utcpd/utcp"
)

// adminFlags are the flags of commands that use a daemon's admin API.
type adminFlags struct {
	server  string
	token   string
	timeout time.Duration
}

func (f *adminFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVarP(&f.server, "server", "s", "", "URL of the running daemon (default $UTCPD_SERVER, else http://"+defaultListen+")")
	fl.StringVar(&f.token, "admin-token", "", "admin bearer token; prefer $UTCPD_ADMIN_TOKEN, flags show in ps [$UTCPD_ADMIN_TOKEN]")
	fl.DurationVar(&f.timeout, "timeout", 2*time.Minute, "give up after this long (registration includes discovery)")
}

func (f *adminFlags) client() (*client, error) {
	server := f.server
	if server == "" {
		server = serverFromEnv()
	}
	if server == "" {
		server = "http://" + defaultListen
	}
	token := f.token
	if token == "" {
		token = os.Getenv(envAdminToken)
	}
	if token == "" {
		// The token a local daemon created in its data dir.
		token = storedAdminToken()
	}
	return newClient(server, token)
}

func newManualsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "manuals",
		Short: "List, add, remove, refresh and review the pinned tools of the manuals of a running daemon",
		Long: `manuals talks to the admin API of a running daemon (utcpd serve) at --server
(default $UTCPD_SERVER, else http://127.0.0.1:8787), with the admin token from
--admin-token or $UTCPD_ADMIN_TOKEN, else from the file admin-token in the
data dir ($UTCPD_DATA_DIR, else ~/.local/state/utcpd), which a daemon started
without an admin token creates there.

Manuals added here have source "api" and are persisted in the daemon's store.
Manuals from the daemon's configuration file or manuals folder can be listed
and refreshed but not removed here: edit their source instead.

Errors print the daemon's error code and message; the exit code is 1 (2 for
bad usage or an unusable local file).`,
	}
	cmd.AddCommand(newManualsListCmd(), newManualsShowCmd(), newManualsAddCmd(), newManualsRmCmd(), newManualsRefreshCmd(), newManualsDiffCmd())
	return cmd
}

func newManualsListCmd() *cobra.Command {
	var af adminFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the manuals with their source, status, tool count and last error",
		Long: `list shows every manual the daemon knows, with its STATUS:
  ready        its tools are the ones its backend lists now
  discovering  its first discovery is under way, or it serves a stored copy
               whose rediscovery is pending
  failed       it could not be registered and contributes no tools; the
               daemon retries it in the background (LAST ERROR says why;
               "utcpd manuals refresh NAME" retries at once)
  degraded     its last discovery failed; the tools of an earlier one keep
               serving while it is retried
--json prints the daemon's answer, with last_error, last_success and
next_retry.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := af.client()
			if err != nil {
				return err
			}
			ctx, cancel := withTimeout(cmd.Context(), af.timeout)
			defer cancel()
			var list admin.ManualList
			if err := c.do(ctx, http.MethodGet, "/admin/manuals", nil, nil, &list); err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), list)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tTYPE\tSOURCE\tSTATUS\tTOOLS\tREFRESHED\tLAST ERROR")
			for _, m := range list.Manuals {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", m.Name, orDash(m.Type), m.Source, m.Status, m.ToolCount, timeOrDash(m.Refreshed), lastError(m.Health))
			}
			return tw.Flush()
		},
	}
	af.add(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	return cmd
}

func newManualsShowCmd() *cobra.Command {
	var af adminFlags
	cmd := &cobra.Command{
		Use:   "show NAME",
		Short: "Show one manual as JSON: its template (secrets redacted), tools, source and times",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := af.client()
			if err != nil {
				return err
			}
			ctx, cancel := withTimeout(cmd.Context(), af.timeout)
			defer cancel()
			var detail json.RawMessage
			if err := c.do(ctx, http.MethodGet, "/admin/manuals/"+pathEscape(args[0]), nil, nil, &detail); err != nil {
				return err
			}
			return writeJSON(cmd.OutOrStdout(), detail)
		},
	}
	af.add(cmd)
	return cmd
}

func newManualsAddCmd() *cobra.Command {
	var af adminFlags
	var name string
	var replace, asJSON bool
	cmd := &cobra.Command{
		Use:   "add FILE_OR_URL",
		Short: "Register a manual from a call template file, a manual file or a URL",
		Long: `add registers one manual with the daemon (POST /admin/manuals; with --replace,
PUT /admin/manuals/NAME, which creates or atomically replaces it).

FILE_OR_URL is one of:
  - a JSON file holding one manual call template (v1.1, or a legacy v0.1
    provider), e.g. {"name": "demo", "call_template_type": "http",
    "url": "http://127.0.0.1:8081/utcp"}; without a name, the file's base
    name is used; a relative file_path of a file template is made absolute;
  - a JSON or YAML file holding a UTCP manual or an OpenAPI document: it is
    sent inline as a text call template named after the file, allowing the
    protocols the manual's tools use (http for an OpenAPI document);
  - an http:// or https:// URL: registered as an http call template that
    GETs the manual (or OpenAPI document) from that URL, named after the
    host unless --name is given;
  - "-": a call template read from standard input.

It prints the manual's name and tools; warnings go to stderr.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			raw, err := templateFor(args[0], name, cmd.InOrStdin())
			if err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			c, err := af.client()
			if err != nil {
				return err
			}
			ctx, cancel := withTimeout(cmd.Context(), af.timeout)
			defer cancel()
			var res admin.RegisterResponse
			if replace {
				err = c.do(ctx, http.MethodPut, "/admin/manuals/"+pathEscape(templateName(raw)), nil, raw, &res)
			} else {
				err = c.do(ctx, http.MethodPost, "/admin/manuals", nil, raw, &res)
			}
			if err != nil {
				return err
			}
			return printRegistered(cmd, "registered", res, asJSON)
		},
	}
	af.add(cmd)
	cmd.Flags().StringVarP(&name, "name", "n", "", "manual name (overrides the template's name, the file name or the host)")
	cmd.Flags().BoolVar(&replace, "replace", false, "replace a manual of the same name atomically instead of failing with manual_exists")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the daemon's answer as JSON")
	return cmd
}

func newManualsRmCmd() *cobra.Command {
	var af adminFlags
	cmd := &cobra.Command{
		Use:     "rm NAME",
		Aliases: []string{"remove", "delete"},
		Short:   "Deregister a manual added through the admin API (calls in flight finish)",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := af.client()
			if err != nil {
				return err
			}
			ctx, cancel := withTimeout(cmd.Context(), af.timeout)
			defer cancel()
			if err := c.do(ctx, http.MethodDelete, "/admin/manuals/"+pathEscape(args[0]), nil, nil, nil); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "removed manual %s\n", args[0])
			return nil
		},
	}
	af.add(cmd)
	return cmd
}

func newManualsRefreshCmd() *cobra.Command {
	var af adminFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "refresh NAME",
		Short: "Discover a manual again from its backend and replace it atomically",
		Long: `refresh asks the daemon to fetch the manual NAME again through its call
template and to replace its tools atomically (calls in flight finish on the old
version). When discovery fails the old version keeps serving and the error is
printed.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := af.client()
			if err != nil {
				return err
			}
			ctx, cancel := withTimeout(cmd.Context(), af.timeout)
			defer cancel()
			var res admin.RegisterResponse
			if err := c.do(ctx, http.MethodPost, "/admin/manuals/"+pathEscape(args[0])+"/refresh", nil, nil, &res); err != nil {
				return err
			}
			return printRegistered(cmd, "refreshed", res, asJSON)
		},
	}
	af.add(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the daemon's answer as JSON")
	return cmd
}

func printRegistered(cmd *cobra.Command, verb string, res admin.RegisterResponse, asJSON bool) error {
	for _, w := range res.Warnings {
		fmt.Fprintln(cmd.ErrOrStderr(), "warning:", w)
	}
	if asJSON {
		return writeJSON(cmd.OutOrStdout(), res)
	}
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "%s manual %s with %s\n", verb, res.Name, count(len(res.Tools), "tool", ""))
	for _, t := range res.Tools {
		fmt.Fprintf(out, "  %s\n", t)
	}
	return nil
}

// templateFor builds the manual call template `manuals add` sends for
// arg (a file, a URL or "-"), named name when it is not "".
func templateFor(arg, name string, stdin io.Reader) (json.RawMessage, error) {
	if u, err := url.Parse(arg); err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" {
		if name == "" {
			name = utcp.SanitizeName(u.Host)
		}
		raw, _ := json.Marshal(map[string]any{"name": utcp.SanitizeName(name), "call_template_type": "http", "http_method": "GET", "url": arg})
		return raw, nil
	}
	var data []byte
	var err error
	base, dir := "", ""
	if arg == "-" {
		data, err = io.ReadAll(io.LimitReader(stdin, sources.MaxFileBytes+1))
	} else {
		data, err = sources.ReadCapped(arg, sources.MaxFileBytes)
		base = strings.TrimSuffix(filepath.Base(arg), filepath.Ext(arg))
		dir, _ = filepath.Abs(filepath.Dir(arg))
	}
	if err != nil {
		return nil, err
	}
	where := arg
	if arg == "-" {
		where = "standard input"
	}
	doc, err := manuals.DecodeDocument(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", where, err)
	}
	_, hasType := doc["call_template_type"]
	_, hasLegacy := doc["provider_type"]
	if !hasType && !hasLegacy {
		docJSON, _ := json.Marshal(doc)
		allowed, err := sources.DocumentProtocols("text", docJSON, manuals.IsOpenAPI(doc))
		if err != nil {
			return nil, fmt.Errorf("%s: %v", where, err)
		}
		if name == "" {
			name = base
		}
		if name == "" {
			return nil, fmt.Errorf("%s: a manual read from standard input needs --name", where)
		}
		raw, _ := json.Marshal(map[string]any{"name": utcp.SanitizeName(name), "call_template_type": "text", "content": string(data),
			"allowed_communication_protocols": allowed})
		return raw, nil
	}
	if name != "" {
		doc["name"] = name
	} else if n, _ := doc["name"].(string); n == "" {
		if base == "" {
			return nil, fmt.Errorf("%s: the call template has no name; give one with --name", where)
		}
		doc["name"] = base
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	t, _, err := manuals.PrepareTemplate(raw, dir)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", where, err)
	}
	return t.Raw, nil
}

// templateName returns the name of the call template raw, "" when it
// has none (or not a string).
func templateName(raw json.RawMessage) string {
	var head struct {
		Name string `json:"name"`
	}
	_ = json.Unmarshal(raw, &head)
	return head.Name
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func timeOrDash(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format(time.DateTime)
}

// lastError is the LAST ERROR column: code and message, clipped, with
// when the next retry is due.
func lastError(h admin.Health) string {
	if h.LastError == nil {
		return "-"
	}
	msg := string(h.LastError.Code) + ": " + h.LastError.Message
	if r := []rune(msg); len(r) > 100 {
		msg = string(r[:99]) + "…"
	}
	if h.NextRetry != nil {
		if d := time.Until(*h.NextRetry); d > time.Second {
			msg += fmt.Sprintf(" (retry in %s)", d.Round(time.Second))
		} else {
			msg += " (retrying)"
		}
	}
	return msg
}
