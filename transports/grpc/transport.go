package grpc

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	_ "google.golang.org/genproto/googleapis/rpc/errdetails" // google.rpc.* status details resolve by type URL
	ggrpc "google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/utcpd/utcpd/internal/jsonx"
	"github.com/utcpd/utcpd/internal/netguard"
	"github.com/utcpd/utcpd/internal/tracing"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/transports/oauth2"
	"github.com/utcpd/utcpd/utcp"
)

// Info describes the grpc transport to a transports.Registry.
var Info = transports.Info{
	Type:          Type,
	ParseTemplate: ParseTemplate,
	New:           transports.Constructor(New),
	Template:      new(Template),
}

func init() { transports.MustRegister(Info) }

// Interface guards.
var (
	_ transports.Transport = (*Transport)(nil)
	_ transports.Streamer  = (*Transport)(nil)
)

// MessagesArgument is the argument that carries the request messages of a
// client-streaming or bidirectional method: {"messages": [{...}, ...]}.
const MessagesArgument = "messages"

// ValueArgument is the argument that carries the request of a method whose
// request message is a well-known type that protojson does not write as a
// JSON object (a wrapper such as google.protobuf.Int32Value, Timestamp,
// Duration, FieldMask, Value, ListValue): {"value": <its JSON form>}.
const ValueArgument = "value"

// Config is the grpc section of the daemon configuration
// (transports.Options.Config). Every field is optional.
type Config struct {
	// MaxResponseBytes caps what CallTool collects from a streaming
	// method (the JSON of every response message together); 0 means
	// transports.DefaultMaxResponseBytes (64 MiB).
	MaxResponseBytes int64 `json:"max_response_bytes,omitempty"`
}

// Transport is the grpc transport. It is safe for concurrent use. It
// keeps one *grpc.ClientConn per manual and connection settings, reused
// by every call of the manual, and the manual's method descriptors.
type Transport struct {
	log         *slog.Logger
	tokens      transports.TokenSource
	maxResponse int64

	mu      sync.RWMutex
	closed  bool
	manuals map[string]*manualState
}

// manualState is what one registered manual holds.
type manualState struct {
	tools *toolSet
	conns map[string]*ggrpc.ClientConn // by Template.connKey
}

// toolSet is the methods of one manual and how to read and write their
// messages.
type toolSet struct {
	byName    map[string]*method // by tool name
	byPath    map[string]*method // by "/pkg.Service/Method"
	marshal   protojson.MarshalOptions
	unmarshal protojson.UnmarshalOptions
}

// method is one gRPC method: its descriptor and message types, built once
// at registration.
type method struct {
	tool string
	path string // "/pkg.Service/Method"
	desc protoreflect.MethodDescriptor
	in   protoreflect.MessageType
	out  protoreflect.MessageType
	sd   *ggrpc.StreamDesc
	// fastIn and fastOut: the request and response messages take the
	// fast paths of convert.go.
	fastIn, fastOut bool
	// scalarIn: the request is a well-known type passed as {"value": ...}.
	scalarIn bool
}

func (m *method) kind() string {
	switch {
	case m.sd.ClientStreams && m.sd.ServerStreams:
		return "bidirectional streaming"
	case m.sd.ClientStreams:
		return "client streaming"
	case m.sd.ServerStreams:
		return "server streaming"
	}
	return "unary"
}

// New returns a grpc Transport configured by opts.Config (a Config).
// Unknown configuration fields are logged and ignored.
func New(opts transports.Options) (*Transport, error) {
	var cfg Config
	log, err := transports.DecodeConfig(opts, "grpc", &cfg)
	if err != nil {
		return nil, utcp.Errorf(utcp.CodeInvalidConfig, "grpc: config: %w", err)
	}
	tokens := opts.Tokens
	if tokens == nil {
		tokens = oauth2.NewTokenCache(nil)
	}
	t := &Transport{log: log, tokens: tokens, maxResponse: cfg.MaxResponseBytes, manuals: map[string]*manualState{}}
	if t.maxResponse <= 0 {
		t.maxResponse = transports.DefaultMaxResponseBytes
	}
	return t, nil
}

var errClosed = utcp.NewError(utcp.CodeUnavailable, "grpc: transport closed")

