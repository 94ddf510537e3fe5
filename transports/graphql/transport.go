package graphql

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/utcpd/utcpd/internal/jsonx"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/transports/internal/httpcall"
	"github.com/utcpd/utcpd/transports/internal/httpclient"
	"github.com/utcpd/utcpd/transports/oauth2"
	"github.com/utcpd/utcpd/utcp"
)

// Info describes the graphql transport to a transports.Registry.
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

// Config is the graphql section of the daemon configuration
// (transports.Options.Config). Every field is optional.
type Config struct {
	// MaxResponseBytes caps one HTTP response body, and what CallTool
	// collects from a subscription; 0 means
	// transports.DefaultMaxResponseBytes (64 MiB).
	MaxResponseBytes int64 `json:"max_response_bytes,omitempty"`
	// MaxMessageBytes caps one graphql-transport-ws message; 0 means
	// transports.DefaultMaxEventBytes (16 MiB).
	MaxMessageBytes int64 `json:"max_message_bytes,omitempty"`
	// MaxIdleConnsPerHost sizes the keep-alive pool per host (default
	// httpclient.DefaultMaxIdleConnsPerHost).
	MaxIdleConnsPerHost int `json:"max_idle_conns_per_host,omitempty"`
}

// Transport is the graphql transport. It keeps, per registered manual,
// the operation each discovered tool sends, and one WebSocket per
// subscription in flight. It is safe for concurrent use.
type Transport struct {
	cfg    Config
	client *http.Client
	tokens transports.TokenSource
	log    *slog.Logger

	mu      sync.Mutex
	closed  bool
	manuals map[string]*manualState
	streams map[*subStream]struct{}
	wg      sync.WaitGroup // subscription readers
}

// manualState is what the transport knows of one manual.
type manualState struct {
	// ops holds, per endpoint URL, the operation of each tool discovered
	// there (empty when the endpoint refused introspection).
	ops map[string]map[string]*operation
}

// New returns a graphql Transport configured by opts.Config (a Config,
// may be empty). It uses opts.Tokens for oauth2, or a token cache of its
// own when that is nil. Unknown configuration fields are logged and
// ignored.
func New(opts transports.Options) (*Transport, error) {
	var cfg Config
	log, err := transports.DecodeConfig(opts, "graphql", &cfg)
	if err != nil {
		return nil, utcp.Errorf(utcp.CodeInvalidConfig, "graphql transport configuration: %w", err)
	}
	if cfg.MaxResponseBytes < 0 || cfg.MaxMessageBytes < 0 || cfg.MaxIdleConnsPerHost < 0 {
		return nil, utcp.NewError(utcp.CodeInvalidConfig, "graphql transport configuration: limits must not be negative")
	}
	if cfg.MaxResponseBytes == 0 {
		cfg.MaxResponseBytes = transports.DefaultMaxResponseBytes
	}
	if cfg.MaxMessageBytes == 0 {
		cfg.MaxMessageBytes = transports.DefaultMaxEventBytes
	}
	client := httpclient.New(httpclient.Options{MaxIdleConnsPerHost: cfg.MaxIdleConnsPerHost})
	t := &Transport{
		cfg:     cfg,
		client:  client,
		tokens:  opts.Tokens,
		log:     log,
		manuals: map[string]*manualState{},
		streams: map[*subStream]struct{}{},
	}
	if t.tokens == nil {
		t.tokens = oauth2.NewTokenCache(client)
	}
	return t, nil
}

// errClosed refuses calls after Close and ends the subscriptions Close cuts.
var errClosed = utcp.NewError(utcp.CodeUnavailable, "graphql: transport closed")

