package main

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/utcpd/utcpd/api/admin"
)

func newManualsDiffCmd() *cobra.Command {
	var af adminFlags
	var approve, reject, note string
	var limit int
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "diff NAME",
		Short: "Show the changes of a manual's pinned tool definitions; approve or reject a held one",
		Long: `diff shows the pin of manual NAME (the hash of the tool definitions its first
registration, or the last approved change, pinned) and its changes, newest
first: what a refresh, a backend's tools/list_changed, a folder change or a
restart discovered that differs from the pin. For each tool it prints whether
it was added, removed or changed, the fields that changed, a line diff of the
description ("-" pinned, "+" new) and the JSON differences of its schemas,
annotations and template (secret values redacted).

Under pin "hold" (the default for manuals fetched over the network) a change
is pending: the pinned definitions keep serving until it is approved.
--approve ID pins the change's definitions, which then serve; --reject ID
keeps the pin (the same change is not raised again). Both take --note.
` + adminModes,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if approve != "" && reject != "" {
				return &exitError{code: exitUsage, err: fmt.Errorf("--approve and --reject exclude each other")}
			}
			c, err := af.client()
			if err != nil {
				return err
			}
			ctx, cancel := withTimeout(cmd.Context(), af.timeout)
			defer cancel()
			base := "/admin/manuals/" + pathEscape(args[0]) + "/changes"
			if id, verb := approve+reject, map[bool]string{true: "approve", false: "reject"}[approve != ""]; id != "" {
				var out admin.ChangeSummary
				if err := c.do(ctx, http.MethodPost, base+"/"+pathEscape(id)+"/"+verb, nil, admin.DecisionRequest{Note: note}, &out); err != nil {
					return err
				}
				if asJSON {
					return writeJSON(cmd.OutOrStdout(), out)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "change %s of manual %s: %s\n", out.ID, out.Manual, out.Status)
				return nil
			}
			q := url.Values{}
			if limit > 0 {
				q.Set("limit", strconv.Itoa(limit))
			}
			var list admin.ChangeList
			if err := c.do(ctx, http.MethodGet, base, q, nil, &list); err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), list)
			}
			printChanges(cmd.OutOrStdout(), list)
			return nil
		},
	}
	af.add(cmd)
	fl := cmd.Flags()
	fl.StringVar(&approve, "approve", "", "approve the pending change ID: pin its definitions, which then serve")
	fl.StringVar(&reject, "reject", "", "reject the pending change ID: keep the pin")
	fl.StringVar(&note, "note", "", "a note kept with the decision")
	fl.IntVar(&limit, "limit", 20, "show at most this many changes")
	fl.BoolVar(&asJSON, "json", false, "print the daemon's answer as JSON")
	return cmd
}

// printChanges writes a change list for the terminal.
func printChanges(w io.Writer, list admin.ChangeList) {
	switch {
	case list.Pin == nil:
		fmt.Fprintf(w, "manual %s: not pinned (pin off)\n", list.Manual)
	default:
		fmt.Fprintf(w, "manual %s: %d tools pinned %s (set %s), %d pending change%s\n", list.Manual, len(list.Pin.Tools),
			list.Pin.Pinned.UTC().Format("2006-01-02T15:04:05Z"), short(list.Pin.Hash), list.Pending, map[bool]string{true: "", false: "s"}[list.Pending == 1])
	}
	for _, c := range list.Changes {
		fmt.Fprintf(w, "\nchange %s  %s  (pin %s)  %s", c.ID, c.Status, c.Mode, c.Created.UTC().Format("2006-01-02T15:04:05Z"))
		if c.By != "" {
			fmt.Fprintf(w, "  by %s", c.By)
		}
		fmt.Fprintln(w)
		if c.Note != "" {
			fmt.Fprintf(w, "  note: %s\n", c.Note)
		}
		for _, d := range c.Diff {
			if d.Change == "changed" {
				fmt.Fprintf(w, "  tool %s: changed (%s)\n", d.Tool, strings.Join(d.Fields, ", "))
			} else {
				fmt.Fprintf(w, "  tool %s: %s\n", d.Tool, d.Change)
			}
			if d.Description != "" {
				fmt.Fprintln(w, "    description:")
				for _, l := range strings.Split(strings.TrimSuffix(d.Description, "\n"), "\n") {
					fmt.Fprintf(w, "      %s\n", l)
				}
			}
			for _, j := range d.Schema {
				switch j.Op {
				case "add":
					fmt.Fprintf(w, "    %s: added %s\n", j.Path, oneLine(string(j.New), 120))
				case "remove":
					fmt.Fprintf(w, "    %s: removed %s\n", j.Path, oneLine(string(j.Old), 120))
				default:
					fmt.Fprintf(w, "    %s: %s -> %s\n", j.Path, oneLine(string(j.Old), 60), oneLine(string(j.New), 60))
				}
			}
		}
		if c.Status == "pending" {
			fmt.Fprintf(w, "  approve: utcpd manuals diff %s --approve %s   reject: --reject %s\n", list.Manual, c.ID, c.ID)
		}
	}
}

func short(hash string) string {
	if len(hash) > 12 {
		return hash[:12]
	}
	return hash
}