// RegisterManual loads the descriptors of the template's services (from
// descriptor_set, proto_files, or server reflection) and returns one tool
// per method. A failure is discovery_failed naming the source.
func (t *Transport) RegisterManual(ctx context.Context, tmpl *utcp.CallTemplate) (*utcp.Manual, error) {
	spec, auth, err := transports.SpecOf[Template](tmpl, Type, ParseTemplate)
	if err != nil {
		return nil, err
	}
	if err := checkTarget(spec); err != nil {
		return nil, err
	}
	if t.isClosed() {
		return nil, errClosed
	}
	src, err := t.discover(ctx, spec, auth)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var ue *utcp.Error
		if errors.As(err, &ue) && ue.Code != utcp.CodeTransportError && ue.Code != utcp.CodeTimeout {
			return nil, err
		}
		return nil, utcp.Errorf(utcp.CodeDiscoveryFailed, "grpc discovery of manual %q from %s: %w", tmpl.Name, spec.target(), err)
	}
	ts, m, err := buildTools(src, spec)
	if err != nil {
		return nil, utcp.Errorf(utcp.CodeDiscoveryFailed, "grpc discovery of manual %q from %s (%s): %w", tmpl.Name, spec.target(), src.origin, err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, errClosed
	}
	st := t.manuals[tmpl.Name]
	if st == nil {
		st = &manualState{conns: map[string]*ggrpc.ClientConn{}}
		t.manuals[tmpl.Name] = st
	}
	st.tools = ts
	return m, nil
}

// CallTool invokes one method and waits for its whole result: the
// response message of a unary or client-streaming method, the list of
// response messages of a server-streaming or bidirectional one. A status
// the tool reports is a *utcp.ToolError; see the package documentation
// for the other errors.
func (t *Transport) CallTool(ctx context.Context, call *utcp.Call) (*utcp.Result, error) {
	x, err := t.start(ctx, call)
	if err != nil {
		return nil, err
	}
	return x.run()
}

// CallToolStream starts one call. A server-streaming or bidirectional
// method yields each response message as an event; a unary or
// client-streaming one yields its single response. Close before the end
// cancels the call, which the server sees as its context ending.
func (t *Transport) CallToolStream(ctx context.Context, call *utcp.Call) (transports.Stream, error) {
	x, err := t.start(ctx, call)
	if err != nil {
		return nil, err
	}
	if !x.m.sd.ServerStreams {
		res, err := x.run()
		if err != nil {
			return nil, err
		}
		return transports.SingleEvent(&utcp.Event{Data: res.Value}), nil
	}
	return x.open()
}

// Release closes the manual's connections and forgets its descriptors
// (transports.Count calls it when the manual's last registration ends);
// calls of the manual then fail with manual_not_found until it is
// registered again.
func (t *Transport) Release(_ context.Context, tmpl *utcp.CallTemplate) error {
	if tmpl == nil {
		return nil
	}
	t.mu.Lock()
	st := t.manuals[tmpl.Name]
	if st == nil {
		t.mu.Unlock()
		return nil
	}
	delete(t.manuals, tmpl.Name)
	t.mu.Unlock()
	for _, c := range st.conns {
		_ = c.Close()
	}
	return nil
}

// Close closes every connection; calls in flight fail with unavailable.
// It is idempotent.
func (t *Transport) Close() error {
	t.mu.Lock()
	t.closed = true
	var conns []*ggrpc.ClientConn
	for _, st := range t.manuals {
		for _, c := range st.conns {
			conns = append(conns, c)
		}
	}
	clear(t.manuals)
	t.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
	return nil
}

// registered reports whether the manual is registered.
func (t *Transport) registered(manual string) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.manuals[manual] != nil
}

func (t *Transport) isClosed() bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.closed
}

// discover loads the descriptors the template points at.
func (t *Transport) discover(ctx context.Context, spec *Template, auth *utcp.Auth) (*source, error) {
	switch {
	case spec.DescriptorSet != "":
		return loadDescriptorSet(spec.DescriptorSet)
	case len(spec.ProtoFiles) > 0:
		return compileProtos(ctx, spec.ProtoFiles, spec.ImportPaths)
	}
	conn, err := dial(spec, ggrpc.WithDefaultCallOptions(ggrpc.MaxCallRecvMsgSize(spec.maxMessage())))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, spec.timeout())
	defer cancel()
	cctx, err := t.outgoing(ctx, spec, auth)
	if err != nil {
		return nil, err
	}
	src, err := reflect(cctx, conn, spec.ServiceName)
	if err != nil {
		if errors.Is(err, errNoReflection) {
			return nil, fmt.Errorf("%w; give the template descriptor_set or proto_files instead", err)
		}
		if st, ok := status.FromError(err); ok {
			switch st.Code() {
			case codes.Unavailable:
				return nil, &utcp.TransportError{Err: fmt.Errorf("server reflection: %s", st.Message())}
			case codes.DeadlineExceeded:
				return nil, utcp.Errorf(utcp.CodeTimeout, "server reflection: no answer within %v", spec.timeout())
			}
			return nil, fmt.Errorf("server reflection: %s: %s", codeName(st.Code()), st.Message())
		}
		return nil, fmt.Errorf("server reflection: %w", err)
	}
	return src, nil
}

