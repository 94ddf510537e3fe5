package confserver

//lint:file-ignore SA1019 the suite checks sampling and logging, deprecated only from protocol 2026-07-28 on

import (
	"bytes"
	"context"
	"encoding/json"
	"image/png"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The suite itself runs against this server in internal/mcpconformance
// (with UTCPD_NPM_PEERS=1), on protocol 2025-11-25. These tests drive it
// with the go-sdk client on both eras, in particular 2026-07-28, which
// utcpd's backend sessions speak and the suite does not.

// client is a connected session and what the server sent it.
type client struct {
	s *mcp.ClientSession

	mu       sync.Mutex
	progress []*mcp.ProgressNotificationParams
	logs     []*mcp.LoggingMessageParams
	samples  int
	elicits  []*mcp.ElicitParams
}

// connect runs srv in memory and connects a client that answers sampling
// and elicitation, asking for protocol version pv.
func connect(t *testing.T, srv *Server, pv string) *client {
	t.Helper()
	c := &client{}
	cl := mcp.NewClient(&mcp.Implementation{Name: "confserver-test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.progress = append(c.progress, r.Params)
		},
		LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.logs = append(c.logs, r.Params)
		},
		CreateMessageHandler: func(_ context.Context, r *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			c.mu.Lock()
			c.samples++
			c.mu.Unlock()
			prompt := r.Params.Messages[0].Content.(*mcp.TextContent).Text
			return &mcp.CreateMessageResult{Role: "assistant", Model: "test", Content: &mcp.TextContent{Text: "echo of " + prompt}}, nil
		},
		ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			c.mu.Lock()
			c.elicits = append(c.elicits, r.Params)
			c.mu.Unlock()
			var schema struct {
				Properties map[string]any `json:"properties"`
			}
			raw, _ := json.Marshal(r.Params.RequestedSchema)
			_ = json.Unmarshal(raw, &schema)
			content := map[string]any{}
			if _, ok := schema.Properties["username"]; ok {
				content = map[string]any{"username": "ada", "email": "ada@example.com"}
			}
			return &mcp.ElicitResult{Action: "accept", Content: content}, nil
		},
	})
	ct, st := mcp.NewInMemoryTransports()
	ss, err := srv.MCP().Connect(t.Context(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	cs, err := cl.Connect(t.Context(), ct, &mcp.ClientSessionOptions{ProtocolVersion: pv})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	c.s = cs
	return c
}

func (c *client) call(t *testing.T, name string, args map[string]any, token any) *mcp.CallToolResult {
	t.Helper()
	p := &mcp.CallToolParams{Name: name, Arguments: args}
	if token != nil {
		p.SetProgressToken(token)
	}
	res, err := c.s.CallTool(t.Context(), p)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

func onlyText(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if len(res.Content) != 1 {
		t.Fatalf("want one block, got %d: %+v", len(res.Content), res.Content)
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("want a text block, got %T", res.Content[0])
	}
	return tc.Text
}

// waitFor polls cond until it holds; notifications are delivered to the
// client's handlers concurrently with the call's result.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// revisions are the protocol versions the tests ask for: the classic
// handshake era the suite uses, and the stateless one.
var revisions = []string{"2025-11-25", "2026-07-28"}

func TestTools(t *testing.T) {
	for _, pv := range revisions {
		t.Run(pv, func(t *testing.T) {
			c := connect(t, New(), pv)
			if got := c.s.InitializeResult().ProtocolVersion; got != pv {
				t.Fatalf("negotiated %s, want %s", got, pv)
			}

			if got := onlyText(t, c.call(t, ToolSimpleText, nil, nil)); got != SimpleText {
				t.Errorf("simple text %q", got)
			}

			img, ok := c.call(t, ToolImage, nil, nil).Content[0].(*mcp.ImageContent)
			if !ok || img.MIMEType != "image/png" {
				t.Fatalf("image block %+v", img)
			}
			if decoded, err := png.Decode(bytes.NewReader(img.Data)); err != nil || decoded.Bounds().Dx() != 1 {
				t.Errorf("the image is not a 1×1 PNG: %v", err)
			}

			audio, ok := c.call(t, ToolAudio, nil, nil).Content[0].(*mcp.AudioContent)
			if !ok || audio.MIMEType != "audio/wav" || !bytes.HasPrefix(audio.Data, []byte("RIFF")) || string(audio.Data[8:12]) != "WAVE" || len(audio.Data) != 44+160 {
				t.Errorf("audio block %+v", audio)
			}

			res, ok := c.call(t, ToolEmbeddedResource, nil, nil).Content[0].(*mcp.EmbeddedResource)
			if !ok || res.Resource.URI != "test://embedded-resource" || res.Resource.MIMEType != "text/plain" || res.Resource.Text != EmbeddedText {
				t.Errorf("embedded resource %+v", res)
			}

			var kinds []string
			for _, b := range c.call(t, ToolMixedContent, nil, nil).Content {
				raw, _ := json.Marshal(b)
				var k struct{ Type string }
				_ = json.Unmarshal(raw, &k)
				kinds = append(kinds, k.Type)
			}
			if !slices.Equal(kinds, []string{"text", "image", "resource"}) {
				t.Errorf("mixed content types %v", kinds)
			}

			if r := c.call(t, ToolError, nil, nil); !r.IsError || onlyText(t, r) != ErrorText {
				t.Errorf("error result %+v", r)
			}

			if got := onlyText(t, c.call(t, ToolReconnection, nil, nil)); !strings.Contains(got, "completed") {
				t.Errorf("reconnection %q", got)
			}
		})
	}
}

func TestProgressAndLogging(t *testing.T) {
	for _, pv := range revisions {
		t.Run(pv, func(t *testing.T) {
			c := connect(t, New(), pv)
			c.call(t, ToolProgress, nil, "tok-1")
			waitFor(t, "three progress notifications", func() bool {
				c.mu.Lock()
				defer c.mu.Unlock()
				return len(c.progress) >= 3
			})
			c.mu.Lock()
			for i, want := range []float64{0, 50, 100} {
				p := c.progress[i]
				if p.Progress != want || p.Total != 100 || p.ProgressToken != "tok-1" {
					t.Errorf("progress %d: %+v", i, p)
				}
			}
			c.mu.Unlock()

			// Without a level, go-sdk servers send no log messages; the
			// handshake era sets it with logging/setLevel.
			if pv < "2026-07-28" {
				if err := c.s.SetLoggingLevel(t.Context(), &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
					t.Fatal(err)
				}
				c.call(t, ToolLogging, nil, nil)
				waitFor(t, "three log messages", func() bool {
					c.mu.Lock()
					defer c.mu.Unlock()
					return len(c.logs) >= 3
				})
				c.mu.Lock()
				if c.logs[0].Data != "Tool execution started" || c.logs[2].Data != "Tool execution completed" || c.logs[1].Level != "info" {
					t.Errorf("logs %+v %+v %+v", c.logs[0], c.logs[1], c.logs[2])
				}
				c.mu.Unlock()
			}
		})
	}
}

func TestSamplingAndElicitation(t *testing.T) {
	for _, pv := range revisions {
		t.Run(pv, func(t *testing.T) {
			c := connect(t, New(), pv)
			if got := onlyText(t, c.call(t, ToolSampling, map[string]any{"prompt": "2+2?"}, nil)); got != "LLM response: echo of 2+2?" {
				t.Errorf("sampling answered %q", got)
			}
			if got := onlyText(t, c.call(t, ToolElicitation, map[string]any{"message": "who?"}, nil)); !strings.Contains(got, "action=accept") || !strings.Contains(got, "ada@example.com") {
				t.Errorf("elicitation answered %q", got)
			}
			if got := onlyText(t, c.call(t, ToolElicitDefaults, nil, nil)); !strings.Contains(got, "action=accept") {
				t.Errorf("defaults elicitation answered %q", got)
			}
			if got := onlyText(t, c.call(t, ToolElicitEnums, nil, nil)); !strings.Contains(got, "action=accept") {
				t.Errorf("enum elicitation answered %q", got)
			}
			r := c.call(t, ToolSampling, map[string]any{}, nil)
			if !r.IsError {
				t.Errorf("sampling without a prompt: %+v", r)
			}

			c.mu.Lock()
			defer c.mu.Unlock()
			if c.samples != 1 || len(c.elicits) != 3 {
				t.Fatalf("the client got %d sampling and %d elicitation requests, want 1 and 3", c.samples, len(c.elicits))
			}
			if c.elicits[0].Message != "who?" {
				t.Errorf("elicitation message %q", c.elicits[0].Message)
			}
			var defaults struct {
				Properties map[string]struct {
					Type    string `json:"type"`
					Default any    `json:"default"`
				} `json:"properties"`
			}
			raw, _ := json.Marshal(c.elicits[1].RequestedSchema)
			if err := json.Unmarshal(raw, &defaults); err != nil {
				t.Fatal(err)
			}
			want := map[string]any{"name": "John Doe", "age": 30.0, "score": 95.5, "status": "active", "verified": true}
			for k, v := range want {
				if defaults.Properties[k].Default != v {
					t.Errorf("default of %s: %v, want %v", k, defaults.Properties[k].Default, v)
				}
			}
			raw, _ = json.Marshal(c.elicits[2].RequestedSchema)
			for _, form := range []string{`"enumNames"`, `"oneOf"`, `"anyOf"`, `"untitledMulti"`} {
				if !bytes.Contains(raw, []byte(form)) {
					t.Errorf("the enum schema lacks %s: %s", form, raw)
				}
			}
		})
	}
}

func TestResourcesPromptsCompletion(t *testing.T) {
	for _, pv := range revisions {
		t.Run(pv, func(t *testing.T) {
			srv := New()
			c := connect(t, srv, pv)
			ctx := t.Context()

			read := func(uri string) *mcp.ResourceContents {
				t.Helper()
				r, err := c.s.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
				if err != nil || len(r.Contents) != 1 {
					t.Fatalf("read %s: %v %+v", uri, err, r)
				}
				return r.Contents[0]
			}
			if got := read(ResourceStaticText); got.Text != StaticText || got.MIMEType != "text/plain" {
				t.Errorf("static text %+v", got)
			}
			if got := read(ResourceStaticBinary); !bytes.Equal(got.Blob, PNG) || got.MIMEType != "image/png" {
				t.Errorf("static binary %+v", got)
			}
			if got := read("test://template/123/data"); got.URI != "test://template/123/data" || got.Text != `{"data":"Data for ID: 123","id":"123","templateTest":true}` {
				t.Errorf("template %+v", got)
			}
			if _, err := c.s.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://template/a/b/data"}); err == nil {
				t.Errorf("a template URI with a slash in the id was read")
			}
			var uris []string
			for r, err := range c.s.Resources(ctx, nil) {
				if err != nil {
					t.Fatal(err)
				}
				if r.Description == "" {
					t.Errorf("%s has no description", r.URI)
				}
				uris = append(uris, r.URI)
			}
			slices.Sort(uris)
			if want := []string{ResourceStaticBinary, ResourceStaticText, ResourceWatched}; !slices.Equal(uris, want) {
				t.Errorf("resources %v, want %v", uris, want)
			}

			if pv < "2026-07-28" { // subscriptions are per session: handshake era only
				if err := c.s.Subscribe(ctx, &mcp.SubscribeParams{URI: ResourceWatched}); err != nil {
					t.Fatal(err)
				}
				if got := srv.Subscribed(); !slices.Equal(got, []string{ResourceWatched}) {
					t.Errorf("subscribed %v", got)
				}
				if err := c.s.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: ResourceWatched}); err != nil {
					t.Fatal(err)
				}
				if got := srv.Subscribed(); len(got) != 0 {
					t.Errorf("still subscribed to %v", got)
				}
			}

			prompt := func(name string, args map[string]string) []*mcp.PromptMessage {
				t.Helper()
				r, err := c.s.GetPrompt(ctx, &mcp.GetPromptParams{Name: name, Arguments: args})
				if err != nil {
					t.Fatalf("prompt %s: %v", name, err)
				}
				return r.Messages
			}
			if m := prompt(PromptSimple, nil); m[0].Content.(*mcp.TextContent).Text != SimplePromptText {
				t.Errorf("simple prompt %+v", m[0])
			}
			if m := prompt(PromptWithArguments, map[string]string{"arg1": "hello", "arg2": "world"}); m[0].Content.(*mcp.TextContent).Text != "Prompt with arguments: arg1='hello', arg2='world'" {
				t.Errorf("prompt with arguments %+v", m[0].Content)
			}
			if m := prompt(PromptEmbeddedResource, map[string]string{"resourceUri": "test://x"}); m[0].Content.(*mcp.EmbeddedResource).Resource.URI != "test://x" {
				t.Errorf("embedded resource prompt %+v", m[0].Content)
			}
			if m := prompt(PromptWithImage, nil); m[0].Content.(*mcp.ImageContent).MIMEType != "image/png" {
				t.Errorf("image prompt %+v", m[0].Content)
			}

			complete := func(ref *mcp.CompleteReference, arg, value string) []string {
				t.Helper()
				r, err := c.s.Complete(ctx, &mcp.CompleteParams{Ref: ref, Argument: mcp.CompleteParamsArgument{Name: arg, Value: value}})
				if err != nil {
					t.Fatal(err)
				}
				return r.Completion.Values
			}
			if got := complete(&mcp.CompleteReference{Type: "ref/prompt", Name: PromptWithArguments}, "arg1", "pa"); !slices.Equal(got, []string{"paris", "park", "party"}) {
				t.Errorf("completion of arg1 %v", got)
			}
			if got := complete(&mcp.CompleteReference{Type: "ref/resource", URI: ResourceTemplate}, "id", "12"); !slices.Equal(got, []string{"123"}) {
				t.Errorf("completion of id %v", got)
			}
			if got := complete(&mcp.CompleteReference{Type: "ref/prompt", Name: PromptSimple}, "x", ""); got == nil || len(got) != 0 {
				t.Errorf("completion of an unknown argument %#v, want an empty list", got)
			}
		})
	}
}

