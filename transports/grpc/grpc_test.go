package grpc_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bufbuild/protocompile"
	"github.com/google/go-cmp/cmp"
	"github.com/santhosh-tekuri/jsonschema/v6"
	ggrpc "google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/reflection"
	rpbalpha "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/utcpd/utcpd/examples/servers/grpc/grpcserver"
	demov1 "github.com/utcpd/utcpd/proto/utcpd/demo/v1"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/transports/grpc"
	"github.com/utcpd/utcpd/transports/transporttest"
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
	"github.com/utcpd/utcpd/utcp"
)

// demoProtoRoot is the import root of demo.proto.
var demoProtoRoot = filepath.Join("..", "..", "proto")

// transport is a *grpc.Transport wrapped by transports.Count, as the
// gateway uses it.
type transport interface {
	RegisterManual(ctx context.Context, tmpl *utcp.CallTemplate) (*utcp.Manual, error)
	DeregisterManual(ctx context.Context, tmpl *utcp.CallTemplate) error
	CallTool(ctx context.Context, call *utcp.Call) (*utcp.Result, error)
	CallToolStream(ctx context.Context, call *utcp.Call) (transports.Stream, error)
	Close() error
}

func newTransport(t testing.TB, opts transports.Options) transport {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	raw, err := grpc.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	tr := transports.Count(grpc.Type, raw).(transport)
	t.Cleanup(func() { _ = tr.Close() })
	return tr
}

// tmpl parses a grpc template with the given fields, named "demo" unless
// fields name it.
func tmpl(t testing.TB, fields map[string]any) *utcp.CallTemplate {
	t.Helper()
	m := map[string]any{"name": "demo", "call_template_type": grpc.Type}
	for k, v := range fields {
		m[k] = v
	}
	raw, _ := json.Marshal(m)
	ct, err := grpc.ParseTemplate(raw)
	if err != nil {
		t.Fatalf("ParseTemplate(%s): %v", raw, err)
	}
	return &ct
}

func register(t testing.TB, tr transport, ct *utcp.CallTemplate) *utcp.Manual {
	t.Helper()
	m, err := tr.RegisterManual(t.Context(), ct)
	if err != nil {
		t.Fatalf("RegisterManual: %v", err)
	}
	return m
}

func do(t testing.TB, tr transport, ct *utcp.CallTemplate, tool string, args map[string]any) (any, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	res, err := tr.CallTool(ctx, &utcp.Call{Tool: ct.Name + "." + tool, Manual: ct.Name, Name: tool, Template: ct, Arguments: args})
	if err != nil {
		return nil, err
	}
	return norm(t, res.Value), nil
}

// norm round-trips v through JSON.
func norm(t testing.TB, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

func toolNames(m *utcp.Manual) []string {
	var out []string
	for _, tool := range m.Tools {
		out = append(out, tool.Name)
	}
	slices.Sort(out)
	return out
}

func toolByName(t testing.TB, m *utcp.Manual, name string) utcp.Tool {
	t.Helper()
	for _, tool := range m.Tools {
		if tool.Name == name {
			return tool
		}
	}
	t.Fatalf("no tool %q in %v", name, toolNames(m))
	return utcp.Tool{}
}

func wantCode(t testing.TB, err error, code utcp.Code) {
	t.Helper()
	if got := utcp.CodeOf(err); got != code {
		t.Fatalf("CodeOf(%v) = %s, want %s", err, got, code)
	}
}

// closedPort returns a loopback port nothing listens on.
func closedPort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	return port
}

func TestParseTemplate(t *testing.T) {
	cases := []struct {
		name   string
		fields map[string]any
		err    string // substring; empty means valid
	}{
		{"host and port", map[string]any{"host": "127.0.0.1", "port": 50051}, ""},
		{"target", map[string]any{"target": "dns:///localhost:50051"}, ""},
		{"target and host", map[string]any{"target": "localhost:1", "host": "x", "port": 1}, "target excludes host"},
		{"nothing", map[string]any{}, "host"},
		{"bad port", map[string]any{"host": "127.0.0.1", "port": 70000}, "port"},
		{"method without service", map[string]any{"host": "127.0.0.1", "port": 1, "method_name": "Add"}, "method_name needs service_name"},
		{"tls option without use_ssl", map[string]any{"host": "127.0.0.1", "port": 1, "ca_file": "ca.pem"}, "ca_file needs use_ssl"},
		{"skip verify without use_ssl", map[string]any{"host": "127.0.0.1", "port": 1, "insecure_skip_verify": true}, "insecure_skip_verify needs use_ssl"},
		{"cert without key", map[string]any{"host": "127.0.0.1", "port": 1, "use_ssl": true, "cert_file": "c.pem"}, "cert_file and key_file"},
		{"descriptor set and protos", map[string]any{"host": "127.0.0.1", "port": 1, "descriptor_set": "x.pb", "proto_files": []string{"a.proto"}}, "exclude each other"},
		{"import paths alone", map[string]any{"host": "127.0.0.1", "port": 1, "import_paths": []string{"."}}, "import_paths needs proto_files"},
		{"metadata ok", map[string]any{"host": "127.0.0.1", "port": 1, "metadata": map[string]string{"X-Tenant": "acme", "trace-bin": "AAE="}}, ""},
		{"metadata reserved", map[string]any{"host": "127.0.0.1", "port": 1, "metadata": map[string]string{"grpc-timeout": "1S"}}, "reserved"},
		{"metadata content-type", map[string]any{"host": "127.0.0.1", "port": 1, "metadata": map[string]string{"Content-Type": "x"}}, "set by gRPC"},
		{"metadata bad key", map[string]any{"host": "127.0.0.1", "port": 1, "metadata": map[string]string{"a b": "x"}}, "only letters"},
		{"metadata newline", map[string]any{"host": "127.0.0.1", "port": 1, "metadata": map[string]string{"a": "x\r\ny: z"}}, "printable"},
		{"metadata bin not base64", map[string]any{"host": "127.0.0.1", "port": 1, "metadata": map[string]string{"a-bin": "!!"}}, "base64"},
		{"negative timeout", map[string]any{"host": "127.0.0.1", "port": 1, "timeout": -1}, "timeout"},
		{"api key in query", map[string]any{"host": "127.0.0.1", "port": 1, "auth": map[string]any{"auth_type": "api_key", "api_key": "k", "location": "query"}}, "metadata"},
		{"other type", map[string]any{"call_template_type": "http", "host": "127.0.0.1", "port": 1}, "not \"grpc\""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := map[string]any{"name": "x", "call_template_type": grpc.Type}
			for k, v := range c.fields {
				m[k] = v
			}
			raw, _ := json.Marshal(m)
			_, err := grpc.ParseTemplate(raw)
			if c.err == "" {
				if err != nil {
					t.Fatalf("ParseTemplate: %v", err)
				}
				return
			}
			if !errors.Is(err, transports.ErrInvalidTemplate) || !strings.Contains(err.Error(), c.err) {
				t.Fatalf("err = %v, want invalid_template containing %q", err, c.err)
			}
		})
	}
}

