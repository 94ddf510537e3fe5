package main

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/spf13/cobra"

	"github.com/utcpd/utcpd/daemon"
	"github.com/utcpd/utcpd/manuals"
	"github.com/utcpd/utcpd/sources"
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
	var strict bool
	validate := &cobra.Command{
		Use:   "validate FILE",
		Short: "Check a configuration file and report every problem with its location",
		Long: `validate loads FILE as a UTCP client configuration (v1.1, or legacy v0.1
providers), parses every manual call template with its transport, and prints
each problem as "file:line: json.path: message". It also checks the utcpd
"gateway" section (docs/cli.md, "utcpd serve"). Unknown fields are warnings
(with the closest known field); --strict makes them errors.

It exits 0 when the file is usable, 2 when it has errors.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			var data []byte
			opts := manuals.Options{Strict: strict, Parser: transports.Default, ReadFile: func(name string) ([]byte, error) {
				b, err := sources.ReadCapped(name, 32<<20)
				if name == args[0] {
					data = b
				}
				return b, err
			}}
			cfg, err := manuals.LoadConfig(args[0], opts)
			if err != nil {
				ps := manuals.ProblemsOf(err)
				if len(ps) == 0 {
					return &exitError{code: exitUsage, err: err}
				}
				for _, p := range ps {
					fmt.Fprintln(out, p.String())
				}
				return &exitError{code: exitUsage, err: fmt.Errorf("%s: %s", args[0], count(len(ps), "problem", ""))}
			}
			errs := 0
			ps := manuals.Validate(cfg, transports.Default, strict)
			s := defaultSettings()
			gwErrs, gwWarnings := daemon.ApplyGateway(&s, cfg, data, strict)
			gwps := append(gwErrs, gwWarnings...)
			if p := daemon.ValidateGuards(cfg, &s, data); p != nil {
				gwps = append(gwps, *p)
			}
			slices.SortStableFunc(gwps, func(a, b manuals.Problem) int { return cmp.Compare(a.Line, b.Line) })
			ps = append(ps, gwps...)
			for _, p := range ps {
				fmt.Fprintln(out, p.String())
				if p.Severity == manuals.SeverityError {
					errs++
				}
			}
			if errs > 0 {
				return &exitError{code: exitUsage, err: fmt.Errorf("%s: %s", args[0], count(errs, "error", ""))}
			}
			fmt.Fprintf(out, "%s: OK (%s, %s)\n", args[0], count(len(cfg.ManualCallTemplates), "manual call template", ""), count(len(ps), "warning", ""))
			return nil
		},
	}
	validate.Flags().BoolVar(&strict, "strict", false, "treat unknown fields and ignored settings as errors")
	cmd.AddCommand(validate)
	return cmd
}
