package main

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/utcpd/utcpd/api/admin"
)

const adminModes = `
It talks to the admin API of a running daemon (utcpd serve) at --server
(default $UTCPD_SERVER, else http://127.0.0.1:8787), with the admin token from
--admin-token or $UTCPD_ADMIN_TOKEN, else from the file admin-token in the
data dir ($UTCPD_DATA_DIR, else ~/.local/state/utcpd). Errors print the
daemon's error code and message; the exit code is 1 (2 for bad usage).`

func newReviewsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "reviews",
		Short: "List, show, approve and deny the calls a guard parked for review",
		Long: `reviews works with the calls a guard sent to human review: list the pending ones
(arguments with secret-looking values redacted), show one, and approve it (the
remaining guards run and the call runs once) or deny it (it never runs).
` + adminModes,
	}
	cmd.AddCommand(newReviewsListCmd(), newReviewsShowCmd(), newReviewsDecideCmd(true), newReviewsDecideCmd(false))
	return cmd
}

func newReviewsListCmd() *cobra.Command {
	var af adminFlags
	var status string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List reviews, oldest first (pending ones unless --status says otherwise)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := af.client()
			if err != nil {
				return err
			}
			ctx, cancel := withTimeout(cmd.Context(), af.timeout)
			defer cancel()
			var list admin.ReviewList
			if err := c.do(ctx, http.MethodGet, "/admin/reviews", url.Values{"status": {status}}, nil, &list); err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), list)
			}
			return printReviews(cmd.OutOrStdout(), list.Reviews)
		},
	}
	af.add(cmd)
	cmd.Flags().StringVar(&status, "status", "pending", "pending, approved, denied, expired, dispatching, done, interrupted (comma-separated), or all")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	return cmd
}

// printReviews writes reviews as a table.
func printReviews(w io.Writer, rs []admin.ReviewSummary) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tTOOL\tGUARD\tPRINCIPAL\tFRONT\tAGE\tREASON")
	for _, r := range rs {
		tool := r.Qualified
		if tool == "" {
			tool = r.Tool
		}
		if r.Kind != "" && r.Kind != "tool" {
			tool += " (" + r.Kind + ")" // a resource read or prompt get
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Status, tool, dash(r.Guard), dash(r.Principal), dash(r.Front),
			(time.Duration(r.AgeSeconds * float64(time.Second))).Round(time.Second), oneLine(strings.Join(r.Reasons, "; "), 60))
	}
	return tw.Flush()
}

func newReviewsShowCmd() *cobra.Command {
	var af adminFlags
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: "Show one review as JSON",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := af.client()
			if err != nil {
				return err
			}
			ctx, cancel := withTimeout(cmd.Context(), af.timeout)
			defer cancel()
			var r admin.ReviewSummary
			if err := c.do(ctx, http.MethodGet, "/admin/reviews/"+pathEscape(args[0]), nil, nil, &r); err != nil {
				return err
			}
			return writeJSON(cmd.OutOrStdout(), r)
		},
	}
	af.add(cmd)
	return cmd
}

// newReviewsDecideCmd is reviews approve (approve true) or reviews deny.
func newReviewsDecideCmd(approve bool) *cobra.Command {
	var af adminFlags
	var note string
	var asJSON bool
	verb, done, short := "deny", "denied", "Deny a review: the call never runs"
	if approve {
		verb, done, short = "approve", "approved", "Approve a review: the remaining guards run, then the call runs once"
	}
	cmd := &cobra.Command{
		Use:   verb + " ID",
		Short: short,
		Long: short + `.
Deciding again the same way answers the review unchanged; the opposite
decision is invalid_request. --note is kept with the review and shown to the
caller.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := af.client()
			if err != nil {
				return err
			}
			ctx, cancel := withTimeout(cmd.Context(), af.timeout)
			defer cancel()
			var r admin.ReviewSummary
			path := "/admin/reviews/" + pathEscape(args[0]) + "/" + verb
			if err := c.do(ctx, http.MethodPost, path, nil, admin.DecisionRequest{Note: note}, &r); err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), r)
			}
			tool := r.Qualified
			if tool == "" {
				tool = r.Tool
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s review %s (%s), now %s\n", done, r.ID, tool, r.Status)
			return nil
		},
	}
	af.add(cmd)
	cmd.Flags().StringVar(&note, "note", "", "a note kept with the decision and shown to the caller")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the review as JSON")
	return cmd
}

// dash is s, or "-" when it is empty (a table cell must not be blank).
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// oneLine is s on one line, cut to at most n runes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		s = string(r[:n-3]) + "..."
	}
	return dash(s)
}