// TestPlaintextOnlyToLoopback: without use_ssl, a host that is not
// loopback needs allow_insecure, at registration and at every call.
func TestPlaintextOnlyToLoopback(t *testing.T) {
	tr := newTransport(t, transports.Options{})
	protos := map[string]any{"proto_files": []string{"utcpd/demo/v1/demo.proto"}, "import_paths": []string{demoProtoRoot}}
	with := func(extra map[string]any) *utcp.CallTemplate {
		fields := map[string]any{}
		for k, v := range protos {
			fields[k] = v
		}
		for k, v := range extra {
			fields[k] = v
		}
		return tmpl(t, fields)
	}
	for _, target := range []map[string]any{
		{"host": "192.0.2.1", "port": 50051},
		{"host": "example.com", "port": 50051},
		{"target": "dns:///192.0.2.1:50051"},
		{"target": "dns://8.8.8.8/example.com:443"},
	} {
		_, err := tr.RegisterManual(t.Context(), with(target))
		wantCode(t, err, utcp.CodeInvalidTemplate)
		if !strings.Contains(err.Error(), "allow_insecure") {
			t.Errorf("error %q does not name allow_insecure", err)
		}
	}
	for _, ok := range []map[string]any{
		{"host": "localhost", "port": 50051},
		{"host": "::1", "port": 50051},
		{"target": "unix:///tmp/utcpd-test.sock"},
		{"host": "192.0.2.1", "port": 50051, "allow_insecure": true},
		{"host": "192.0.2.1", "port": 50051, "use_ssl": true},
	} {
		ct := with(ok)
		if _, err := tr.RegisterManual(t.Context(), ct); err != nil {
			t.Errorf("%v: %v", ok, err)
		}
		_ = tr.DeregisterManual(t.Context(), ct)
	}
	// The check runs at every call too: a tool template that points away.
	good := with(map[string]any{"host": "127.0.0.1", "port": closedPort(t)})
	register(t, tr, good)
	bad := with(map[string]any{"host": "192.0.2.1", "port": 50051})
	_, err := do(t, tr, bad, "Demo.add", map[string]any{"a": 1, "b": 2})
	wantCode(t, err, utcp.CodeInvalidTemplate)
}

// TestDiscoveryByReflection checks the tools the demo server's reflection
// yields: names, descriptions, tags and schemas, without the reflection
// and health services.
func TestDiscoveryByReflection(t *testing.T) {
	_, fields := serveFixture(t, fixture.New(), grpcserver.Options{})
	tr := newTransport(t, transports.Options{})
	m := register(t, tr, tmpl(t, fields))
	want := []string{"Demo.add", "Demo.chat", "Demo.count", "Demo.echo", "Demo.fail", "Demo.sleep", "Demo.sum"}
	if diff := cmp.Diff(want, toolNames(m)); diff != "" {
		t.Fatalf("tools (-want +got):\n%s", diff)
	}
	add := toolByName(t, m, "Demo.add")
	if add.Description != "Calls the unary gRPC method /utcpd.demo.v1.Demo/add." {
		t.Errorf("add description = %q", add.Description)
	}
	if !slices.Equal(add.Tags, []string{"grpc", "utcpd.demo.v1.Demo"}) {
		t.Errorf("add tags = %v", add.Tags)
	}
	schemas := map[string][2]string{
		"Demo.add":   {`{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}}}`, `{"type":"object","properties":{"sum":{"type":"number"}}}`},
		"Demo.echo":  {`{"type":"object"}`, `{"type":"object"}`},
		"Demo.sleep": {`{"type":"object","properties":{"ms":{"type":"integer","minimum":-2147483648,"maximum":2147483647}}}`, `{"type":"object","properties":{"slept_ms":{"type":"string","pattern":"^-?[0-9]+$"}}}`},
		"Demo.count": {`{"type":"object","properties":{"n":{"type":"integer","minimum":-2147483648,"maximum":2147483647},"delay_ms":{"type":"integer","minimum":-2147483648,"maximum":2147483647}}}`, `{"type":"array","items":{"type":"integer","minimum":-2147483648,"maximum":2147483647}}`},
		"Demo.sum":   {`{"type":"object","properties":{"messages":{"type":"array","description":"The request messages to stream, in order.","items":{"type":"object","properties":{"value":{"type":"number"}}}}},"required":["messages"]}`, `{"type":"object","properties":{"sum":{"type":"number"},"count":{"type":"integer","minimum":-2147483648,"maximum":2147483647}}}`},
	}
	for name, want := range schemas {
		tool := toolByName(t, m, name)
		for i, got := range []json.RawMessage{tool.Inputs, tool.Outputs} {
			if diff := cmp.Diff(norm(t, json.RawMessage(want[i])), norm(t, got)); diff != "" {
				t.Errorf("%s schema %d (-want +got):\n%s", name, i, diff)
			}
		}
	}
}

// TestDiscoveryWithProtoFiles: compiled .proto files carry comments, which
// become the descriptions.
func TestDiscoveryWithProtoFiles(t *testing.T) {
	tr := newTransport(t, transports.Options{})
	m := register(t, tr, tmpl(t, map[string]any{"host": "127.0.0.1", "port": closedPort(t),
		"proto_files": []string{filepath.Join(demoProtoRoot, "utcpd", "demo", "v1", "demo.proto")}, "import_paths": []string{demoProtoRoot}}))
	if got := toolByName(t, m, "Demo.add").Description; got != "Add returns the sum of two numbers a and b." {
		t.Errorf("add description = %q", got)
	}
	var schema struct {
		Properties map[string]struct {
			Description string `json:"description"`
		} `json:"properties"`
	}
	_ = json.Unmarshal(toolByName(t, m, "Demo.add").Inputs, &schema)
	if got := schema.Properties["a"].Description; got != "The first number." {
		t.Errorf("field a description = %q", got)
	}
	// A broken file is a discovery error naming the problem.
	_, err := tr.RegisterManual(t.Context(), tmpl(t, map[string]any{"name": "broken", "host": "127.0.0.1", "port": 1,
		"proto_files": []string{"nope.proto"}}))
	wantCode(t, err, utcp.CodeDiscoveryFailed)
	if !strings.Contains(err.Error(), "nope.proto") {
		t.Errorf("error %q does not name the file", err)
	}
}

