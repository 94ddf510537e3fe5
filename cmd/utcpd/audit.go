package main

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/utcpd/utcpd/api/admin"
	"github.com/utcpd/utcpd/gateway/audit"
)

func newAuditCmd() *cobra.Command {
	var af adminFlags
	var tool, since, outcome, decision string
	var limit int
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Print the audit log of a running daemon, newest first",
		Long: `audit prints the calls the daemon recorded (GET /admin/audit), newest first:
time, tool, the guard chain's decision, outcome ("ok" or the error code),
duration, front and principal. Arguments and results are never recorded.

--tool keeps the calls of one tool (as requested or as resolved), --since the
calls after a time (RFC 3339, or a duration back from now such as 1h),
--outcome those that ended so (ok, or an error code such as tool_error),
--decision those the chain decided so (allow, deny, review, error; pin: the
changes of pinned tool definitions, with their diff in --json). --limit
caps the records printed (0: every matching record); pages of up to 1000 are
fetched as needed.
` + adminModes,
		Example: `  utcpd audit --since 1h --outcome tool_error
  utcpd audit --tool demo.add --limit 20 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 0 {
				return &exitError{code: exitUsage, err: fmt.Errorf("--limit must be 0 (every record) or positive, got %d", limit)}
			}
			c, err := af.client()
			if err != nil {
				return err
			}
			ctx, cancel := withTimeout(cmd.Context(), af.timeout)
			defer cancel()
			q := url.Values{}
			for k, v := range map[string]string{"tool": tool, "since": since, "outcome": outcome, "decision": decision} {
				if v != "" {
					q.Set(k, v)
				}
			}
			recs := []audit.Record{}
			for {
				page := audit.MaxLimit
				if limit > 0 {
					page = min(page, limit-len(recs))
				}
				q.Set("limit", strconv.Itoa(page))
				var p admin.AuditPage
				if err := c.do(ctx, http.MethodGet, "/admin/audit", q, nil, &p); err != nil {
					return err
				}
				recs = append(recs, p.Records...)
				if p.Next == "" || len(p.Records) == 0 || (limit > 0 && len(recs) >= limit) {
					break
				}
				if p.Next == q.Get("before") {
					return fmt.Errorf("GET /admin/audit: the daemon answered the same page again")
				}
				q.Set("before", p.Next)
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), map[string]any{"records": recs})
			}
			return printAudit(cmd.OutOrStdout(), recs)
		},
	}
	af.add(cmd)
	fl := cmd.Flags()
	fl.StringVar(&tool, "tool", "", "only calls of this tool (requested or qualified name)")
	fl.StringVar(&since, "since", "", "only calls after this time: RFC 3339, or a duration back from now (1h, 30m)")
	fl.StringVar(&outcome, "outcome", "", "only calls that ended so: ok, or an error code (tool_error, guard_denied, ...)")
	fl.StringVar(&decision, "decision", "", "only calls the guard chain decided so: allow, deny, review or error (pin: changes of pinned tool definitions)")
	fl.IntVar(&limit, "limit", audit.DefaultLimit, "at most this many records (0: every matching record)")
	fl.BoolVar(&asJSON, "json", false, "print JSON ({\"records\": [...]}) instead of a table")
	return cmd
}

// printAudit writes audit records as a table.
func printAudit(w io.Writer, recs []audit.Record) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tTOOL\tDECISION\tOUTCOME\tDURATION\tFRONT\tPRINCIPAL\tREVIEW")
	for _, r := range recs {
		tool := r.Qualified
		if tool == "" {
			tool = r.Tool
		}
		d := r.Duration.Round(time.Microsecond)
		if d >= time.Second {
			d = d.Round(time.Millisecond)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Time.Local().Format("2006-01-02 15:04:05.000"), oneLine(tool, 60), dash(r.Decision),
			dash(r.Outcome), d, dash(r.Front), dash(r.Principal), dash(r.ReviewID))
	}
	return tw.Flush()
}