// buildTools turns the services of src into tools and the method table,
// restricted by the template's service_name and method_name.
func buildTools(src *source, spec *Template) (*toolSet, *utcp.Manual, error) {
	services := src.services
	if spec.ServiceName != "" {
		var names []string
		var found protoreflect.ServiceDescriptor
		for _, sd := range services {
			names = append(names, string(sd.FullName()))
			if string(sd.FullName()) == spec.ServiceName {
				found = sd
			}
		}
		if found == nil {
			return nil, nil, fmt.Errorf("service %q not found (services: %s)", spec.ServiceName, strings.Join(names, ", "))
		}
		services = []protoreflect.ServiceDescriptor{found}
	}
	if len(services) == 0 {
		return nil, nil, errors.New("no services to call (reflection and health services are not tools)")
	}
	simple := map[string]int{}
	for _, sd := range services {
		simple[string(sd.Name())]++
	}
	res := &resolver{local: dynamicpb.NewTypes(src.files)}
	ts := &toolSet{
		byName:    map[string]*method{},
		byPath:    map[string]*method{},
		marshal:   protojson.MarshalOptions{UseProtoNames: true, EmitDefaultValues: true, Resolver: res},
		unmarshal: protojson.UnmarshalOptions{Resolver: res},
	}
	man := &utcp.Manual{UTCPVersion: utcp.Version, ManualVersion: "1.0.0", Tools: []utcp.Tool{}}
	for _, sd := range services {
		prefix := string(sd.Name())
		if simple[prefix] > 1 {
			prefix = string(sd.FullName())
		}
		methods := sd.Methods()
		matched := false
		for i := range methods.Len() {
			md := methods.Get(i)
			if spec.MethodName != "" && string(md.Name()) != spec.MethodName {
				continue
			}
			matched = true
			m := &method{
				tool: prefix + "." + string(md.Name()),
				path: "/" + string(sd.FullName()) + "/" + string(md.Name()),
				desc: md,
				in:   dynamicpb.NewMessageType(md.Input()),
				out:  dynamicpb.NewMessageType(md.Output()),
				sd:   &ggrpc.StreamDesc{StreamName: string(md.Name()), ClientStreams: md.IsStreamingClient(), ServerStreams: md.IsStreamingServer()},
			}
			m.fastIn, m.fastOut = fastMessage(md.Input()), fastMessage(md.Output())
			m.scalarIn = !m.sd.ClientStreams && scalarJSON(md.Input())
			ts.byName[m.tool] = m
			ts.byPath[m.path] = m
			man.Tools = append(man.Tools, toolOf(m, sd))
		}
		if spec.MethodName != "" && !matched {
			return nil, nil, fmt.Errorf("method %q not found in service %s", spec.MethodName, sd.FullName())
		}
	}
	return ts, man, nil
}

// toolOf describes a method as a UTCP tool.
func toolOf(m *method, sd protoreflect.ServiceDescriptor) utcp.Tool {
	desc := comment(m.desc)
	if desc == "" {
		desc = fmt.Sprintf("Calls the %s gRPC method %s.", m.kind(), m.path)
	}
	tool := utcp.Tool{Name: m.tool, Description: desc, Tags: []string{"grpc", string(sd.FullName())}}
	switch {
	case m.sd.ClientStreams:
		tool.Inputs = streamInputSchema(m.desc.Input())
	case m.scalarIn:
		tool.Inputs = valueInputSchema(m.desc.Input())
	default:
		tool.Inputs = messageSchema(m.desc.Input(), false)
	}
	if m.sd.ServerStreams {
		tool.Outputs = listSchema(m.desc.Output())
	} else {
		tool.Outputs = messageSchema(m.desc.Output(), true)
	}
	return tool
}

// resolver finds message and extension types among a manual's
// descriptors first, then among the types linked into utcpd.
type resolver struct {
	local *dynamicpb.Types
}

// FindMessageByName finds a message type by its full name.
func (r *resolver) FindMessageByName(name protoreflect.FullName) (protoreflect.MessageType, error) {
	if mt, err := r.local.FindMessageByName(name); err == nil {
		return mt, nil
	}
	return protoregistry.GlobalTypes.FindMessageByName(name)
}

// FindMessageByURL finds a message type by an Any type URL.
func (r *resolver) FindMessageByURL(url string) (protoreflect.MessageType, error) {
	if mt, err := r.local.FindMessageByURL(url); err == nil {
		return mt, nil
	}
	return protoregistry.GlobalTypes.FindMessageByURL(url)
}

// FindExtensionByName finds an extension by its full name.
func (r *resolver) FindExtensionByName(name protoreflect.FullName) (protoreflect.ExtensionType, error) {
	if xt, err := r.local.FindExtensionByName(name); err == nil {
		return xt, nil
	}
	return protoregistry.GlobalTypes.FindExtensionByName(name)
}