func TestServiceAndMethodFilter(t *testing.T) {
	_, fields := serveFixture(t, fixture.New(), grpcserver.Options{})
	tr := newTransport(t, transports.Options{})
	only := map[string]any{"service_name": "utcpd.demo.v1.Demo", "method_name": "add"}
	for k, v := range fields {
		only[k] = v
	}
	ct := tmpl(t, only)
	m := register(t, tr, ct)
	if diff := cmp.Diff([]string{"Demo.add"}, toolNames(m)); diff != "" {
		t.Fatalf("tools (-want +got):\n%s", diff)
	}
	// service_name and method_name name the method, whatever the tool name.
	v, err := do(t, tr, ct, "anything", map[string]any{"a": 40, "b": 2})
	if err != nil || !cmp.Equal(v, map[string]any{"sum": 42.0}) {
		t.Errorf("add = %v, %v", v, err)
	}

	only["name"] = "svc"
	only["service_name"] = "utcpd.demo.v1.Nope"
	delete(only, "method_name")
	_, err = tr.RegisterManual(t.Context(), tmpl(t, only))
	wantCode(t, err, utcp.CodeDiscoveryFailed)

	only["service_name"] = "utcpd.demo.v1.Demo"
	only["method_name"] = "nope"
	_, err = tr.RegisterManual(t.Context(), tmpl(t, only))
	wantCode(t, err, utcp.CodeDiscoveryFailed)
	if !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("error %q does not name the method", err)
	}
}

func TestStreamingShapes(t *testing.T) {
	_, fields := serveFixture(t, fixture.New(), grpcserver.Options{})
	tr := newTransport(t, transports.Options{})
	ct := tmpl(t, fields)
	register(t, tr, ct)

	t.Run("server streaming collected", func(t *testing.T) {
		v, err := do(t, tr, ct, "Demo.count", map[string]any{"n": 3})
		if err != nil || !cmp.Equal(v, []any{1.0, 2.0, 3.0}) {
			t.Errorf("count = %v, %v", v, err)
		}
		v, err = do(t, tr, ct, "Demo.count", map[string]any{"n": 0})
		if err != nil || !cmp.Equal(v, []any{}) {
			t.Errorf("count(0) = %#v, %v", v, err)
		}
	})
	t.Run("client streaming", func(t *testing.T) {
		v, err := do(t, tr, ct, "Demo.sum", map[string]any{"messages": []any{map[string]any{"value": 1}, map[string]any{"value": 2.5}, map[string]any{}}})
		if err != nil || !cmp.Equal(v, map[string]any{"sum": 3.5, "count": 3.0}) {
			t.Errorf("sum = %v, %v", v, err)
		}
		v, err = do(t, tr, ct, "Demo.sum", map[string]any{"messages": []any{}})
		if err != nil || !cmp.Equal(v, map[string]any{"sum": 0.0, "count": 0.0}) {
			t.Errorf("sum of nothing = %v, %v (zero values are rendered)", v, err)
		}
		for _, bad := range []map[string]any{
			{},
			{"messages": "x"},
			{"messages": []any{}, "extra": 1},
			{"messages": []any{map[string]any{"value": "not a number"}}},
			{"messages": []any{map[string]any{"nope": 1}}},
		} {
			_, err := do(t, tr, ct, "Demo.sum", bad)
			wantCode(t, err, utcp.CodeInvalidArguments)
		}
	})
	t.Run("bidirectional collected", func(t *testing.T) {
		v, err := do(t, tr, ct, "Demo.chat", map[string]any{"messages": []any{map[string]any{"text": "hi"}, map[string]any{"text": "ho"}}})
		want := []any{map[string]any{"text": "hi", "seq": 1.0}, map[string]any{"text": "ho", "seq": 2.0}}
		if err != nil || !cmp.Equal(v, want) {
			t.Errorf("chat = %v, %v", v, err)
		}
	})
	t.Run("bidirectional streamed", func(t *testing.T) {
		var msgs []any
		for i := range 200 {
			msgs = append(msgs, map[string]any{"text": strings.Repeat("x", 1000) + fmt.Sprint(i)})
		}
		call := &utcp.Call{Manual: ct.Name, Name: "Demo.chat", Template: ct, Arguments: map[string]any{"messages": msgs}}
		s, err := tr.CallToolStream(t.Context(), call)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		n := 0
		for {
			ev, err := s.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("Recv: %v", err)
			}
			n++
			if got := norm(t, ev.Data).(map[string]any)["seq"]; got != float64(n) {
				t.Fatalf("event %d has seq %v", n, got)
			}
		}
		if n != 200 {
			t.Errorf("%d events, want 200", n)
		}
	})
	t.Run("unary streamed is one event", func(t *testing.T) {
		s, err := tr.CallToolStream(t.Context(), &utcp.Call{Manual: ct.Name, Name: "Demo.add", Template: ct, Arguments: map[string]any{"a": 1, "b": 2}})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		ev, err := s.Recv()
		if err != nil || !cmp.Equal(norm(t, ev.Data), map[string]any{"sum": 3.0}) {
			t.Fatalf("Recv = %v, %v", ev, err)
		}
		if _, err := s.Recv(); !errors.Is(err, io.EOF) {
			t.Errorf("second Recv = %v, want EOF", err)
		}
	})
}

func TestInvalidArguments(t *testing.T) {
	f := fixture.New()
	_, fields := serveFixture(t, f, grpcserver.Options{})
	tr := newTransport(t, transports.Options{})
	ct := tmpl(t, fields)
	register(t, tr, ct)
	for _, args := range []map[string]any{
		{"a": "x", "b": 1},
		{"a": 1, "zz_unknown": 1},
		{"a": map[string]any{}},
	} {
		_, err := do(t, tr, ct, "Demo.add", args)
		wantCode(t, err, utcp.CodeInvalidArguments)
		if !strings.Contains(err.Error(), "utcpd.demo.v1.AddRequest") {
			t.Errorf("error %q does not name the message type", err)
		}
	}
	if f.Calls() != 0 {
		t.Errorf("the server saw %d calls; bad arguments must fail before sending", f.Calls())
	}
	// Numbers as strings and missing fields are what protojson accepts.
	v, err := do(t, tr, ct, "Demo.add", map[string]any{"a": "1.5"})
	if err != nil || !cmp.Equal(v, map[string]any{"sum": 1.5}) {
		t.Errorf("add(\"1.5\") = %v, %v", v, err)
	}
	v, err = do(t, tr, ct, "Demo.sleep", map[string]any{"ms": 1})
	if err != nil || !cmp.Equal(v, map[string]any{"slept_ms": "1"}) {
		t.Errorf("sleep = %v, %v (int64 renders as a string)", v, err)
	}
}