// RegisterManual discovers the tools of the endpoint: it POSTs
// IntrospectionQuery and makes every field of the Query, Mutation and
// Subscription types a tool (see the package documentation), or, when
// the template has an explicit query, returns the single tool that
// document is, without a request. An endpoint that answers the
// introspection query with errors (introspection disabled), or with
// anything but a GraphQL response, or cannot be reached, is
// discovery_failed naming the URL; a URL refused by httpclient.CheckURL
// is invalid_template; an oversized answer payload_too_large; the end of
// ctx or of the template's timeout (DefaultTimeout without either)
// returns the context's error. Success keeps the manual's operations
// until Release.
func (t *Transport) RegisterManual(ctx context.Context, tmpl *utcp.CallTemplate) (*utcp.Manual, error) {
	if t.isClosed() {
		return nil, errClosed
	}
	spec, auth, err := transports.SpecOf[Template](tmpl, Type, ParseTemplate)
	if err != nil {
		return nil, err
	}
	var tools []utcp.Tool
	var ops map[string]*operation
	if spec.Query != "" {
		if _, err := t.endpoint(spec); err != nil {
			return nil, err
		}
		tool, op := queryTool(tmpl.Name, spec)
		tools, ops = []utcp.Tool{tool}, map[string]*operation{tool.Name: op}
	} else {
		if tools, ops, err = t.discover(ctx, tmpl.Name, spec, auth); err != nil {
			return nil, err
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, errClosed
	}
	st := t.manuals[tmpl.Name]
	if st == nil {
		st = &manualState{}
		t.manuals[tmpl.Name] = st
	}
	st.ops = map[string]map[string]*operation{spec.URL: ops}
	if tools == nil {
		tools = []utcp.Tool{}
	}
	return &utcp.Manual{UTCPVersion: utcp.Version, ManualVersion: "1.0.0", Tools: tools}, nil
}

// CallTool runs one call and waits for its whole result. A query or
// mutation is one POST of {"query","variables","operationName"}; its
// result is data.<field> (for an explicit document: the value of data's
// only key, or the whole data). A subscription is run over
// graphql-transport-ws and its events' values are returned as a list once
// the server completes it (capped at Config.MaxResponseBytes).
//
// GraphQL errors in the answer (whatever the HTTP status) are a
// *utcp.ToolError whose message joins the error messages and whose Value
// is {"errors": [...], "data": <partial data or null>}; the validation
// error for a root field the schema lacks is tool_not_found. An HTTP
// status of 300 or more without a GraphQL body, and a 2xx body that is
// not a GraphQL response, are a *utcp.TransportError with the status; so
// is a backend that cannot be reached. An oversized response is
// payload_too_large; the end of ctx or of the template's timeout returns
// the context's error; arguments the tool does not take are
// invalid_arguments; a call after DeregisterManual is manual_not_found.
func (t *Transport) CallTool(ctx context.Context, call *utcp.Call) (*utcp.Result, error) {
	if call == nil {
		return nil, utcp.NewError(utcp.CodeInvalidRequest, "graphql: no call")
	}
	if t.isClosed() {
		return nil, errClosed
	}
	spec, auth, err := transports.SpecOf[Template](call.Template, Type, ParseTemplate)
	if err != nil {
		return nil, err
	}
	if d := spec.timeout(); d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	p, err := t.plan(ctx, call, spec, auth)
	if err != nil {
		return nil, err
	}
	if p.op.opType == OpSubscription {
		return t.collect(ctx, spec, auth, p)
	}
	u, err := t.endpoint(spec)
	if err != nil {
		return nil, err
	}
	body, err := p.requestBody()
	if err != nil {
		return nil, err
	}
	resp, err := t.post(ctx, u, spec, auth, p.headers, body)
	if err != nil {
		return nil, err
	}
	if !resp.graphql {
		return nil, resp.notGraphQL(http.MethodPost, u)
	}
	if resp.errs != nil {
		var data any
		if resp.data != nil {
			data, _ = jsonx.DecodeValue(resp.data)
		}
		return nil, gqlError(resp.errs, data, resp.status, p.op.field)
	}
	return &utcp.Result{Value: result(resp.data, p.key)}, nil
}

// CallToolStream starts one call and returns its events. A subscription
// streams over graphql-transport-ws: each next message is one event whose
// Data is data.<field> (the whole payload's data for an explicit document
// with several root fields); the server's complete ends the stream with
// io.EOF, an error message (or a next carrying errors) ends it with the
// error CallTool would return. Closing the stream early, or the end of
// ctx, sends complete for the subscription and closes its connection. A
// query or mutation yields its CallTool result as a single event. The
// template's timeout bounds the handshake (DefaultTimeout without it), not
// the stream.
func (t *Transport) CallToolStream(ctx context.Context, call *utcp.Call) (transports.Stream, error) {
	if call == nil {
		return nil, utcp.NewError(utcp.CodeInvalidRequest, "graphql: no call")
	}
	if t.isClosed() {
		return nil, errClosed
	}
	spec, auth, err := transports.SpecOf[Template](call.Template, Type, ParseTemplate)
	if err != nil {
		return nil, err
	}
	p, err := t.plan(ctx, call, spec, auth)
	if err != nil {
		return nil, err
	}
	if p.op.opType != OpSubscription {
		res, err := t.CallTool(ctx, call)
		if err != nil {
			return nil, err
		}
		return transports.SingleEvent(&utcp.Event{Data: res.Value}), nil
	}
	return t.subscribe(ctx, spec, auth, p)
}

// Release forgets the manual's operations (transports.Count calls it
// when the manual's last registration ends). Subscriptions in flight run
// on.
func (t *Transport) Release(ctx context.Context, tmpl *utcp.CallTemplate) error {
	if tmpl == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.manuals, tmpl.Name)
	return nil
}