// FindExtensionByNumber finds an extension of a message by its field number.
func (r *resolver) FindExtensionByNumber(message protoreflect.FullName, field protoreflect.FieldNumber) (protoreflect.ExtensionType, error) {
	if xt, err := r.local.FindExtensionByNumber(message, field); err == nil {
		return xt, nil
	}
	return protoregistry.GlobalTypes.FindExtensionByNumber(message, field)
}

// dial creates (without connecting) a client connection for the
// template's target and TLS settings.
func dial(spec *Template, extra ...ggrpc.DialOption) (*ggrpc.ClientConn, error) {
	creds := insecure.NewCredentials()
	if spec.UseSSL {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: spec.ServerName, InsecureSkipVerify: spec.InsecureSkipVerify} //nolint:gosec // documented as dangerous
		if spec.CAFile != "" {
			pem, err := os.ReadFile(spec.CAFile)
			if err != nil {
				return nil, utcp.Errorf(utcp.CodeInvalidTemplate, "grpc: ca_file: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, utcp.NewError(utcp.CodeInvalidTemplate, "grpc: ca_file %s holds no PEM certificate", spec.CAFile)
			}
			cfg.RootCAs = pool
		}
		if spec.CertFile != "" {
			cert, err := tls.LoadX509KeyPair(spec.CertFile, spec.KeyFile)
			if err != nil {
				return nil, utcp.Errorf(utcp.CodeInvalidTemplate, "grpc: cert_file/key_file: %w", err)
			}
			cfg.Certificates = []tls.Certificate{cert}
		}
		creds = credentials.NewTLS(cfg)
	}
	opts := append([]ggrpc.DialOption{ggrpc.WithTransportCredentials(creds), ggrpc.WithUserAgent("utcpd")}, extra...)
	conn, err := ggrpc.NewClient(spec.target(), opts...)
	if err != nil {
		return nil, utcp.Errorf(utcp.CodeInvalidTemplate, "grpc: target %q: %w", spec.target(), err)
	}
	return conn, nil
}

// guardedDialer dials the connections of a call under pol through
// netguard, judging the resolved addresses gRPC hands it as the
// template's host. A local socket target is refused (the gateway drops
// such remote templates at registration already).
func guardedDialer(spec *Template, pol *netguard.Policy) ggrpc.DialOption {
	host, _ := targetHost(spec.target())
	dial := netguard.DialContext(&net.Dialer{KeepAlive: 30 * time.Second})
	return ggrpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
		if strings.HasPrefix(addr, "unix:") {
			return nil, utcp.NewError(utcp.CodeForbidden, "grpc: a tool of remote manual %q may not use the local socket %s", pol.Manual(), addr)
		}
		ctx = netguard.WithDialHost(netguard.WithPolicy(ctx, pol), host)
		return dial(ctx, "tcp", addr)
	})
}

// outgoing adds the template's metadata and the auth's credentials to ctx.
func (t *Transport) outgoing(ctx context.Context, spec *Template, auth *utcp.Auth) (context.Context, error) {
	if pairs := spec.pairs(); len(pairs) > 0 {
		ctx = metadata.AppendToOutgoingContext(ctx, pairs...)
	}
	if pairs := tracing.Pairs(ctx); pairs != nil {
		ctx = metadata.AppendToOutgoingContext(ctx, pairs...)
	}
	if auth == nil {
		return ctx, nil
	}
	switch auth.Type {
	case utcp.AuthAPIKey:
		if auth.APIKey == "" {
			return nil, utcp.NewError(utcp.CodeUnauthorized, "grpc: the api_key of the api_key auth is empty")
		}
		name := auth.VarName
		if name == "" {
			name = "x-api-key"
		}
		if err := checkMetadata(name, auth.APIKey); err != nil {
			return nil, utcp.Errorf(utcp.CodeInvalidTemplate, "grpc: api_key auth: var_name: %w", err)
		}
		return metadata.AppendToOutgoingContext(ctx, strings.ToLower(name), auth.APIKey), nil
	case utcp.AuthBasic:
		cred := base64.StdEncoding.EncodeToString([]byte(auth.Username + ":" + auth.Password))
		return metadata.AppendToOutgoingContext(ctx, "authorization", "Basic "+cred), nil
	case utcp.AuthOAuth2:
		tok, err := t.tokens.Token(ctx, auth)
		if err != nil {
			return nil, err
		}
		return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tok), nil
	case utcp.AuthOAuth2User:
		if auth.AccessToken == "" {
			return nil, utcp.NewError(utcp.CodeUnauthorized, "grpc: access_token for oauth2_user auth is empty: run the interactive login for this manual and provide the token as a variable")
		}
		name := auth.VarName
		if name == "" {
			name = "authorization"
		}
		prefix := "Bearer "
		if auth.Prefix != nil {
			prefix = *auth.Prefix
		}
		if err := checkMetadata(name, prefix+auth.AccessToken); err != nil {
			return nil, utcp.Errorf(utcp.CodeInvalidTemplate, "grpc: oauth2_user auth: %w", err)
		}
		return metadata.AppendToOutgoingContext(ctx, strings.ToLower(name), prefix+auth.AccessToken), nil
	}
	return nil, utcp.NewError(utcp.CodeInvalidTemplate, "grpc: unknown auth_type %q (valid: api_key, basic, oauth2, oauth2_user)", auth.Type)
}