func TestJSONSchemaTool(t *testing.T) {
	c := connect(t, New(), "2025-11-25")
	for tool, err := range c.s.Tools(t.Context(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		if tool.Description == "" {
			t.Errorf("%s has no description", tool.Name)
		}
		if tool.Name != ToolJSONSchema {
			continue
		}
		raw, _ := json.Marshal(tool.InputSchema)
		var s map[string]any
		_ = json.Unmarshal(raw, &s)
		if s["$schema"] != "https://json-schema.org/draft/2020-12/schema" || s["additionalProperties"] != false || s["$defs"] == nil {
			t.Errorf("schema %s", raw)
		}
		return
	}
	t.Errorf("%s is not listed", ToolJSONSchema)
}

// TestHTTP checks the handler's refusals: a foreign Host (DNS rebinding)
// and a cross-origin browser request are 403, a loopback request works.
func TestHTTP(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: New().Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	url := "http://" + ln.Addr().String() + "/"
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	post := func(host, origin string) int {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(initialize))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if host != "" {
			req.Host = host
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := post("evil.example.com", "http://evil.example.com"); got != http.StatusForbidden {
		t.Errorf("foreign Host: %d, want 403", got)
	}
	if got := post("", "http://evil.example.com"); got != http.StatusForbidden {
		t.Errorf("foreign Origin: %d, want 403", got)
	}
	if got := post("", "http://"+ln.Addr().String()); got != http.StatusOK {
		t.Errorf("same origin: %d, want 200", got)
	}
}
