package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/utcpd/utcpd/daemon"
	"github.com/utcpd/utcpd/guard"
	"github.com/utcpd/utcpd/manuals"
	"github.com/utcpd/utcpd/transports"
)

func newConfigCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Work with configuration files",
		Long: `config works with utcpd configuration files: UTCP client configurations (v1.1,
or legacy v0.1; files of other UTCP clients load unchanged) with an optional
"gateway" section for the daemon (see docs/cli.md, "utcpd serve").`,
	}
	var strict, asJSON bool
	validate := &cobra.Command{
		Use:   "validate FILE",
		Short: "Check a configuration file and report every problem with its location",
		Long: `validate loads FILE as a UTCP client configuration (v1.1, or legacy v0.1
providers) and runs every check that "utcpd serve" runs on it, except network
I/O, printing every problem of the file in one pass as
"file:line: json.path: message". serve runs the same checks (at start and at
every SIGHUP), so the two never disagree.

  - each manual call template parsed by its transport: required fields,
    values, unknown fields (warnings, with the closest known field), a
    misspelled or unknown call_template_type (with a "did you mean"; the rest
    of the template is still checked as that type);
  - what registration refuses before it connects: plain http or ws to a host
    that is not loopback without "allow_insecure", plaintext sockets likewise,
    a file template whose file does not exist, allowed_hosts;
  - variables: a variable a manual needs that the config variables, a dotenv
    file or the environment do not set is a warning (serve fails that manual
    unless its environment sets it);
  - names, dotenv loaders, post_processing and the other sections, the utcpd
    "gateway" section (see docs/cli.md, "utcpd serve") and its guard chain.

What a template's transport refuses (an unknown call_template_type, a missing
or bad field, plain http, a missing file) makes only that manual unusable:
serve starts without it and reports it as failed (a SIGHUP keeps its last good
version). Any other error (malformed JSON, a template without
call_template_type or with a name that is not a string, two manuals with one
name, a bad section or gateway key, with --strict an unknown field) makes the
file unusable: serve refuses to start, a SIGHUP keeps the last good
configuration. Warnings that repeat across templates
are summarised ("240 providers: legacy field provider_type renamed to
call_template_type"). --strict makes unknown fields and ignored settings
errors.

With --json the result is one JSON object: the counts of errors and
warnings, the usable and the rejected manuals (by name) and every problem with
its severity, code, file, line, path, manual and message.

It exits 0 when the file has no error, 2 when it has errors.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			c := daemon.CheckConfig(args[0], daemon.CheckOptions{Strict: strict, Preflight: true, Guards: true, Base: defaultSettings()})
			errs, warnings := 0, 0
			for _, p := range c.Problems {
				if !asJSON {
					fmt.Fprintln(out, p.String())
				}
				if p.Severity == manuals.SeverityError {
					errs++
				} else {
					warnings++
				}
			}
			if asJSON {
				if err := writeValidateJSON(out, args[0], c, errs, warnings); err != nil {
					return err
				}
			}
			if errs > 0 {
				return &exitError{code: exitUsage, err: fmt.Errorf("%s: %s", args[0], count(errs, "error", ""))}
			}
			if !asJSON {
				fmt.Fprintf(out, "%s: OK (%s, %s)\n", args[0], count(len(c.Config.Cfg.ManualCallTemplates), "manual call template", ""), count(warnings, "warning", ""))
			}
			return nil
		},
	}
	validate.Flags().BoolVar(&asJSON, "json", false, `print one JSON object: {"file", "errors", "warnings", "manuals", "rejected", "problems"}`)
	validate.Flags().BoolVar(&strict, "strict", false, "treat unknown fields and ignored settings as errors")
	cmd.AddCommand(validate, newConfigSchemaCmd())
	return cmd
}

// validateResult is what config validate --json prints.
type validateResult struct {
	File     string            `json:"file"`
	Errors   int               `json:"errors"`
	Warnings int               `json:"warnings"`
	Manuals  []string          `json:"manuals"`
	Rejected []string          `json:"rejected"`
	Problems []manuals.Problem `json:"problems"`
}

func writeValidateJSON(w io.Writer, file string, c *daemon.Checked, errs, warnings int) error {
	res := validateResult{File: file, Errors: errs, Warnings: warnings, Manuals: []string{}, Rejected: []string{}, Problems: c.Problems}
	if res.Problems == nil {
		res.Problems = []manuals.Problem{}
	}
	if c.Config != nil && c.Config.Cfg != nil {
		for _, t := range c.Config.Cfg.ManualCallTemplates {
			res.Manuals = append(res.Manuals, t.Name)
		}
		for _, r := range c.Config.Cfg.Rejected {
			res.Rejected = append(res.Rejected, r.Name)
		}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(res)
}

func newConfigSchemaCmd() *cobra.Command {
	var strict bool
	cmd := &cobra.Command{
		Use:   "schema",
		Short: "Print the JSON Schema of configuration files",
		Long: `schema prints the JSON Schema (draft 2020-12) of utcpd configuration files,
generated from what this utcpd decodes: every manual call template type it
has, the gateway section and the guard kinds. docs/config.schema.json is its
output; an editor given the schema (a "$schema" key in the file) completes
and checks configurations as they are written. Unknown fields are allowed, as
they are warnings; --strict prints the variant for config validate --strict,
where they are errors. config validate remains the full check
(docs/configuration.md).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out, err := daemon.ConfigSchema(configSchemaOptions(strict))
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(out)
			return err
		},
	}
	cmd.Flags().BoolVar(&strict, "strict", false, "print the strict variant: unknown fields are errors")
	return cmd
}

// configSchemaOptions are the options of utcpd config schema: every
// registered transport and guard kind, and the built-in defaults except
// the data folder's (which depends on the machine).
func configSchemaOptions(strict bool) daemon.SchemaOptions {
	d := defaultSettings()
	d.DataDir = ""
	d.GuardTimeout = daemon.DefaultGuardTimeout
	d.ReviewTimeout = d.EffectiveReviewTimeout()
	d.AuditRetention = d.EffectiveAuditRetention()
	return daemon.SchemaOptions{Transports: transports.Default, Guards: guard.Default, Defaults: &d, Strict: strict}
}
