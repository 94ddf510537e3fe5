package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/utcp"
)

func newCallCmd() *cobra.Command {
	var gf gatewayFlags
	var argsJSON string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "call TOOL",
		Short: "Call a tool and print its result as JSON",
		Long: `call calls TOOL (manual.tool, or an unambiguous tool name) with the JSON
object given by --args, through the same guard and checks as the daemon, and
prints {"result": ..., "is_error": ...}.

It exits 0 when the tool succeeded, 3 when the tool reported an error, and 1
when the call could not be made (the error's code is printed).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var callArgs map[string]any
			dec := json.NewDecoder(bytes.NewReader([]byte(argsJSON)))
			dec.UseNumber()
			if err := dec.Decode(&callArgs); err != nil {
				return &exitError{code: exitUsage, err: fmt.Errorf("--args must be a JSON object: %v", err)}
			}
			g, err := gf.open(cmd)
			if err != nil {
				return err
			}
			defer g.Close()
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			res, err := g.CallTool(ctx, args[0], callArgs, gateway.CallOptions{Principal: "cli"})
			var te *utcp.ToolError
			switch {
			case errors.As(err, &te):
				_ = writeJSON(cmd.OutOrStdout(), map[string]any{"result": toolErrorValue(te), "is_error": true})
				return &exitError{code: exitToolError, err: errors.New("")}
			case err != nil:
				return fmt.Errorf("[%s] %w", utcp.CodeOf(err), err)
			}
			return writeJSON(cmd.OutOrStdout(), map[string]any{"result": res.Value, "is_error": false})
		},
	}
	gf.add(cmd)
	cmd.Flags().StringVarP(&argsJSON, "args", "a", "{}", "the tool's arguments as a JSON object")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "give up after this long")
	return cmd
}

// toolErrorValue is what a tool error shows as its result: the tool's own
// payload when it sent one, else its message.
func toolErrorValue(te *utcp.ToolError) any {
	if te.Value != nil {
		return te.Value
	}
	return te.Message
}
