// Command utcpd is the universal tool-calling gateway daemon: it loads UTCP
// manuals into one registry and calls their tools over each tool's native
// transport, through one guard.
//
//	utcpd serve                      run the daemon (admin API, REST front)
//	utcpd call TOOL --args JSON      call a tool (daemon or in-process)
//	utcpd stream TOOL --args JSON    call a tool as a stream, print its events as they come
//	utcpd tools list|search|show|export   inspect tools (daemon or in-process)
//	utcpd manuals list|show|add|rm|refresh   manage a daemon's manuals
//	utcpd reviews list|show|approve|deny     decide the calls a guard parked for review
//	utcpd audit [--tool --since --outcome --decision --limit]   read a daemon's audit log
//	utcpd config validate FILE       check a configuration file
//	utcpd mcp                        serve the tools to an MCP client over stdio
//	utcpd version, utcpd --version   print versions
//
// The full reference of every command and flag is docs/cli.md.
//
// Exit codes: 0 success; 1 the command failed (the error is printed);
// 2 bad usage or an invalid configuration; 3 the tool itself reported an
// error (utcpd call).
package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"syscall"

	"github.com/joho/godotenv"
	"github.com/spf13/cobra"

	_ "github.com/utcpd/utcpd/transports/all" // every transport
)

// Exit codes.
const (
	exitOK        = 0
	exitFailure   = 1
	exitUsage     = 2
	exitToolError = 3
)

// exitError carries an exit code through cobra. An empty message prints
// nothing.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}

// run executes the command line args and returns the exit code.
func run(ctx context.Context, args []string) int {
	root := newRootCmd()
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	code := exitUsage // cobra's own errors: unknown command or flag, wrong arguments
	var ee *exitError
	if errors.As(err, &ee) {
		code = ee.code
	}
	if msg := describe(err); msg != "" {
		fmt.Fprintln(os.Stderr, "utcpd:", msg)
		if ee == nil {
			fmt.Fprintln(os.Stderr, "Run 'utcpd --help' for usage.")
		}
	}
	return code
}

const rootLong = `utcpd loads UTCP manuals (v1.1, and legacy v0.1 providers) into one registry
of qualified tool names (manual.tool) and calls each tool through its native
transport, after the guard has allowed it.

Run the daemon with "utcpd serve"; "utcpd tools", "utcpd call" and "utcpd stream"
work against a running daemon (--server) or in-process from a configuration
file (--config); "utcpd manuals", "utcpd reviews" and "utcpd audit" use a
running daemon's admin API. Every command and flag: docs/cli.md.

A .env file in the working directory is loaded into the environment before any
command runs (variables already set win).

Environment:
  UTCPD_CONFIG        configuration file (serve, and tools/call/stream in-process)
  UTCPD_SERVER        daemon URL for tools, call, stream, manuals, reviews, audit
  UTCPD_API_KEY       API key the tools, call and stream commands send to a daemon
  UTCPD_ADMIN_TOKEN   admin token (serve: the token to require; manuals, reviews
                      and audit: the one to send)
  UTCPD_LISTEN, UTCPD_API_KEYS, UTCPD_DATA_DIR, UTCPD_STORE, UTCPD_MANUALS_DIR,
  UTCPD_LOG_FORMAT, UTCPD_LOG_LEVEL   serve settings (docs/cli.md)

Exit codes:
  0  success
  1  failure: the command could not do its work (the error code and message
     are printed, e.g. "utcpd: tool_not_found: ...")
  2  bad usage (unknown command or flag, wrong arguments) or an invalid
     configuration, flag value or environment variable
  3  the tool itself reported an error (utcpd call: the result is printed;
     utcpd stream: the error is printed)`

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "utcpd",
		Short:         "The universal tool-calling gateway",
		Long:          rootLong,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return loadDotenv()
		},
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &exitError{code: exitUsage, err: err}
	})
	root.AddCommand(newServeCmd(), newCallCmd(), newStreamCmd(), newToolsCmd(), newManualsCmd(), newReviewsCmd(), newAuditCmd(),
		newConfigCmd(), newVersionCmd(), newMCPCmd())
	// --version prints what utcpd version prints.
	root.Version = versionString()
	root.SetVersionTemplate(versionText())
	markFailures(root)
	return root
}

// markFailures wraps the RunE of every command so that an error without
// an exit code exits 1 (failure), and the Args check so that wrong
// arguments exit 2 (usage).
func markFailures(cmd *cobra.Command) {
	if run := cmd.RunE; run != nil {
		cmd.RunE = func(c *cobra.Command, args []string) error {
			err := run(c, args)
			var ee *exitError
			if err != nil && !errors.As(err, &ee) {
				return &exitError{code: exitFailure, err: err}
			}
			return err
		}
	}
	if check := cmd.Args; check != nil {
		cmd.Args = func(c *cobra.Command, args []string) error {
			if err := check(c, args); err != nil {
				return &exitError{code: exitUsage, err: fmt.Errorf("%w (see '%s --help')", err, c.CommandPath())}
			}
			return nil
		}
	}
	for _, sub := range cmd.Commands() {
		markFailures(sub)
	}
}

// loadDotenv loads ./.env into the environment; variables already set
// win. A missing file is fine; an unreadable or malformed one is a usage
// error.
func loadDotenv() error {
	if _, err := os.Stat(".env"); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err := godotenv.Load(".env"); err != nil {
		return &exitError{code: exitUsage, err: fmt.Errorf(".env: %w", err)}
	}
	return nil
}