// Close ends every subscription in flight (their streams fail with code
// unavailable), waits for their goroutines, closes the pooled HTTP
// connections and refuses later calls. It is idempotent.
func (t *Transport) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	streams := make([]*subStream, 0, len(t.streams))
	for s := range t.streams {
		streams = append(streams, s)
	}
	t.mu.Unlock()
	for _, s := range streams {
		s.shut(errClosed)
	}
	t.wg.Wait()
	t.client.CloseIdleConnections()
	return nil
}

func (t *Transport) isClosed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.closed
}

// endpoint parses and checks the template's URL.
func (t *Transport) endpoint(spec *Template) (*url.URL, error) { return spec.endpointURL() }

// endpointURL is the template's checked url (see Transport.endpoint).
func (t *Template) endpointURL() (*url.URL, error) {
	u, err := url.Parse(t.URL)
	if err != nil {
		return nil, utcp.Errorf(utcp.CodeInvalidTemplate, "graphql: url: %w", err)
	}
	if err := httpclient.CheckURL(u, t.AllowInsecure); err != nil {
		return nil, err
	}
	if s := strings.ToLower(u.Scheme); s != "http" && s != "https" {
		return nil, utcp.NewError(utcp.CodeInvalidTemplate, "graphql: url %q is not http:// or https://", utcp.RedactURL(u))
	}
	return u, nil
}

// discover runs the introspection query and builds the tools.
func (t *Transport) discover(ctx context.Context, manual string, spec *Template, auth *utcp.Auth) ([]utcp.Tool, map[string]*operation, error) {
	u, err := t.endpoint(spec)
	if err != nil {
		return nil, nil, err
	}
	d := spec.timeout()
	if d == 0 {
		d = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	fail := func(format string, args ...any) *utcp.Error {
		return utcp.Errorf(utcp.CodeDiscoveryFailed, "graphql discovery of manual %q from %s: "+format,
			append([]any{manual, utcp.RedactURL(u)}, args...)...).WithDetail("url", utcp.RedactURL(u))
	}
	body, _ := json.Marshal(map[string]any{"query": IntrospectionQuery, "operationName": "UtcpdIntrospection"})
	resp, err := t.post(ctx, u, spec, auth, nil, body)
	if err != nil {
		var uerr *utcp.Error
		if ctx.Err() != nil || errors.As(err, &uerr) && uerr.Code != utcp.CodeTransportError {
			return nil, nil, err
		}
		return nil, nil, fail("%w", err)
	}
	if resp.errs != nil {
		return nil, nil, fail("the introspection query failed, so the schema cannot be read (is introspection disabled on the server? use a template with an explicit query instead): %s", errorMessages(resp.errs)).
			WithDetail("errors", resp.errs).WithDetail("status", resp.status)
	}
	if !resp.graphql {
		return nil, nil, fail("%v", resp.notGraphQL(http.MethodPost, u))
	}
	var data introspection
	if err := json.Unmarshal(resp.data, &data); err != nil || data.Schema == nil {
		return nil, nil, fail("the answer to the introspection query has no __schema: %s", jsonx.Excerpt(resp.data))
	}
	sch := &schema{types: map[string]*fullType{}, depth: spec.selectionDepth()}
	for i := range data.Schema.Types {
		sch.types[data.Schema.Types[i].Name] = &data.Schema.Types[i]
	}
	root := map[string]string{}
	for op, n := range map[string]*named{OpQuery: data.Schema.QueryType, OpMutation: data.Schema.MutationType, OpSubscription: data.Schema.SubscriptionType} {
		if n != nil {
			root[op] = n.Name
		}
	}
	tools, ops := sch.tools(root, spec)
	return tools, ops, nil
}

// response is one GraphQL answer over HTTP, decoded.
type response struct {
	status  int
	ctype   string
	body    []byte
	graphql bool            // the body is a GraphQL response (data or errors)
	data    json.RawMessage // "data", nil when absent
	errs    []any           // "errors", nil when absent or empty
}

// notGraphQL is the transport error for an answer that is not a GraphQL
// response.
func (r *response) notGraphQL(method string, u *url.URL) error {
	if r.status >= 300 || r.status < 200 {
		return &utcp.TransportError{Status: r.status,
			Err: fmt.Errorf("%s %s answered HTTP %d %s: %s", method, utcp.RedactURL(u), r.status, http.StatusText(r.status), jsonx.Excerpt(r.body))}
	}
	return &utcp.TransportError{Status: r.status,
		Err: fmt.Errorf("%s %s answered HTTP %d with a body that is not a GraphQL response (a JSON object with data or errors): %s", method, utcp.RedactURL(u), r.status, jsonx.Excerpt(r.body))}
}

// post sends one GraphQL request body and decodes the answer, whatever
// its status.
func (t *Transport) post(ctx context.Context, u *url.URL, spec *Template, auth *utcp.Auth, extra http.Header, body []byte) (*response, error) {
	header := http.Header{}
	for k, v := range spec.Headers {
		header.Set(k, v)
	}
	for k, v := range extra {
		header[k] = v
	}
	header.Set("Content-Type", "application/json")
	if header.Get("Accept") == "" {
		header.Set("Accept", "application/graphql-response+json, application/json;q=0.9")
	}
	ctx = httpclient.WithAllowInsecure(ctx, spec.AllowInsecure)
	hr, err := httpcall.SendMapped(ctx, t.client, t.tokens, http.MethodPost, &httpcall.MappedRequest{URL: u, Header: header, Body: body}, auth)
	if err != nil {
		return nil, err
	}
	raw, err := httpclient.ReadResponseBody(hr, t.cfg.MaxResponseBytes)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("graphql POST %s: %w", utcp.RedactURL(u), context.Cause(ctx))
		}
		if errors.Is(err, transports.ErrTooLarge) {
			return nil, err
		}
		return nil, &utcp.TransportError{Status: hr.StatusCode, Err: fmt.Errorf("POST %s: reading the response: %w", utcp.RedactURL(u), err)}
	}
	r := &response{status: hr.StatusCode, ctype: hr.Header.Get("Content-Type"), body: raw}
	r.decode()
	return r, nil
}

