package main

import (
	"bufio"
	"bytes"
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

// maxEventBytes caps one server-sent event line read by utcpd stream.
const maxEventBytes = 16 << 20

func newStreamCmd() *cobra.Command {
	var tf targetFlags
	var argsJSON string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "stream TOOL",
		Short: "Call a tool as a stream and print its events as they come",
		Long: `stream calls TOOL (manual.tool, or an unambiguous tool name) with the JSON object
given by --args as a stream (POST /v1/tools/TOOL/stream on a daemon, read as
server-sent events) and prints each event's data as one line of JSON the moment
it arrives. A tool whose transport does not stream gives one event.
` + toolsModes + `

It exits 0 after the last event, 3 when the tool itself reported an error (the
error is printed on stderr after the events before it), 2 when --args is not a
JSON object, and 1 when the call could not be made or broke off.`,
		Example: `  utcpd stream demo.count --args '{"n": 3, "delay_ms": 500}'`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			callArgs, err := parseArgsFlag(argsJSON)
			if err != nil {
				return err
			}
			c, err := tf.remote(cmd)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if c != nil {
				// The daemon enforces the deadline; the client waits a
				// little longer to read the end of the stream.
				ctx, cancel := withTimeout(cmd.Context(), timeout+5*time.Second)
				defer cancel()
				return streamRemote(ctx, c, args[0], callArgs, timeout, out)
			}
			g, done, err := tf.openAudited(cmd, true)
			if err != nil {
				return err
			}
			defer done()
			defer g.Close()
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			return streamLocal(ctx, g, args[0], callArgs, out)
		},
	}
	tf.add(cmd)
	cmd.Flags().StringVarP(&argsJSON, "args", "a", "{}", "the tool's arguments as a JSON object")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "the call's deadline (a daemon caps it at its max_timeout)")
	return cmd
}

// streamFailure is the exit of a stream that ended with an error: 3 for a
// failure the tool reported, else 1.
func streamFailure(err error) error {
	if utcp.CodeOf(err) == utcp.CodeToolError {
		return &exitError{code: exitToolError, err: err}
	}
	var re *remoteError
	if errors.As(err, &re) && re.Code == utcp.CodeToolError {
		return &exitError{code: exitToolError, err: err}
	}
	return &exitError{code: exitFailure, err: err}
}

// printEvent writes one event's data as a line of JSON.
func printEvent(w io.Writer, data []byte) error {
	var buf bytes.Buffer
	if err := json.Compact(&buf, data); err != nil {
		buf.Reset()
		buf.Write(data)
	}
	buf.WriteByte('\n')
	_, err := w.Write(buf.Bytes())
	return err
}

// streamLocal runs the stream in-process.
func streamLocal(ctx context.Context, g *gateway.Gateway, tool string, args map[string]any, out io.Writer) error {
	st, err := g.CallToolStreaming(ctx, tool, args, gateway.CallOptions{Principal: "cli", Front: "cli"})
	if err != nil {
		return streamFailure(err)
	}
	defer st.Close()
	for {
		ev, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return streamFailure(err)
		}
		data, err := json.Marshal(ev.Data)
		if err != nil {
			return fmt.Errorf("encoding an event: %w", err)
		}
		if err := printEvent(out, data); err != nil {
			return err
		}
	}
}

// streamRemote posts to the daemon's stream route and prints the events
// as they come.
func streamRemote(ctx context.Context, c *client, tool string, args map[string]any, timeout time.Duration, out io.Writer) error {
	path := "/v1/tools/" + pathEscape(tool) + "/stream"
	resp, err := c.send(ctx, http.MethodPost, path, url.Values{"timeout": {timeout.String()}}, front.CallRequest{Arguments: args}, "text/event-stream")
	if err != nil {
		return streamFailure(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		return fmt.Errorf("POST %s: the answer is %q, not an event stream", path, ct)
	}
	return readEvents(resp.Body, func(event string, data []byte) (bool, error) {
		switch event {
		case "chunk", "":
			return true, printEvent(out, data)
		case "end":
			return false, nil
		case "error":
			return false, streamFailure(decodeRemoteError(http.StatusOK, data))
		}
		return true, nil // an event this version does not know
	}, func() error {
		if ctx.Err() != nil {
			return fmt.Errorf("POST %s: %w", path, ctx.Err())
		}
		return fmt.Errorf("POST %s: the stream ended without an end event", path)
	})
}

// readEvents reads server-sent events from r and hands each (its event
// name and data) to fn until fn says stop or fails. A stream that ends
// before that is ended()'s error. Lines are capped at maxEventBytes.
func readEvents(r io.Reader, fn func(event string, data []byte) (bool, error), ended func() error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxEventBytes)
	event := ""
	var data []byte
	hasData := false
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 {
			if hasData {
				more, err := fn(event, data)
				if err != nil || !more {
					return err
				}
			}
			event, data, hasData = "", data[:0], false
			continue
		}
		if line[0] == ':' {
			continue // a comment: the heartbeat
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "event":
			event = string(value)
		case "data":
			if hasData {
				data = append(data, '\n')
			}
			data = append(data, value...)
			hasData = true
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return fmt.Errorf("an event is larger than %d bytes", maxEventBytes)
		}
		return fmt.Errorf("reading the stream: %w (%w)", err, ended())
	}
	return ended()
}