// TestStatusMapping: each gRPC status code fail reports becomes the error
// the package documentation promises.
func TestStatusMapping(t *testing.T) {
	_, fields := serveFixture(t, fixture.New(), grpcserver.Options{})
	tr := newTransport(t, transports.Options{})
	ct := tmpl(t, fields)
	register(t, tr, ct)
	toolCodes := map[int]string{2: "UNKNOWN", 3: "INVALID_ARGUMENT", 5: "NOT_FOUND", 6: "ALREADY_EXISTS", 7: "PERMISSION_DENIED",
		8: "RESOURCE_EXHAUSTED", 9: "FAILED_PRECONDITION", 10: "ABORTED", 11: "OUT_OF_RANGE", 13: "INTERNAL", 15: "DATA_LOSS", 16: "UNAUTHENTICATED"}
	for code, name := range toolCodes {
		_, err := do(t, tr, ct, "Demo.fail", map[string]any{"message": "boom " + name, "code": code})
		var te *utcp.ToolError
		if !errors.As(err, &te) {
			t.Errorf("code %d: err = %v (%T), want *utcp.ToolError", code, err, err)
			continue
		}
		if te.Status != code || !strings.Contains(te.Message, name) || !strings.Contains(te.Message, "boom "+name) {
			t.Errorf("code %d: ToolError = %+v", code, te)
		}
		if v := te.Value.(map[string]any); v["code"] != name || v["message"] != "boom "+name {
			t.Errorf("code %d: value = %v", code, v)
		}
	}
	others := map[int]utcp.Code{1: utcp.CodeCanceled, 4: utcp.CodeTimeout, 12: utcp.CodeToolNotFound, 14: utcp.CodeTransportError}
	for code, want := range others {
		_, err := do(t, tr, ct, "Demo.fail", map[string]any{"message": "m", "code": code})
		if got := utcp.CodeOf(err); got != want {
			t.Errorf("code %d: CodeOf(%v) = %s, want %s", code, err, got, want)
		}
	}
}

// TestStatusDetails: the details of a status are rendered by protojson,
// resolved from the linked-in google.rpc types and from the manual's own
// descriptors.
func TestStatusDetails(t *testing.T) {
	_, fields := serveFixture(t, fixture.New(), grpcserver.Options{})
	tr := newTransport(t, transports.Options{})
	ct := tmpl(t, fields)
	register(t, tr, ct)
	_, err := do(t, tr, ct, "Demo.fail", map[string]any{"message": "boom"})
	var te *utcp.ToolError
	if !errors.As(err, &te) {
		t.Fatalf("err = %v, want *utcp.ToolError", err)
	}
	want := map[string]any{
		"code":    "FAILED_PRECONDITION",
		"message": "boom",
		"details": []any{
			map[string]any{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "FIXTURE_FAIL", "domain": "utcpd.demo.v1", "metadata": map[string]any{"tool": "fail"}},
			map[string]any{"@type": "type.googleapis.com/utcpd.demo.v1.FailDetail", "tool": "fail", "attempt": "1"},
		},
	}
	if diff := cmp.Diff(want, norm(t, te.Value)); diff != "" {
		t.Errorf("tool error value (-want +got):\n%s", diff)
	}
	if te.Status != 9 {
		t.Errorf("Status = %d, want 9", te.Status)
	}
}

// testService compiles testdata/protos/utcpd/test/v1/test.proto and serves
// its Test service (without missing) with hand-written handlers, without
// reflection. It returns the template fields that reach it.
func testService(t testing.TB, opts ...ggrpc.ServerOption) map[string]any {
	t.Helper()
	root := filepath.Join("testdata", "protos")
	c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{ImportPaths: []string{root}})}
	files, err := c.Compile(t.Context(), "utcpd/test/v1/test.proto")
	if err != nil {
		t.Fatal(err)
	}
	kinds := files[0].Messages().ByName("Kinds")
	gs := ggrpc.NewServer(opts...)
	gs.RegisterService(&ggrpc.ServiceDesc{
		ServiceName: "utcpd.test.v1.Test",
		HandlerType: (*any)(nil),
		Methods: []ggrpc.MethodDesc{
			{MethodName: "big", Handler: func(_ any, _ context.Context, dec func(any) error, _ ggrpc.UnaryServerInterceptor) (any, error) {
				in := &wrapperspb.Int32Value{}
				if err := dec(in); err != nil {
					return nil, err
				}
				return wrapperspb.String(strings.Repeat("x", int(in.GetValue()))), nil
			}},
			{MethodName: "kinds", Handler: echoHandler(kinds)},
			{MethodName: "plain", Handler: echoHandler(files[0].Messages().ByName("Plain"))},
		},
	}, struct{}{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = gs.Serve(ln) }()
	t.Cleanup(func() { gs.Stop(); <-done })
	f := grpcserver.Template(ln.Addr().String())
	delete(f, "call_template_type")
	f["proto_files"] = []string{"utcpd/test/v1/test.proto"}
	f["import_paths"] = []string{root}
	return f
}

// echoHandler is a unary handler that answers with its request, a
// dynamic message of type md.
func echoHandler(md protoreflect.MessageDescriptor) ggrpc.MethodHandler {
	return func(_ any, _ context.Context, dec func(any) error, _ ggrpc.UnaryServerInterceptor) (any, error) {
		in := dynamicpb.NewMessage(md)
		if err := dec(in); err != nil {
			return nil, err
		}
		return in, nil
	}
}