// decode reads data and errors from the body.
func (r *response) decode() {
	var env map[string]json.RawMessage
	if json.Unmarshal(r.body, &env) != nil {
		return
	}
	d, hasData := env["data"]
	e, hasErrs := env["errors"]
	if !hasData && !hasErrs {
		return
	}
	r.graphql = true
	if hasData && !bytes.Equal(bytes.TrimSpace(d), []byte("null")) {
		r.data = d
	}
	if hasErrs {
		v, _ := jsonx.DecodeValue(e)
		switch x := v.(type) {
		case []any:
			if len(x) > 0 {
				r.errs = x
			}
		case nil:
		default:
			r.errs = []any{x}
		}
	}
}

// errorMessages joins the messages of a GraphQL errors array (at most
// three, then a count).
func errorMessages(errs []any) string {
	var msgs []string
	for i, e := range errs {
		if i == 3 {
			msgs = append(msgs, fmt.Sprintf("and %d more", len(errs)-3))
			break
		}
		msg := ""
		if m, ok := e.(map[string]any); ok {
			msg, _ = m["message"].(string)
		}
		if msg == "" {
			b, _ := json.Marshal(e)
			msg = string(b)
		}
		msgs = append(msgs, msg)
	}
	return strings.Join(msgs, "; ")
}

// unknownFieldRE matches the validation error graphql-js and graphql-go
// give for a root field the schema lacks.
var unknownFieldRE = regexp.MustCompile(`^Cannot query field "([^"]+)" on type "([^"]+)"`)

// gqlError turns a GraphQL errors array (with the partial data, if any)
// into the call's error: tool_not_found when the server says it has no
// such root field, a *utcp.ToolError otherwise, whose Value is
// {"errors": [...], "data": <partial data or null>}.
func gqlError(errs []any, data any, status int, field string) error {
	for _, e := range errs {
		m, _ := e.(map[string]any)
		msg, _ := m["message"].(string)
		if sm := unknownFieldRE.FindStringSubmatch(msg); sm != nil && sm[1] == field {
			return utcp.Errorf(utcp.CodeToolNotFound, "graphql: %s: %w", msg, transports.ErrToolNotFound).WithDetail("field", field)
		}
	}
	te := &utcp.ToolError{Message: errorMessages(errs), Value: map[string]any{"errors": errs, "data": data}}
	if status >= 400 {
		te.Status = status
	}
	return te
}

