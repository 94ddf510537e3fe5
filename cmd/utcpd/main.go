// Command utcpd is the universal tool-calling gateway daemon: it loads UTCP
// manuals into one registry and calls their tools over each tool's native
// transport, through one guard.
//
// Exit codes: 0 success; 1 the command failed (the error is printed);
// 2 bad usage or an invalid configuration; 3 the tool itself reported an
// error (utcpd call).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

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

// exitError carries an exit code through cobra.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	root := newRootCmd()
	err := root.ExecuteContext(ctx)
	stop()
	if err != nil {
		code := exitFailure
		var ee *exitError
		if errors.As(err, &ee) {
			code = ee.code
		}
		if err.Error() != "" {
			fmt.Fprintln(os.Stderr, "utcpd:", err)
		}
		os.Exit(code)
	}
	os.Exit(exitOK)
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "utcpd",
		Short: "The universal tool-calling gateway",
		Long: `utcpd loads UTCP manuals (v1.1, and legacy v0.1 providers) into one registry
of qualified tool names (manual.tool) and calls each tool through its native
transport, after the guard has allowed it.

Exit codes: 0 success; 1 failure; 2 bad usage or invalid configuration;
3 the tool itself reported an error.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newVersionCmd(), newConfigCmd(), newToolsCmd(), newCallCmd())
	return root
}