// TestMethodNotOnServer: a method the descriptors declare but the server
// does not implement, and one the manual does not have, are
// tool_not_found.
func TestMethodNotOnServer(t *testing.T) {
	tr := newTransport(t, transports.Options{})
	ct := tmpl(t, testService(t))
	m := register(t, tr, ct)
	if diff := cmp.Diff([]string{"Test.big", "Test.kinds", "Test.missing", "Test.plain"}, toolNames(m)); diff != "" {
		t.Fatalf("tools (-want +got):\n%s", diff)
	}
	_, err := do(t, tr, ct, "Test.missing", nil)
	if !errors.Is(err, transports.ErrToolNotFound) {
		t.Errorf("missing: err = %v, want tool_not_found", err)
	}
	_, err = do(t, tr, ct, "Test.nothing", nil)
	if !errors.Is(err, transports.ErrToolNotFound) {
		t.Errorf("nothing: err = %v, want tool_not_found", err)
	}
	// A tool template naming a method the manual's descriptors lack.
	fields := testService(t)
	fields["service_name"] = "utcpd.test.v1.Test"
	fields["method_name"] = "vanished"
	_, err = do(t, tr, tmpl(t, fields), "whatever", nil)
	if !errors.Is(err, transports.ErrToolNotFound) {
		t.Errorf("vanished: err = %v, want tool_not_found", err)
	}
}

// TestMessageSizeCap: max_message_size caps received and sent messages.
func TestMessageSizeCap(t *testing.T) {
	tr := newTransport(t, transports.Options{})
	fields := testService(t)
	fields["max_message_size"] = 4096
	ct := tmpl(t, fields)
	register(t, tr, ct)
	v, err := do(t, tr, ct, "Test.big", map[string]any{"value": 100})
	if err != nil || v != strings.Repeat("x", 100) {
		t.Fatalf("big(100) = %v, %v", v, err)
	}
	_, err = do(t, tr, ct, "Test.big", map[string]any{"value": 10000})
	if !errors.Is(err, transports.ErrTooLarge) {
		t.Errorf("receiving 10000 bytes: err = %v, want payload_too_large", err)
	}
	_, err = do(t, tr, ct, "Test.kinds", map[string]any{"s": strings.Repeat("y", 10000)})
	if !errors.Is(err, transports.ErrTooLarge) {
		t.Errorf("sending 10000 bytes: err = %v, want payload_too_large", err)
	}
	// The transport is fine afterwards.
	if _, err := do(t, tr, ct, "Test.big", map[string]any{"value": 1}); err != nil {
		t.Errorf("after the cap: %v", err)
	}
}