// callPlan is what one call sends.
type callPlan struct {
	op      *operation
	opName  string // operationName, "" to omit
	vars    map[string]any
	headers http.Header
	key     string // the key of data that is the result; "" for the whole data when it has several
}

// plan works out the document, variables and headers of call.
func (t *Transport) plan(ctx context.Context, call *utcp.Call, spec *Template, auth *utcp.Auth) (*callPlan, error) {
	args := call.Arguments
	p := &callPlan{headers: http.Header{}, vars: map[string]any{}}
	for _, name := range spec.HeaderFields {
		v, ok := args[name]
		if !ok {
			continue
		}
		s, ok := jsonx.ArgString(v)
		if !ok {
			continue
		}
		if !httpclient.ValidHeaderValue(s) {
			return nil, utcp.NewError(utcp.CodeInvalidArguments, "argument %q: a header value must not contain line breaks", name).WithDetail("argument", name)
		}
		p.headers.Set(name, s)
	}
	if spec.Query != "" {
		opType, _, _, varTypes := parseOperation(spec.Query, spec.OperationName)
		for k, v := range spec.VariableTypes {
			varTypes[k] = v
		}
		p.op = &operation{opType: opType, document: spec.Query, varTypes: varTypes}
		p.opName = spec.OperationName
	} else {
		op, err := t.lookup(ctx, call, spec, auth)
		if err != nil {
			return nil, err
		}
		p.op, p.key = op, op.field
	}
	for k, v := range args {
		if slices.Contains(spec.HeaderFields, k) {
			continue
		}
		vt, known := p.op.varTypes[k]
		if !known && spec.Query == "" {
			return nil, utcp.NewError(utcp.CodeInvalidArguments, "graphql: %s takes no argument %q (it takes %s)", call.Name, k, strings.Join(quoteAll(sortedKeys(p.op.varTypes)), ", ")).
				WithDetail("argument", k)
		}
		p.vars[k] = coerce(v, vt)
	}
	return p, nil
}

func quoteAll(s []string) []string {
	if len(s) == 0 {
		return []string{"no arguments"}
	}
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = strconv.Quote(v)
	}
	return out
}

// lookup returns the operation of a discovered tool: from the manual's
// state, introspecting once when the transport never registered the
// manual (a tool loaded from a store), and otherwise a document written
// for the call (the tool's name as the root field, the argument types
// from variable_types or inferred from the values, no selection set), so
// that the server decides whether the field exists.
func (t *Transport) lookup(ctx context.Context, call *utcp.Call, spec *Template, auth *utcp.Auth) (*operation, error) {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil, errClosed
	}
	st := t.manuals[call.Manual]
	var op *operation
	ops, known := st.endpoint(spec.URL)
	if known {
		op = ops[call.Name]
	}
	t.mu.Unlock()
	if op != nil {
		return op, nil
	}
	if !known {
		_, ops, err := t.discover(ctx, call.Manual, spec, auth)
		if err == nil {
			t.remember(call.Manual, spec.URL, ops)
			if op = ops[call.Name]; op != nil {
				return op, nil
			}
		} else {
			var uerr *utcp.Error
			if ctx.Err() != nil || errors.As(err, &uerr) && uerr.Code != utcp.CodeDiscoveryFailed {
				return nil, err
			}
			var tre *utcp.TransportError
			if !errors.As(err, &tre) {
				// The server answered but will not be introspected: do not
				// ask again for every call.
				t.remember(call.Manual, spec.URL, map[string]*operation{})
			}
			t.log.Debug("graphql: introspection for a call failed; sending a generated document", "manual", call.Manual, "tool", call.Name, "err", err)
		}
	}
	if !nameRE.MatchString(call.Name) {
		return nil, utcp.Errorf(utcp.CodeToolNotFound, "graphql: %q is not a GraphQL field name: %w", call.Name, transports.ErrToolNotFound)
	}
	args := sortedKeys(call.Arguments)
	args = slices.DeleteFunc(args, func(a string) bool { return slices.Contains(spec.HeaderFields, a) })
	varTypes := map[string]string{}
	for _, a := range args {
		if !nameRE.MatchString(a) {
			return nil, utcp.NewError(utcp.CodeInvalidArguments, "graphql: argument %q is not a GraphQL name", a).WithDetail("argument", a)
		}
		varTypes[a] = inferType(call.Arguments[a])
		if vt := spec.VariableTypes[a]; vt != "" {
			varTypes[a] = strings.TrimSpace(vt)
		}
	}
	opType := spec.operationType()
	return &operation{field: call.Name, opType: opType, varTypes: varTypes,
		document: buildDocument(opType, call.Name, call.Name, args, varTypes, "")}, nil
}

