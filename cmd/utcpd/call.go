package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/utcpd/utcpd/api/front"
	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/utcp"
)

func newCallCmd() *cobra.Command {
	var tf targetFlags
	var argsJSON string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "call TOOL",
		Short: "Call a tool and print its result as JSON",
		Long: `call calls TOOL (manual.tool, or an unambiguous tool name) once with the JSON
object given by --args, through the same guard and checks as the daemon, and
prints {"result": ..., "is_error": ...}.
` + toolsModes + `

It exits 0 when the tool succeeded, 3 when the tool itself reported an error
(the result holds the tool's error), 2 when --args is not a JSON object or the
configuration is unusable, and 1 when the call could not be made (the error's
code and message are printed, e.g. "utcpd: tool_not_found: ...").`,
		Example: `  utcpd call demo.add --args '{"a": 2, "b": 3}' --config examples/manuals/quickstart.json
  utcpd call demo.add --args '{"a": 2, "b": 3}' --server http://127.0.0.1:8787`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			callArgs, err := parseArgsFlag(argsJSON)
			if err != nil {
				return err
			}
			c, err := tf.remote(cmd)
			if err != nil {
				return err
			}
			var out front.CallResponse
			if c != nil {
				// The daemon enforces the deadline; the client waits a
				// little longer to receive its answer.
				ctx, cancel := withTimeout(cmd.Context(), timeout+5*time.Second)
				defer cancel()
				q := url.Values{"timeout": {timeout.String()}}
				body := front.CallRequest{Arguments: callArgs}
				if err := c.do(ctx, http.MethodPost, "/v1/tools/"+pathEscape(args[0])+"/call", q, body, &out); err != nil {
					return err
				}
			} else {
				g, done, err := tf.openAudited(cmd, true)
				if err != nil {
					return err
				}
				defer done()
				defer g.Close()
				ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
				defer cancel()
				res, err := g.CallTool(ctx, args[0], callArgs, gateway.CallOptions{Principal: "cli", Front: "cli"})
				var te *utcp.ToolError
				switch {
				case errors.As(err, &te) && utcp.CodeOf(err) == utcp.CodeToolError:
					out = front.CallResponse{Result: toolErrorValue(te), IsError: true}
				case err != nil:
					return err
				default:
					out = front.CallResponse{Result: res.Value}
				}
			}
			if err := writeJSON(cmd.OutOrStdout(), map[string]any{"result": out.Result, "is_error": out.IsError}); err != nil {
				return err
			}
			if out.IsError {
				return &exitError{code: exitToolError, err: errors.New("")}
			}
			return nil
		},
	}
	tf.add(cmd)
	cmd.Flags().StringVarP(&argsJSON, "args", "a", "{}", "the tool's arguments as a JSON object")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "the call's deadline (a daemon caps it at its max_timeout)")
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

// parseArgsFlag decodes --args: one JSON object (numbers kept as
// json.Number), or null for none. Anything else is a usage error saying
// what was given.
func parseArgsFlag(s string) (map[string]any, error) {
	usage := func(format string, a ...any) error {
		return &exitError{code: exitUsage, err: fmt.Errorf("--args must be a JSON object of the tool's arguments, such as '{\"a\": 1}': "+format, a...)}
	}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, usage("it is empty")
		}
		return nil, usage("it is not valid JSON (%s)", strings.TrimPrefix(err.Error(), "json: "))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, usage("it has more after the first JSON value")
	}
	switch x := v.(type) {
	case map[string]any:
		return x, nil
	case nil:
		return nil, nil // no arguments, as {"arguments": null} on REST
	case []any:
		return nil, usage("got an array")
	case string:
		return nil, usage("got a string")
	case json.Number:
		return nil, usage("got a number")
	case bool:
		return nil, usage("got a boolean")
	}
	return nil, usage("got %T", v)
}