// invocation is one call in progress.
type invocation struct {
	t      *Transport
	manual string
	m      *method
	ts     *toolSet
	spec   *Template
	auth   *utcp.Auth
	conn   *ggrpc.ClientConn
	parent context.Context // the caller's
	ctx    context.Context // with the template's timeout and the metadata
	cancel context.CancelFunc
	reqs   []proto.Message // the request messages, built before anything is sent
}

// start resolves the call's method and connection and builds its request
// messages; nothing is sent yet.
func (t *Transport) start(ctx context.Context, call *utcp.Call) (*invocation, error) {
	if call == nil {
		return nil, utcp.NewError(utcp.CodeInvalidRequest, "grpc: no call")
	}
	spec, auth, err := transports.SpecOf[Template](call.Template, Type, ParseTemplate)
	if err != nil {
		return nil, err
	}
	if err := checkTarget(spec); err != nil {
		return nil, err
	}
	ts, conn, err := t.state(call.Manual, spec, netguard.PolicyFrom(ctx))
	if err != nil {
		return nil, err
	}
	var m *method
	if spec.ServiceName != "" && spec.MethodName != "" {
		m = ts.byPath["/"+spec.ServiceName+"/"+spec.MethodName]
	} else {
		m = ts.byName[call.Name]
	}
	if m == nil {
		name := call.Name
		if spec.MethodName != "" {
			name = spec.ServiceName + "/" + spec.MethodName
		}
		e := utcp.Errorf(utcp.CodeToolNotFound, "grpc: manual %q has no method %q: %w", call.Manual, name, transports.ErrToolNotFound).WithDetail("tool", name)
		if near := utcp.Closest(name, sortedKeys(ts.byName), 3); len(near) > 0 {
			e = e.WithDetail("did_you_mean", near)
		}
		return nil, e
	}
	x := &invocation{t: t, manual: call.Manual, m: m, ts: ts, spec: spec, auth: auth, conn: conn, parent: ctx}
	if err := x.build(call.Arguments); err != nil {
		return nil, err
	}
	var cctx context.Context
	var cancel context.CancelFunc
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= spec.timeout() {
		cctx, cancel = context.WithCancel(ctx) // the caller's deadline comes first: no timer of our own
	} else {
		cctx, cancel = context.WithTimeout(ctx, spec.timeout())
	}
	octx, err := t.outgoing(cctx, spec, auth)
	if err != nil {
		cancel()
		return nil, err
	}
	x.ctx, x.cancel = octx, cancel
	return x, nil
}

// state returns the manual's tools and its connection for spec, dialling
// it the first time.
//
// A call under a netguard policy (a remote manual's tool) gets a
// connection of its own, dialled through netguard with that policy: gRPC
// dials in the background, without the call's context.
func (t *Transport) state(manual string, spec *Template, pol *netguard.Policy) (*toolSet, *ggrpc.ClientConn, error) {
	key := spec.connKey()
	var extra []ggrpc.DialOption
	if pol != nil {
		key += fmt.Sprintf("\x00policy %p", pol)
		extra = append(extra, guardedDialer(spec, pol))
	}
	t.mu.RLock()
	closed := t.closed
	st := t.manuals[manual]
	var ts *toolSet
	var conn *ggrpc.ClientConn
	if st != nil {
		ts, conn = st.tools, st.conns[key]
	}
	t.mu.RUnlock()
	switch {
	case closed:
		return nil, nil, errClosed
	case st == nil:
		return nil, nil, utcp.Errorf(utcp.CodeManualNotFound, "grpc: manual %q is not registered: %w", manual, transports.ErrNotRegistered)
	case conn != nil:
		return ts, conn, nil
	}
	conn, err := dial(spec, extra...)
	if err != nil {
		return nil, nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		_ = conn.Close()
		return nil, nil, errClosed
	}
	st = t.manuals[manual]
	if st == nil {
		_ = conn.Close()
		return nil, nil, utcp.Errorf(utcp.CodeManualNotFound, "grpc: manual %q is not registered: %w", manual, transports.ErrNotRegistered)
	}
	if c := st.conns[key]; c != nil {
		_ = conn.Close()
		return st.tools, c, nil
	}
	st.conns[key] = conn
	return st.tools, conn, nil
}