// endpoint returns the operations known for url. st may be nil.
func (st *manualState) endpoint(url string) (map[string]*operation, bool) {
	if st == nil {
		return nil, false
	}
	ops, ok := st.ops[url]
	return ops, ok
}

// remember stores what a call's introspection found at url, unless url
// is known already.
func (t *Transport) remember(manual, url string, ops map[string]*operation) {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.manuals[manual]
	if st == nil {
		st = &manualState{}
		t.manuals[manual] = st
	}
	if st.ops == nil {
		st.ops = map[string]map[string]*operation{}
	}
	if _, ok := st.ops[url]; !ok {
		st.ops[url] = ops
	}
}

// inferType guesses the GraphQL type of a JSON value for a document
// utcpd writes without a schema.
func inferType(v any) string {
	switch x := v.(type) {
	case bool:
		return "Boolean"
	case json.Number:
		if _, err := x.Int64(); err == nil {
			return "Int"
		}
		return "Float"
	case float64:
		if x == float64(int64(x)) {
			return "Int"
		}
		return "Float"
	case float32:
		return "Float"
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return "Int"
	}
	return "String"
}

// coerce converts an argument to the JSON its GraphQL type expects when
// the caller sent text (as command lines and query strings do): numbers
// for Int and Float, booleans for Boolean, text for String.
func coerce(v any, gqlType string) any {
	t := strings.TrimSuffix(strings.TrimSpace(gqlType), "!")
	switch x := v.(type) {
	case string:
		switch t {
		case "Int":
			if _, err := strconv.ParseInt(strings.TrimSpace(x), 10, 64); err == nil {
				return json.Number(strings.TrimSpace(x))
			}
		case "Float":
			if _, err := strconv.ParseFloat(strings.TrimSpace(x), 64); err == nil {
				return json.Number(strings.TrimSpace(x))
			}
		case "Boolean":
			if b, err := strconv.ParseBool(strings.TrimSpace(x)); err == nil {
				return b
			}
		}
	case json.Number:
		if t == "String" {
			return string(x)
		}
	case float64:
		if t == "String" {
			s, _ := jsonx.ArgString(x)
			return s
		}
	}
	return v
}

// requestBody encodes the GraphQL request of p.
func (p *callPlan) requestBody() ([]byte, error) {
	req := map[string]any{"query": p.op.document, "variables": p.vars}
	if p.opName != "" {
		req["operationName"] = p.opName
	}
	b, err := jsonx.Marshal(req)
	if err != nil {
		return nil, utcp.Errorf(utcp.CodeInvalidArguments, "graphql: cannot encode the variables: %w", err)
	}
	return b, nil
}

// result picks the call's value out of data: data[key], or, for an
// explicit document, the value of data's only key (the whole data when it
// has several).
func result(data json.RawMessage, key string) any {
	if len(data) == 0 {
		return nil
	}
	v, ok := jsonx.DecodeValue(data)
	if !ok {
		return nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	if key != "" {
		return m[key]
	}
	if len(m) == 1 {
		for _, x := range m {
			return x
		}
	}
	return m
}

// collect runs a subscription to its end and returns its values as a list.
func (t *Transport) collect(ctx context.Context, spec *Template, auth *utcp.Auth, p *callPlan) (*utcp.Result, error) {
	s, err := t.subscribe(ctx, spec, auth, p)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	list := []any{}
	var total int64
	for {
		ev, size, err := s.next()
		if errors.Is(err, io.EOF) {
			return &utcp.Result{Value: list}, nil
		}
		if err != nil {
			return nil, err
		}
		total += int64(size)
		if total > t.cfg.MaxResponseBytes {
			return nil, transports.TooLarge(t.cfg.MaxResponseBytes)
		}
		list = append(list, ev.Data)
	}
}