// validate checks instance against a tool schema.
func validate(t testing.TB, schema json.RawMessage, instance any) {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("schema.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("schema.json")
	if err != nil {
		t.Fatalf("schema does not compile: %v\n%s", err, schema)
	}
	b, _ := json.Marshal(instance)
	inst, _ := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err := sch.Validate(inst); err != nil {
		t.Errorf("%s\ndoes not validate against\n%s:\n%v", b, schema, err)
	}
}

// TestKinds round-trips a message with every kind of field and checks the
// arguments and the result against the tool's schemas.
func TestKinds(t *testing.T) {
	tr := newTransport(t, transports.Options{})
	ct := tmpl(t, testService(t))
	m := register(t, tr, ct)
	tool := toolByName(t, m, "Test.kinds")
	args := map[string]any{
		"i32": -5, "i64": "9007199254740993", "u32": 7, "u64": 18446744073709551615.0, "s64": -3, "f64": "12",
		"f": 1.5, "d": -2.25, "b": true, "s": "héllo", "raw": base64.StdEncoding.EncodeToString([]byte{0, 1, 2}),
		"color": "GREEN", "tags": []any{"a", "b"}, "counts": map[string]any{"x": 1, "y": "2"},
		"child":    map[string]any{"s": "inner", "child": map[string]any{"i32": 1}},
		"at":       "2026-11-30T12:00:00Z",
		"took":     "1.5s",
		"meta":     map[string]any{"k": []any{1, "two", nil}},
		"any":      map[string]any{"@type": "type.googleapis.com/utcpd.test.v1.Kinds", "s": "packed"},
		"maybe":    "42",
		"mask":     "i32,childField",
		"children": []any{map[string]any{"b": true}},
		"value":    []any{1, "x"},
		"name":     "chosen",
	}
	args["u64"] = "18446744073709551615"
	validate(t, tool.Inputs, args)
	v, err := do(t, tr, ct, "Test.kinds", args)
	if err != nil {
		t.Fatalf("kinds: %v", err)
	}
	got := v.(map[string]any)
	for k, want := range map[string]any{
		"i32": -5.0, "i64": "9007199254740993", "u64": "18446744073709551615", "f64": "12", "color": "GREEN",
		"raw": "AAEC", "at": "2026-11-30T12:00:00Z", "took": "1.500s", "maybe": "42", "name": "chosen",
		"counts": map[string]any{"x": "1", "y": "2"},
		"any":    map[string]any{"@type": "type.googleapis.com/utcpd.test.v1.Kinds", "s": "packed"},
	} {
		if k == "any" {
			// Default values are rendered inside the Any too.
			a := got[k].(map[string]any)
			if a["@type"] != want.(map[string]any)["@type"] || a["s"] != "packed" {
				t.Errorf("any = %v", a)
			}
			continue
		}
		if !cmp.Equal(got[k], want) {
			t.Errorf("%s = %#v, want %#v", k, got[k], want)
		}
	}
	if _, ok := got["number"]; ok {
		t.Errorf("the unset member of the oneof is rendered: %v", got["number"])
	}
	validate(t, tool.Outputs, v)

	// Schema details.
	var in struct {
		Properties map[string]map[string]any `json:"properties"`
	}
	_ = json.Unmarshal(tool.Inputs, &in)
	p := in.Properties
	for k, want := range map[string]any{
		"i64":    map[string]any{"type": []any{"integer", "string"}, "pattern": "^-?[0-9]+$", "description": "A 64-bit integer: a string in JSON."},
		"color":  map[string]any{"type": "string", "enum": []any{"COLOR_UNSPECIFIED", "RED", "GREEN"}},
		"tags":   map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
		"counts": map[string]any{"type": "object", "additionalProperties": map[string]any{"type": []any{"integer", "string"}, "pattern": "^-?[0-9]+$"}},
		"raw":    map[string]any{"type": "string", "contentEncoding": "base64"},
		"at":     map[string]any{"type": "string", "format": "date-time"},
		"meta":   map[string]any{"type": "object"},
		"maybe":  map[string]any{"type": []any{"integer", "string"}, "pattern": "^-?[0-9]+$"},
	} {
		if diff := cmp.Diff(want, norm(t, p[k])); diff != "" {
			t.Errorf("inputs.%s (-want +got):\n%s", k, diff)
		}
	}
	child := norm(t, p["child"]).(map[string]any)
	if child["type"] != "object" || !strings.Contains(fmt.Sprint(child["description"]), "recursive") {
		t.Errorf("inputs.child = %v, want a recursion stub", child)
	}
}

// TestServerDown: a call to a server that is not there is a
// transport_error; discovery by reflection is discovery_failed.
func TestServerDown(t *testing.T) {
	tr := newTransport(t, transports.Options{})
	port := closedPort(t)
	ct := tmpl(t, map[string]any{"host": "127.0.0.1", "port": port, "proto_files": []string{"utcpd/demo/v1/demo.proto"}, "import_paths": []string{demoProtoRoot}})
	register(t, tr, ct)
	_, err := do(t, tr, ct, "Demo.add", map[string]any{"a": 1, "b": 2})
	wantCode(t, err, utcp.CodeTransportError)
	_, err = tr.RegisterManual(t.Context(), tmpl(t, map[string]any{"name": "refl", "host": "127.0.0.1", "port": port}))
	wantCode(t, err, utcp.CodeDiscoveryFailed)
}

// TestReflectionDisabled: without reflection and without descriptors,
// discovery fails and says what to do.
func TestReflectionDisabled(t *testing.T) {
	_, fields := serveFixture(t, fixture.New(), grpcserver.Options{NoReflection: true})
	tr := newTransport(t, transports.Options{})
	_, err := tr.RegisterManual(t.Context(), tmpl(t, fields))
	wantCode(t, err, utcp.CodeDiscoveryFailed)
	for _, want := range []string{"server reflection", "descriptor_set", "proto_files"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

// TestReflectionV1AlphaOnly: a server that offers only the older
// grpc.reflection.v1alpha is discovered too.
func TestReflectionV1AlphaOnly(t *testing.T) {
	gs := ggrpc.NewServer()
	demov1.RegisterDemoServer(gs, grpcserver.NewService(fixture.New()))
	rpbalpha.RegisterServerReflectionServer(gs, reflection.NewServer(reflection.ServerOptions{Services: gs}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = gs.Serve(ln) }()
	t.Cleanup(func() { gs.Stop(); <-done })
	tr := newTransport(t, transports.Options{})
	fields := grpcserver.Template(ln.Addr().String())
	delete(fields, "call_template_type")
	ct := tmpl(t, fields)
	if m := register(t, tr, ct); len(m.Tools) != 7 {
		t.Errorf("tools = %v", toolNames(m))
	}
	if v, err := do(t, tr, ct, "Demo.add", map[string]any{"a": 1, "b": 2}); err != nil || !cmp.Equal(v, map[string]any{"sum": 3.0}) {
		t.Errorf("add = %v, %v", v, err)
	}
}

// writeDescriptorSet writes the demo service's descriptors, with their
// imports when includeImports (as protoc --include_imports would).
func writeDescriptorSet(t testing.TB, includeImports bool) string {
	t.Helper()
	var set descriptorpb.FileDescriptorSet
	seen := map[string]bool{}
	var add func(fd protoreflect.FileDescriptor)
	add = func(fd protoreflect.FileDescriptor) {
		if seen[fd.Path()] {
			return
		}
		seen[fd.Path()] = true
		for i := range fd.Imports().Len() {
			if includeImports {
				add(fd.Imports().Get(i).FileDescriptor)
			}
		}
		set.File = append(set.File, protodesc.ToFileDescriptorProto(fd))
	}
	add(demov1.File_utcpd_demo_v1_demo_proto)
	b, err := proto.Marshal(&set)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "demo.pb")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestDescriptorSet(t *testing.T) {
	_, fields := serveFixture(t, fixture.New(), grpcserver.Options{NoReflection: true})
	tr := newTransport(t, transports.Options{})
	// Without its imports, the google/protobuf files come from the
	// descriptors linked into utcpd.
	for i, includeImports := range []bool{true, false} {
		fields["name"] = fmt.Sprintf("set%d", i)
		fields["descriptor_set"] = writeDescriptorSet(t, includeImports)
		ct := tmpl(t, fields)
		m := register(t, tr, ct)
		if len(m.Tools) != 7 {
			t.Errorf("tools = %v", toolNames(m))
		}
		v, err := do(t, tr, ct, "Demo.add", map[string]any{"a": 1, "b": 2})
		if err != nil || !cmp.Equal(v, map[string]any{"sum": 3.0}) {
			t.Errorf("add = %v, %v", v, err)
		}
		v, err = do(t, tr, ct, "Demo.echo", map[string]any{"k": []any{1.0, "x"}})
		if err != nil || !cmp.Equal(v, map[string]any{"k": []any{1.0, "x"}}) {
			t.Errorf("echo = %v, %v", v, err)
		}
	}
	bad := filepath.Join(t.TempDir(), "bad.pb")
	_ = os.WriteFile(bad, []byte("not a descriptor set"), 0o600)
	fields["descriptor_set"] = bad
	fields["name"] = "bad"
	_, err := tr.RegisterManual(t.Context(), tmpl(t, fields))
	wantCode(t, err, utcp.CodeDiscoveryFailed)
}

// mdRecorder records the metadata of the calls a server receives.
type mdRecorder struct {
	mu  sync.Mutex
	got map[string]metadata.MD // by full method
}

func (r *mdRecorder) record(ctx context.Context, method string) {
	md, _ := metadata.FromIncomingContext(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got[method] = md
}

func (r *mdRecorder) get(method string) metadata.MD {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.got[method]
}

func (r *mdRecorder) options() []ggrpc.ServerOption {
	return []ggrpc.ServerOption{
		ggrpc.UnaryInterceptor(func(ctx context.Context, req any, info *ggrpc.UnaryServerInfo, h ggrpc.UnaryHandler) (any, error) {
			r.record(ctx, info.FullMethod)
			return h(ctx, req)
		}),
		ggrpc.StreamInterceptor(func(srv any, ss ggrpc.ServerStream, info *ggrpc.StreamServerInfo, h ggrpc.StreamHandler) error {
			r.record(ss.Context(), info.FullMethod)
			return h(srv, ss)
		}),
	}
}

// TestMetadataAndAuth: template metadata and each auth type reach the
// server as metadata, on reflection and on calls.
func TestMetadataAndAuth(t *testing.T) {
	rec := &mdRecorder{got: map[string]metadata.MD{}}
	_, fields := serveFixture(t, fixture.New(), grpcserver.Options{ServerOptions: rec.options()})
	fields["metadata"] = map[string]string{"X-Tenant": "acme", "trace-bin": base64.StdEncoding.EncodeToString([]byte{0, 1, 2})}

	var tokenCalls atomic.Int32
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tokenCalls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"access_token":"tok-123","token_type":"bearer","expires_in":3600}`)
	}))
	t.Cleanup(tokens.Close)

	cases := []struct {
		name string
		auth map[string]any
		key  string
		want string
	}{
		{"api_key", map[string]any{"auth_type": "api_key", "api_key": "k-1", "var_name": "X-Api-Key"}, "x-api-key", "k-1"},
		{"api_key default name", map[string]any{"auth_type": "api_key", "api_key": "k-2"}, "x-api-key", "k-2"},
		{"basic", map[string]any{"auth_type": "basic", "username": "u", "password": "p"}, "authorization", "Basic " + base64.StdEncoding.EncodeToString([]byte("u:p"))},
		{"oauth2", map[string]any{"auth_type": "oauth2", "token_url": tokens.URL, "client_id": "c", "client_secret": "s"}, "authorization", "Bearer tok-123"},
		{"oauth2_user", map[string]any{"auth_type": "oauth2_user", "access_token": "at"}, "authorization", "Bearer at"},
	}
	tr := newTransport(t, transports.Options{})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := map[string]any{"name": "auth", "auth": c.auth}
			for k, v := range fields {
				f[k] = v
			}
			ct := tmpl(t, f)
			register(t, tr, ct)
			defer func() { _ = tr.DeregisterManual(t.Context(), ct) }()
			if _, err := do(t, tr, ct, "Demo.add", map[string]any{"a": 1, "b": 1}); err != nil {
				t.Fatal(err)
			}
			for _, method := range []string{"/utcpd.demo.v1.Demo/add", "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"} {
				md := rec.get(method)
				if got := md.Get(c.key); !slices.Equal(got, []string{c.want}) {
					t.Errorf("%s: %s = %v, want %q", method, c.key, got, c.want)
				}
				if got := md.Get("x-tenant"); !slices.Equal(got, []string{"acme"}) {
					t.Errorf("%s: x-tenant = %v", method, got)
				}
				if got := md.Get("trace-bin"); !slices.Equal(got, []string{"\x00\x01\x02"}) {
					t.Errorf("%s: trace-bin = %q", method, got)
				}
			}
		})
	}
	if n := tokenCalls.Load(); n != 1 {
		t.Errorf("the token endpoint was asked %d times, want 1 (cached)", n)
	}
}

// selfSigned returns a TLS certificate for 127.0.0.1 and localhost and its
// PEM file.
func selfSigned(t testing.TB) (tls.Certificate, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "utcpd test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, path
}

func TestTLS(t *testing.T) {
	cert, ca := selfSigned(t)
	creds := credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	_, fields := serveFixture(t, fixture.New(), grpcserver.Options{ServerOptions: []ggrpc.ServerOption{ggrpc.Creds(creds)}})
	tr := newTransport(t, transports.Options{})
	with := func(name string, extra map[string]any) *utcp.CallTemplate {
		f := map[string]any{"name": name}
		for k, v := range fields {
			f[k] = v
		}
		for k, v := range extra {
			f[k] = v
		}
		return tmpl(t, f)
	}
	ct := with("tls", map[string]any{"use_ssl": true, "ca_file": ca})
	register(t, tr, ct)
	if v, err := do(t, tr, ct, "Demo.add", map[string]any{"a": 1, "b": 2}); err != nil || !cmp.Equal(v, map[string]any{"sum": 3.0}) {
		t.Errorf("add over TLS = %v, %v", v, err)
	}
	sni := with("sni", map[string]any{"use_ssl": true, "ca_file": ca, "server_name": "localhost"})
	register(t, tr, sni)
	// An unknown authority fails; skipping verification (dangerous) works.
	_, err := tr.RegisterManual(t.Context(), with("untrusted", map[string]any{"use_ssl": true}))
	wantCode(t, err, utcp.CodeDiscoveryFailed)
	register(t, tr, with("skip", map[string]any{"use_ssl": true, "insecure_skip_verify": true}))
	// Plaintext to a TLS server fails as a transport problem.
	_, err = tr.RegisterManual(t.Context(), with("plain", nil))
	wantCode(t, err, utcp.CodeDiscoveryFailed)
	_, err = tr.RegisterManual(t.Context(), with("badca", map[string]any{"use_ssl": true, "ca_file": filepath.Join(t.TempDir(), "none.pem")}))
	wantCode(t, err, utcp.CodeInvalidTemplate)
}

// TestUnixSocket: a unix: target reaches a server on a unix socket,
// without allow_insecure (the socket is local).
func TestUnixSocket(t *testing.T) {
	dir, err := os.MkdirTemp("", "utcpd-grpc") // short: socket paths are limited to about 100 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	path := filepath.Join(dir, "demo.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	s := grpcserver.New(fixture.New(), grpcserver.Options{})
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Serve(ln) }()
	t.Cleanup(func() { s.Stop(); <-done })
	tr := newTransport(t, transports.Options{})
	ct := tmpl(t, map[string]any{"target": "unix://" + path})
	register(t, tr, ct)
	if v, err := do(t, tr, ct, "Demo.add", map[string]any{"a": 1, "b": 2}); err != nil || !cmp.Equal(v, map[string]any{"sum": 3.0}) {
		t.Errorf("add over a unix socket = %v, %v", v, err)
	}
}

// TestRegistrationsAreCounted: a manual registered twice keeps working
// until deregistered twice.
func TestRegistrationsAreCounted(t *testing.T) {
	_, fields := serveFixture(t, fixture.New(), grpcserver.Options{})
	tr := newTransport(t, transports.Options{})
	ct := tmpl(t, fields)
	register(t, tr, ct)
	register(t, tr, ct)
	if err := tr.DeregisterManual(t.Context(), ct); err != nil {
		t.Fatal(err)
	}
	if _, err := do(t, tr, ct, "Demo.add", map[string]any{"a": 1, "b": 1}); err != nil {
		t.Fatalf("after one of two deregistrations: %v", err)
	}
	_ = tr.DeregisterManual(t.Context(), ct)
	_, err := do(t, tr, ct, "Demo.add", map[string]any{"a": 1, "b": 1})
	wantCode(t, err, utcp.CodeManualNotFound)
}

// TestCloseEndsCallsInFlight: Close fails a running call with unavailable
// at once.
func TestCloseEndsCallsInFlight(t *testing.T) {
	f := fixture.New()
	_, fields := serveFixture(t, f, grpcserver.Options{})
	tr := newTransport(t, transports.Options{})
	ct := tmpl(t, fields)
	register(t, tr, ct)
	errc := make(chan error, 1)
	go func() {
		_, err := do(t, tr, ct, "Demo.sleep", map[string]any{"ms": 10000})
		errc <- err
	}()
	for f.InFlight() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	_ = tr.Close()
	select {
	case err := <-errc:
		wantCode(t, err, utcp.CodeUnavailable)
	case <-time.After(5 * time.Second):
		t.Fatal("the call did not end after Close")
	}
}

// TestDeregisterEndsCallsInFlight: a call whose manual goes away fails
// with manual_not_found.
func TestDeregisterEndsCallsInFlight(t *testing.T) {
	f := fixture.New()
	_, fields := serveFixture(t, f, grpcserver.Options{})
	tr := newTransport(t, transports.Options{})
	ct := tmpl(t, fields)
	register(t, tr, ct)
	errc := make(chan error, 1)
	go func() {
		_, err := do(t, tr, ct, "Demo.sleep", map[string]any{"ms": 10000})
		errc <- err
	}()
	for f.InFlight() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	_ = tr.DeregisterManual(t.Context(), ct)
	select {
	case err := <-errc:
		wantCode(t, err, utcp.CodeManualNotFound)
	case <-time.After(5 * time.Second):
		t.Fatal("the call did not end after DeregisterManual")
	}
}

// TestTimeout: the template's timeout ends a call with timeout.
func TestTimeout(t *testing.T) {
	f := fixture.New()
	_, fields := serveFixture(t, f, grpcserver.Options{})
	fields["timeout"] = 100
	tr := newTransport(t, transports.Options{})
	ct := tmpl(t, fields)
	register(t, tr, ct)
	_, err := do(t, tr, ct, "Demo.sleep", map[string]any{"ms": 10000})
	wantCode(t, err, utcp.CodeTimeout)
	if !strings.Contains(err.Error(), "timeout") {
		t.Errorf("error %q does not say timeout", err)
	}
}

// TestNodePeer runs the transport against a server built on @grpc/grpc-js
// with @grpc/reflection (testdata/peer-server.mjs), a third-party
// implementation: discovery by reflection, a unary call, a server stream
// and a status error. It needs node and `npm ci` in testdata/peer; set
// UTCPD_NPM_PEERS=1 to run it (CI does), and it fails when that is set
// and the peer is missing.
func TestNodePeer(t *testing.T) {
	peer := transporttest.NPMPeer(t, "@grpc/grpc-js", "@grpc/proto-loader", "@grpc/reflection")
	var hello struct {
		Port    int    `json:"port"`
		Version string `json:"grpc_js_version"`
	}
	peer.Start(t, filepath.Join("testdata", "peer-server.mjs"), &hello)
	t.Logf("@grpc/grpc-js %s serving on 127.0.0.1:%d", hello.Version, hello.Port)

	tr := newTransport(t, transports.Options{})
	ct := tmpl(t, map[string]any{"name": "peer", "host": "127.0.0.1", "port": hello.Port})
	m := register(t, tr, ct)
	if diff := cmp.Diff([]string{"Calculator.Add", "Calculator.Count", "Calculator.Echo"}, toolNames(m)); diff != "" {
		t.Fatalf("tools (-want +got):\n%s", diff)
	}
	v, err := do(t, tr, ct, "Calculator.Add", map[string]any{"a": "9007199254740993", "b": 1})
	if err != nil || !cmp.Equal(v, map[string]any{"sum": "9007199254740994"}) {
		t.Errorf("Add = %v, %v", v, err)
	}
	s, err := tr.CallToolStream(t.Context(), &utcp.Call{Manual: "peer", Name: "Calculator.Count", Template: ct, Arguments: map[string]any{"n": 3}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var events []any
	for {
		ev, err := s.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("Recv: %v", err)
		}
		events = append(events, norm(t, ev.Data))
	}
	want := []any{map[string]any{"i": 1.0, "label": "#1"}, map[string]any{"i": 2.0, "label": "#2"}, map[string]any{"i": 3.0, "label": "#3"}}
	if diff := cmp.Diff(want, events); diff != "" {
		t.Errorf("Count events (-want +got):\n%s", diff)
	}
	_, err = do(t, tr, ct, "Calculator.Echo", map[string]any{"msg": "fail"})
	var te *utcp.ToolError
	if !errors.As(err, &te) || te.Status != 3 || !strings.Contains(te.Message, "msg must not be fail") {
		t.Errorf("Echo(fail): err = %v, want INVALID_ARGUMENT tool error", err)
	}
}

// BenchmarkCalls compares add through the transport with a generated
// grpc-go client calling the same demo server, at concurrency 32. Besides
// calls/s it reports cpu-µs/call, the process's CPU time (client and
// server together) per call, which a busy machine disturbs less than the
// wall clock.
func BenchmarkCalls(b *testing.B) {
	_, fields := serveFixture(b, fixture.New(), grpcserver.Options{})
	const concurrency = 32
	parallelism := func(b *testing.B) {
		b.SetParallelism(max(1, concurrency/max(1, runtime.GOMAXPROCS(0))))
	}
	b.Run("transport", func(b *testing.B) {
		tr := newTransport(b, transports.Options{})
		ct := tmpl(b, fields)
		register(b, tr, ct)
		parallelism(b)
		start, cpu := time.Now(), cpuTime()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				res, err := tr.CallTool(b.Context(), &utcp.Call{Tool: "demo.Demo.add", Manual: "demo", Name: "Demo.add", Template: ct, Arguments: map[string]any{"a": 1, "b": 2}})
				if err != nil || res == nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "calls/s")
		b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/float64(b.N), "cpu-µs/call")
	})
	b.Run("direct", func(b *testing.B) {
		conn, err := ggrpc.NewClient(fmt.Sprintf("%s:%d", fields["host"], fields["port"]), ggrpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close()
		client := demov1.NewDemoClient(conn)
		parallelism(b)
		start, cpu := time.Now(), cpuTime()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				res, err := client.Add(b.Context(), &demov1.AddRequest{A: 1, B: 2})
				if err != nil || res.GetSum() != 3 {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "calls/s")
		b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/float64(b.N), "cpu-µs/call")
	})
}
