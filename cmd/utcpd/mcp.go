package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/utcpd/utcpd/api/codemode"
	"github.com/utcpd/utcpd/api/front"
	"github.com/utcpd/utcpd/api/mcpfront"
	"github.com/utcpd/utcpd/daemon"
	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/internal/telemetry"
	"github.com/utcpd/utcpd/internal/tracing"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/utcp"
)

// defaultMCPPoll is how often "utcpd mcp --connect" re-reads the daemon's
// tools to notice changes.
const defaultMCPPoll = 10 * time.Second

func newMCPCmd() *cobra.Command {
	var (
		configPath, connect, apiKey, logLevel string
		toolset                               string
		strict, shortNames, codeMode          bool
		nativeNames                           []string
		timeout, poll                         time.Duration
	)
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve the tools to an MCP client over stdio",
		Long: `mcp serves every tool as a Model Context Protocol server on standard input and
output, so that desktop agents and IDEs can launch utcpd as a command.

Two modes:
  --config FILE   run an in-process gateway from a UTCP client configuration
                  (default $UTCPD_CONFIG, else ./utcpd.json): its manuals are
                  registered at start and its guard chain applies.
  --connect URL   bridge to a running daemon (default $UTCPD_SERVER): tools/list
                  reads GET /v1/tools (re-read every --poll to send
                  notifications/tools/list_changed), tools/call posts to
                  /v1/tools/{name}/call, or /stream when the request carries a
                  progressToken; the daemon's guard, audit and metrics apply.
                  The API key comes from --api-key or $UTCPD_API_KEY.
With neither, ./utcpd.json runs in-process when it exists, else the daemon at
http://127.0.0.1:8787 is used.

Tools are listed under their qualified names (manual.tool); --native-names
manual.server lists that MCP server's tools exactly as the server names them;
--codemode (with --config) also offers codemode.run. See docs/mcp.md for names,
results and the error mapping. Standard output carries only MCP
messages; warnings and logs go to standard error.

Example client configuration (Claude Desktop, Cursor, ...):
  {"mcpServers": {"utcpd": {"command": "utcpd", "args": ["mcp", "--connect", "http://127.0.0.1:8787"],
                            "env": {"UTCPD_API_KEY": "..."}}}}

It exits 0 when the client closes the connection, 1 when the tools cannot be
read at start (daemon unreachable, wrong API key), 2 for bad usage or an
unusable configuration.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			level, err := daemon.ParseLevel(logLevel)
			if err != nil {
				return &exitError{code: exitUsage, err: fmt.Errorf("--log-level: %w", err)}
			}
			log := slog.New(utcp.RedactHandler(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level})))
			// Traces, as the daemon's: only when OTEL_* asks for them;
			// bridged, the trace context goes on to the daemon.
			tel, err := telemetry.Setup(cmd.Context(), telemetry.Options{Version: versionString(), Log: log.With("component", "telemetry")})
			if err != nil {
				return &exitError{code: exitUsage, err: fmt.Errorf("tracing: %w", err)}
			}
			defer func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_ = tel.Shutdown(ctx)
			}()
			opts := mcpfront.Options{
				Name: "utcpd", Version: versionString(), CallTimeout: timeout, ShortNames: shortNames,
				NativeNames: nativeNames, Principal: "stdio", Logger: log,
			}
			server := connect
			if server == "" && !cmd.Flags().Changed("config") {
				server = serverFromEnv()
				if server == "" && os.Getenv(envConfig) == "" {
					if _, err := os.Stat(defaultConfigFile); err != nil {
						server = "http://" + defaultListen
					}
				}
			}
			if server != "" && cmd.Flags().Changed("config") {
				return &exitError{code: exitUsage, err: errors.New("--connect and --config exclude each other: bridge to a running daemon or run a configuration in-process")}
			}
			if server != "" {
				if apiKey == "" {
					apiKey = os.Getenv(envAPIKey)
				}
				c, err := newClient(server, apiKey)
				if err != nil {
					return err
				}
				if poll <= 0 {
					return &exitError{code: exitUsage, err: errors.New("--poll must be positive")}
				}
				if codeMode {
					return &exitError{code: exitUsage, err: errors.New("--codemode needs --config: bridged, the daemon's tools are what the front lists")}
				}
				opts.Backend = &restBackend{c: c, poll: poll, toolset: toolset}
				if toolset != "" {
					opts.NativeNames, opts.ShortNames = nil, false
				}
			} else {
				path := configPath
				if !cmd.Flags().Changed("config") {
					if v := os.Getenv(envConfig); v != "" {
						path = v
					}
				}
				cfg, err := loadConfig(path, strict, cmd.ErrOrStderr())
				if err != nil {
					return err
				}
				g, err := newGateway(cmd.Context(), cfg, log.With("component", "gateway"), cmd.ErrOrStderr())
				if err != nil {
					return err
				}
				defer g.Close()
				opts.Gateway = g
				if toolset != "" {
					sets, msg := daemon.ConfigToolsets(cfg)
					if msg != "" {
						return &exitError{code: exitUsage, err: fmt.Errorf("gateway.toolsets: %s", msg)}
					}
					if err := g.SetToolsets(sets, nil); err != nil {
						return &exitError{code: exitUsage, err: err}
					}
					if _, err := g.Toolset(toolset); err != nil {
						return &exitError{code: exitUsage, err: fmt.Errorf("--toolset: %w (the configuration's gateway.toolsets has none of that name)", err)}
					}
					if codeMode {
						return &exitError{code: exitUsage, err: errors.New("--codemode and --toolset exclude each other: a toolset lists its own tools")}
					}
					opts.Gateway, opts.Backend = nil, mcpfront.ToolsetBackend(g, toolset)
					opts.NativeNames, opts.ShortNames = nil, false
				}
				// In-process and asked for, the front offers CodeMode
				// (codemode.run); bridged, the daemon's tools are what it lists.
				if codeMode {
					runner, err := codemode.New(codemode.Options{Tools: g})
					if err != nil {
						return err
					}
					opts.CodeMode = runner
				}
			}
			if timeout <= 0 {
				return &exitError{code: exitUsage, err: errors.New("--timeout must be positive")}
			}
			front, err := mcpfront.New(cmd.Context(), opts)
			if err != nil {
				if len(nativeNames) > 0 && strings.Contains(err.Error(), "native name") {
					return &exitError{code: exitUsage, err: err}
				}
				return err
			}
			defer front.Close()
			return front.RunIO(cmd.Context(), cmd.InOrStdin(), cmd.OutOrStdout())
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&configPath, "config", "c", defaultConfigFile, "in-process: UTCP client configuration to load (default $UTCPD_CONFIG, else utcpd.json)")
	fl.BoolVar(&strict, "strict", false, "in-process: treat unknown configuration fields as errors")
	fl.StringVar(&connect, "connect", "", "bridge to the running daemon at this URL [$UTCPD_SERVER]")
	fl.StringVar(&apiKey, "api-key", "", "with --connect: API key for the REST front; prefer $UTCPD_API_KEY, flags show in ps [$UTCPD_API_KEY]")
	fl.BoolVar(&shortNames, "short-names", false, "list a tool under its name without the manual prefix while no other tool has that name")
	fl.StringArrayVar(&nativeNames, "native-names", nil, "list the tools of this MCP server (manual.server) exactly as the server names them (repeatable; colliding names are refused)")
	fl.BoolVar(&codeMode, "codemode", false, "in-process: also offer codemode.run (CodeMode)")
	fl.StringVar(&toolset, "toolset", "", "serve only this toolset (gateway.toolsets; bridged, also one created through /admin/toolsets): its tools under their listed names")
	fl.DurationVar(&timeout, "timeout", mcpfront.DefaultCallTimeout, "deadline of each tool call (a daemon caps it at its max_timeout)")
	fl.DurationVar(&poll, "poll", defaultMCPPoll, "with --connect: how often the daemon's tools are re-read to notice changes")
	fl.StringVar(&logLevel, "log-level", "warn", "log level on standard error: debug, info, warn or error")
	return cmd
}

// restBackend is the MCP front's Backend over a daemon's REST front.
type restBackend struct {
	c    *client
	poll time.Duration
	// toolset, when set, is the toolset served (/v1/toolsets/{toolset}/tools...).
	toolset string
}

// toolsPath is where the tools are listed and called.
func (b *restBackend) toolsPath() string {
	if b.toolset != "" {
		return "/v1/toolsets/" + url.PathEscape(b.toolset) + "/tools"
	}
	return "/v1/tools"
}

// Tools reads every tool (GET /v1/tools, page by page), with the
// metadata of MCP tools (?mcp=true).
func (b *restBackend) Tools(ctx context.Context) ([]*utcp.Tool, error) {
	tools, err := remoteToolsAt(ctx, b.c, b.toolsPath(), url.Values{"mcp": {"true"}}, 0)
	if err != nil {
		return nil, fromRemote(err)
	}
	return tools, nil
}

// CallTool posts to /v1/tools/{name}/call?mcp=true with opts.Timeout as
// ?timeout=. An is_error answer is a *utcp.ToolError carrying the tool's
// value; an MCP server's own result comes back in MCP.
func (b *restBackend) CallTool(ctx context.Context, name string, args map[string]any, opts gateway.CallOptions) (*utcp.Result, error) {
	var out front.CallResponse
	err := b.c.do(ctx, http.MethodPost, b.toolsPath()+"/"+pathEscape(name)+"/call", nativeQuery(opts.Timeout), front.CallRequest{Arguments: args}, &out)
	if err != nil {
		return nil, fromRemote(err)
	}
	if out.IsError {
		te := toolErrorOf(out.Result)
		te.MCP = out.MCP
		return nil, te
	}
	return &utcp.Result{Value: out.Result, MCP: out.MCP}, nil
}

// nativeQuery is timeoutQuery with mcp=true: the daemon's answers in
// their MCP-native forms (see package api/front).
func nativeQuery(d time.Duration) url.Values {
	q := timeoutQuery(d)
	if q == nil {
		q = url.Values{}
	}
	q.Set("mcp", "true")
	return q
}

// CallToolStreaming posts to /v1/tools/{name}/stream?mcp=true and reads
// its events, with their types and MCP results when the daemon answers in
// that form (header Utcpd-MCP).
func (b *restBackend) CallToolStreaming(ctx context.Context, name string, args map[string]any, opts gateway.CallOptions) (transports.Stream, error) {
	body, err := json.Marshal(front.CallRequest{Arguments: args})
	if err != nil {
		return nil, err
	}
	target := strings.TrimRight(b.c.base.String(), "/") + b.toolsPath() + "/" + pathEscape(name) + "/stream"
	if q := nativeQuery(opts.Timeout).Encode(); q != "" {
		target += "?" + q
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("User-Agent", "utcpd/"+versionString())
	if b.c.token != "" {
		req.Header.Set("Authorization", "Bearer "+b.c.token)
	}
	tracing.InjectHeader(ctx, req.Header)
	resp, err := b.c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, utcp.Errorf(utcp.CodeUnavailable, "cannot reach utcpd at %s: %w", b.c.base, errors.Unwrap(err))
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return nil, fromRemote(decodeRemoteError(resp.StatusCode, data))
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	return &sseStream{body: resp.Body, sc: sc, native: resp.Header.Get(front.HeaderMCP) == "1"}, nil
}

// Subscribe calls fn every poll interval: the MCP front re-reads the
// tools and notifies clients only when they changed.
func (b *restBackend) Subscribe(fn func()) (cancel func()) {
	stop := make(chan struct{})
	var once sync.Once
	go func() {
		t := time.NewTicker(b.poll)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				fn()
			}
		}
	}()
	return func() { once.Do(func() { close(stop) }) }
}

func timeoutQuery(d time.Duration) url.Values {
	if d <= 0 {
		return nil
	}
	return url.Values{"timeout": {d.String()}}
}

// fromRemote turns a daemon's error answer into the *utcp.Error it
// reported (a tool_error into a *utcp.ToolError), so the MCP front maps
// it as it maps the gateway's; a daemon that cannot be reached is
// unavailable.
func fromRemote(err error) error {
	var re *remoteError
	if !errors.As(err, &re) {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		return utcp.Errorf(utcp.CodeUnavailable, "%w", err)
	}
	if re.Code == utcp.CodeToolError {
		te := &utcp.ToolError{Message: re.Message, Value: re.Details["value"]}
		if s, ok := re.Details["status"].(json.Number); ok {
			n, _ := s.Int64()
			te.Status = int(n)
		}
		return te
	}
	ue := utcp.NewError(re.Code, "%s", re.Message)
	for k, v := range re.Details {
		ue.WithDetail(k, v)
	}
	return ue
}

// toolErrorOf is the *utcp.ToolError of an is_error result: its value,
// with the value as the message when it is a string, else its JSON.
func toolErrorOf(v any) *utcp.ToolError {
	te := &utcp.ToolError{Value: v}
	switch x := v.(type) {
	case string:
		te.Message, te.Value = x, nil
	case map[string]any:
		if msg, ok := x["error"].(string); ok {
			te.Message = msg
		}
	}
	if te.Message == "" {
		b, _ := json.Marshal(v)
		te.Message = string(b)
	}
	return te
}

// sseStream reads the REST front's stream events: chunk (an event),
// end (io.EOF) and error (the envelope's error). native: chunks carry a
// front.StreamEvent.
type sseStream struct {
	body   io.ReadCloser
	sc     *bufio.Scanner
	err    error
	native bool
}

// Recv returns the next chunk event, io.EOF after the end event, or the
// error the error event carries.
func (s *sseStream) Recv() (*utcp.Event, error) {
	if s.err != nil {
		return nil, s.err
	}
	var event, id string
	var data []byte
	for s.sc.Scan() {
		line := s.sc.Text()
		if line == "" {
			if event == "" && data == nil {
				continue
			}
			ev, err := s.decode(event, id, data)
			if err != nil {
				s.err = err
				return nil, err
			}
			if ev != nil {
				return ev, nil
			}
			event, id, data = "", "", nil
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			event = value
		case "id":
			id = value
		case "data":
			if data != nil {
				data = append(data, '\n')
			}
			data = append(data, value...)
		}
	}
	if err := s.sc.Err(); err != nil {
		s.err = utcp.Errorf(utcp.CodeTransportError, "reading the stream: %w", err)
	} else {
		s.err = utcp.NewError(utcp.CodeTransportError, "the stream ended without its end event")
	}
	return nil, s.err
}

// decode turns one event into an Event, io.EOF (end) or an error; nil for
// events it does not know.
func (s *sseStream) decode(event, id string, data []byte) (*utcp.Event, error) {
	switch event {
	case "chunk", "":
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		if s.native {
			var ev front.StreamEvent
			if err := dec.Decode(&ev); err != nil {
				return nil, utcp.Errorf(utcp.CodeTransportError, "a stream event is not JSON: %w", err)
			}
			return &utcp.Event{Type: ev.Type, ID: id, Data: ev.Data, MCP: ev.MCP}, nil
		}
		var v any
		if err := dec.Decode(&v); err != nil {
			return nil, utcp.Errorf(utcp.CodeTransportError, "a stream event is not JSON: %w", err)
		}
		return &utcp.Event{ID: id, Data: v}, nil
	case "end":
		return nil, io.EOF
	case "error":
		return nil, fromRemote(decodeRemoteError(http.StatusBadGateway, data))
	}
	return nil, nil
}

// Close ends the stream; the daemon cancels the call.
func (s *sseStream) Close() error { return s.body.Close() }