// build turns the call's arguments into request messages: the arguments
// themselves for a method with one request, the list under "messages"
// for a client-streaming or bidirectional one.
func (x *invocation) build(args map[string]any) error {
	if x.m.scalarIn {
		for k := range args {
			if k != ValueArgument {
				return utcp.NewError(utcp.CodeInvalidArguments, "grpc: the request of %s is a %s: its arguments are {\"value\": ...}, and %q is not expected", x.m.path, x.m.desc.Input().FullName(), k)
			}
		}
		v, ok := args[ValueArgument]
		if !ok {
			return utcp.NewError(utcp.CodeInvalidArguments, "grpc: the request of %s is a %s: argument value is required", x.m.path, x.m.desc.Input().FullName()).WithDetail("missing", []string{ValueArgument})
		}
		msg, err := x.message(v, "value: ")
		if err != nil {
			return err
		}
		x.reqs = []proto.Message{msg}
		return nil
	}
	if !x.m.sd.ClientStreams {
		msg, err := x.message(args, "")
		if err != nil {
			return err
		}
		x.reqs = []proto.Message{msg}
		return nil
	}
	for k := range args {
		if k != MessagesArgument {
			return utcp.NewError(utcp.CodeInvalidArguments, "grpc: %s is %s: its arguments are {\"messages\": [...]}, and %q is not expected", x.m.path, x.m.kind(), k)
		}
	}
	list, ok := args[MessagesArgument].([]any)
	if !ok {
		if args[MessagesArgument] != nil {
			return utcp.NewError(utcp.CodeInvalidArguments, "grpc: %s is %s: argument messages must be a list of request messages", x.m.path, x.m.kind())
		}
		if _, present := args[MessagesArgument]; !present {
			return utcp.NewError(utcp.CodeInvalidArguments, "grpc: %s is %s: argument messages (a list of request messages) is required", x.m.path, x.m.kind()).WithDetail("missing", []string{MessagesArgument})
		}
	}
	x.reqs = make([]proto.Message, 0, len(list))
	for i, v := range list {
		msg, err := x.message(v, fmt.Sprintf("messages[%d]: ", i))
		if err != nil {
			return err
		}
		x.reqs = append(x.reqs, msg)
	}
	return nil
}

// message reads one request message from its JSON form.
func (x *invocation) message(v any, where string) (proto.Message, error) {
	if obj, ok := v.(map[string]any); ok && x.m.fastIn {
		msg := x.m.in.New()
		if fill(msg, obj) {
			return msg.Interface(), nil
		}
	}
	var b []byte
	if m, ok := v.(map[string]any); ok && m == nil {
		b = []byte("{}")
	} else if v == nil && where == "" {
		b = []byte("{}")
	} else {
		var err error
		if b, err = json.Marshal(v); err != nil {
			return nil, utcp.Errorf(utcp.CodeInvalidArguments, "grpc: %s%w", where, err)
		}
	}
	msg := x.m.in.New().Interface()
	if err := x.ts.unmarshal.Unmarshal(b, msg); err != nil {
		return nil, utcp.NewError(utcp.CodeInvalidArguments, "grpc: %sthe arguments are not a valid %s: %v", where, x.m.desc.Input().FullName(), cleanProtoErr(err)).
			WithDetail("message_type", string(x.m.desc.Input().FullName()))
	}
	return msg, nil
}

// cleanProtoErr drops the "proto: " prefix protojson puts on its errors.
func cleanProtoErr(err error) string {
	return strings.TrimLeft(strings.TrimPrefix(err.Error(), "proto:"), " \u00a0")
}

func (x *invocation) callOptions() []ggrpc.CallOption {
	return x.spec.callOptions()
}

// render turns one response message into its JSON value and, when
// sized, says how large the message is.
func (x *invocation) render(msg proto.Message, sized bool) (any, int, error) {
	if x.m.fastOut {
		if v, ok := value(msg.ProtoReflect()); ok {
			n := 0
			if sized {
				n = proto.Size(msg)
			}
			return v, n, nil
		}
	}
	b, err := x.ts.marshal.Marshal(msg)
	if err != nil {
		return nil, 0, &utcp.TransportError{Err: fmt.Errorf("grpc: %s: rendering the answer as JSON: %w", x.m.path, err)}
	}
	v, _ := jsonx.DecodeValue(b)
	return v, len(b), nil
}

// fail maps an error of the call to utcpd's errors (see the package
// documentation).
func (x *invocation) fail(err error) error {
	if perr := x.parent.Err(); perr != nil {
		return perr
	}
	if x.t.isClosed() {
		return errClosed
	}
	st, ok := status.FromError(err)
	if !ok {
		if errors.Is(err, context.DeadlineExceeded) {
			return utcp.Errorf(utcp.CodeTimeout, "grpc: %s: no answer within %v (the template's timeout): %w", x.m.path, x.spec.timeout(), err)
		}
		return &utcp.TransportError{Err: fmt.Errorf("grpc: %s on %s: %w", x.m.path, x.spec.target(), err)}
	}
	msg := st.Message()
	switch st.Code() {
	case codes.DeadlineExceeded:
		// The server, which learns the deadline from grpc-timeout, may
		// give up a moment before the client's own timer fires.
		if expired(x.parent) {
			return fmt.Errorf("grpc: %s: %w", x.m.path, context.DeadlineExceeded)
		}
		if expired(x.ctx) {
			return utcp.Errorf(utcp.CodeTimeout, "grpc: %s: no answer within %v (the template's timeout): %w", x.m.path, x.spec.timeout(), context.DeadlineExceeded)
		}
		return utcp.NewError(utcp.CodeTimeout, "grpc: %s: the server reported DEADLINE_EXCEEDED (timeout): %s", x.m.path, msg)
	case codes.Canceled:
		if !x.t.registered(x.manual) {
			return utcp.Errorf(utcp.CodeManualNotFound, "grpc: %s: the manual was deregistered while the call ran: %w", x.m.path, transports.ErrNotRegistered)
		}
		return utcp.NewError(utcp.CodeCanceled, "grpc: %s: canceled: %s", x.m.path, msg)
	case codes.Unavailable:
		return &utcp.TransportError{Err: fmt.Errorf("grpc: %s on %s: UNAVAILABLE: %s", x.m.path, x.spec.target(), msg)}
	case codes.Unimplemented:
		return utcp.Errorf(utcp.CodeToolNotFound, "grpc: %s: the server does not implement it (UNIMPLEMENTED: %s): %w", x.m.path, msg, transports.ErrToolNotFound).WithDetail("method", x.m.path)
	case codes.ResourceExhausted:
		if strings.Contains(msg, "message larger than max") {
			return utcp.Errorf(utcp.CodePayloadTooLarge, "grpc: %s: %s (max_message_size %d): %w", x.m.path, msg, x.spec.maxMessage(), transports.ErrTooLarge)
		}
	case codes.Unauthenticated:
		if x.auth != nil && x.auth.Type == utcp.AuthOAuth2 {
			x.t.tokens.Invalidate(x.auth)
		}
	}
	return x.ts.toolError(x.m.path, st)
}

// expired reports whether ctx ended or ends within deadlineSlack.
func expired(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	dl, ok := ctx.Deadline()
	return ok && time.Until(dl) < deadlineSlack
}

// deadlineSlack is how close to its deadline a call that the server
// reports DEADLINE_EXCEEDED for counts as timed out on the client's side.
const deadlineSlack = 100 * time.Millisecond

// toolError is the *utcp.ToolError of a status the tool reported: Status
// is the gRPC code, Value {"code", "message", "details"} with each detail
// rendered by protojson when its type is known.
func (ts *toolSet) toolError(path string, st *status.Status) error {
	name := codeName(st.Code())
	val := map[string]any{"code": name, "message": st.Message()}
	if details := st.Proto().GetDetails(); len(details) > 0 {
		list := make([]any, 0, len(details))
		for _, d := range details {
			if b, err := ts.marshal.Marshal(d); err == nil {
				v, _ := jsonx.DecodeValue(b)
				list = append(list, v)
				continue
			}
			list = append(list, map[string]any{"@type": d.GetTypeUrl(), "value": base64.StdEncoding.EncodeToString(d.GetValue())})
		}
		val["details"] = list
	}
	return &utcp.ToolError{Message: fmt.Sprintf("grpc %s: %s: %s", path, name, st.Message()), Value: val, Status: int(st.Code())}
}

// codeNames are the canonical names of the gRPC status codes.
var codeNames = map[codes.Code]string{
	codes.OK: "OK", codes.Canceled: "CANCELLED", codes.Unknown: "UNKNOWN", codes.InvalidArgument: "INVALID_ARGUMENT",
	codes.DeadlineExceeded: "DEADLINE_EXCEEDED", codes.NotFound: "NOT_FOUND", codes.AlreadyExists: "ALREADY_EXISTS",
	codes.PermissionDenied: "PERMISSION_DENIED", codes.ResourceExhausted: "RESOURCE_EXHAUSTED",
	codes.FailedPrecondition: "FAILED_PRECONDITION", codes.Aborted: "ABORTED", codes.OutOfRange: "OUT_OF_RANGE",
	codes.Unimplemented: "UNIMPLEMENTED", codes.Internal: "INTERNAL", codes.Unavailable: "UNAVAILABLE",
	codes.DataLoss: "DATA_LOSS", codes.Unauthenticated: "UNAUTHENTICATED",
}

// codeName returns the canonical name of a gRPC status code
// ("FAILED_PRECONDITION"), or "CODE_<n>" for one outside the list.
func codeName(c codes.Code) string {
	if n, ok := codeNames[c]; ok {
		return n
	}
	return fmt.Sprintf("CODE_%d", uint32(c))
}

// run carries a started call to its whole result.
func (x *invocation) run() (*utcp.Result, error) {
	defer x.cancel()
	if !x.m.sd.ClientStreams && !x.m.sd.ServerStreams {
		resp := x.m.out.New().Interface()
		if err := x.conn.Invoke(x.ctx, x.m.path, x.reqs[0], resp, x.callOptions()...); err != nil {
			return nil, x.fail(err)
		}
		v, _, err := x.render(resp, false)
		if err != nil {
			return nil, err
		}
		return &utcp.Result{Value: v}, nil
	}
	s, err := x.open()
	if err != nil {
		return nil, err
	}
	defer s.Close()
	if !x.m.sd.ServerStreams {
		ev, err := s.Recv()
		if err != nil {
			return nil, err
		}
		return &utcp.Result{Value: ev.Data}, nil
	}
	list := []any{}
	var size int64
	for {
		ev, err := s.recv()
		if errors.Is(err, io.EOF) {
			return &utcp.Result{Value: list}, nil
		}
		if err != nil {
			return nil, err
		}
		size += int64(ev.size)
		if size > x.t.maxResponse {
			return nil, transports.TooLarge(x.t.maxResponse)
		}
		list = append(list, ev.v)
	}
}

// open starts a streaming call and sends its request messages: at once
// for a server- or client-streaming method, from a goroutine of the
// stream for a bidirectional one (so that answers are read while
// requests are still being sent).
func (x *invocation) open() (*stream, error) {
	cs, err := x.conn.NewStream(x.ctx, x.m.sd, x.m.path, x.callOptions()...)
	if err != nil {
		x.cancel()
		return nil, x.fail(err)
	}
	s := &stream{x: x, cs: cs}
	send := func() error {
		for _, req := range x.reqs {
			if err := cs.SendMsg(req); err != nil {
				return err
			}
		}
		return cs.CloseSend()
	}
	if x.m.sd.ClientStreams && x.m.sd.ServerStreams {
		s.sent = make(chan struct{})
		go func() {
			defer close(s.sent)
			_ = send() // a failed send shows as the stream's status in RecvMsg
		}()
		return s, nil
	}
	if err := send(); err != nil && !errors.Is(err, io.EOF) {
		x.cancel()
		return nil, x.fail(err)
	}
	return s, nil
}

// stream is one streaming call read message by message.
type stream struct {
	x    *invocation
	cs   ggrpc.ClientStream
	sent chan struct{} // closed when the sending goroutine is done; nil without one

	mu   sync.Mutex
	done bool
	err  error // returned by Recv once done
}

type rendered struct {
	v    any
	size int
}

// recv reads and renders the next response message.
func (s *stream) recv() (*rendered, error) {
	s.mu.Lock()
	if s.done {
		err := s.err
		s.mu.Unlock()
		return nil, err
	}
	s.mu.Unlock()
	msg := s.x.m.out.New().Interface()
	err := s.cs.RecvMsg(msg)
	if err == nil {
		v, n, rerr := s.x.render(msg, s.x.m.sd.ServerStreams)
		if rerr != nil {
			s.end(rerr)
			return nil, rerr
		}
		if !s.x.m.sd.ServerStreams {
			s.end(io.EOF)
		}
		return &rendered{v: v, size: n}, nil
	}
	if !errors.Is(err, io.EOF) {
		err = s.x.fail(err)
	}
	s.end(err)
	return nil, err
}

// Recv returns the next response message as an event, io.EOF after the
// last one, or the error that ended the call.
func (s *stream) Recv() (*utcp.Event, error) {
	r, err := s.recv()
	if err != nil {
		return nil, err
	}
	return &utcp.Event{Data: r.v}, nil
}

func (s *stream) end(err error) {
	s.mu.Lock()
	if s.done {
		s.mu.Unlock()
		return
	}
	s.done = true
	s.err = err
	s.mu.Unlock()
	s.x.cancel()
	if s.sent != nil {
		<-s.sent
	}
}

// Close ends the call; before its end it cancels it, which the server
// sees as its context ending. It is idempotent.
func (s *stream) Close() error {
	s.end(utcp.NewError(utcp.CodeCanceled, "grpc: stream closed"))
	return nil
}

// sortedKeys returns the keys of m, sorted.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
