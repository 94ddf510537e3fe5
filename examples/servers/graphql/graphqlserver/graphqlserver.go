// Package graphqlserver is the demo GraphQL server of the fixture tools,
// built on github.com/graphql-go/graphql, for utcpd's graphql transport.
// Its tests and benchmarks, and the command in examples/servers/graphql,
// serve it.
//
// The schema (see SDL):
//
//	type Query {
//	  echo(text: String, obj: JSON, blob: String, value: JSON, x: JSON): JSON
//	  add(a: Float!, b: Float!): AddResult!
//	  sleep(ms: Int!): SleepResult!
//	}
//	type Mutation { fail(message: String): JSON }
//	type Subscription { count(n: Int!, delay_ms: Int): Int! }
//
// echo returns the arguments it was given as one JSON object (GraphQL has
// no "any arguments", so it declares the names the conformance suite
// uses, and value and x for anything else); fail always answers with a
// GraphQL error carrying its message; count is a subscription that yields
// 1..n.
//
// Routes, all at /graphql:
//
//	POST /graphql  {"query","variables","operationName"} → {"data","errors"} (HTTP 200;
//	               400 for a body that is not a GraphQL request)
//	GET  /graphql  ?query=...&variables=...&operationName=... for queries
//	GET  /graphql  with Upgrade: websocket — the graphql-transport-ws protocol
//	               (subprotocol "graphql-transport-ws"): connection_init → connection_ack,
//	               subscribe{id,payload} → next* → complete (or error), complete from the
//	               client stops the operation, ping → pong. Queries and mutations may be
//	               sent over it too.
//
// Options.DisableIntrospection makes every document that asks for
// __schema or __type fail with a GraphQL error, as production servers
// configured without introspection do.
package graphqlserver

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"github.com/graphql-go/graphql"
	"github.com/graphql-go/graphql/gqlerrors"
	"github.com/graphql-go/graphql/language/ast"
	"github.com/graphql-go/graphql/language/parser"

	"github.com/utcpd/utcpd/transports/transporttest/fixture"
)

// SDL is the schema the server serves, in the schema definition language
// (for documentation: the schema is built in Go by Schema).
const SDL = `scalar JSON
type AddResult { sum: Float! }
type SleepResult { slept_ms: Int! }
type Query {
  echo(text: String, obj: JSON, blob: String, value: JSON, x: JSON): JSON
  add(a: Float!, b: Float!): AddResult!
  sleep(ms: Int!): SleepResult!
}
type Mutation { fail(message: String): JSON }
type Subscription { count(n: Int!, delay_ms: Int): Int! }`

// Subprotocol is the WebSocket subprotocol the server speaks.
const Subprotocol = "graphql-transport-ws"

// DefaultMaxBodyBytes caps a request body when Options.MaxBodyBytes is 0.
const DefaultMaxBodyBytes = 16 << 20

// Options tune New.
type Options struct {
	// DisableIntrospection refuses documents that query __schema or
	// __type.
	DisableIntrospection bool
	// MaxBodyBytes caps a request body (and a WebSocket message); 0
	// means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// InitTimeout is how long a WebSocket client has to send
	// connection_init; 0 means 10 s.
	InitTimeout time.Duration
}

// JSON is a scalar holding any JSON value, passed through as it is.
var JSON = graphql.NewScalar(graphql.ScalarConfig{
	Name:         "JSON",
	Description:  "Any JSON value.",
	Serialize:    func(v any) any { return v },
	ParseValue:   func(v any) any { return v },
	ParseLiteral: parseLiteral,
})

// parseLiteral reads a JSON value written inline in a document.
func parseLiteral(v ast.Value) any {
	switch x := v.(type) {
	case *ast.StringValue:
		return x.Value
	case *ast.BooleanValue:
		return x.Value
	case *ast.IntValue:
		var n json.Number = json.Number(x.Value)
		f, _ := n.Float64()
		return f
	case *ast.FloatValue:
		f, _ := json.Number(x.Value).Float64()
		return f
	case *ast.EnumValue:
		return x.Value
	case *ast.ListValue:
		out := make([]any, len(x.Values))
		for i, e := range x.Values {
			out[i] = parseLiteral(e)
		}
		return out
	case *ast.ObjectValue:
		out := map[string]any{}
		for _, f := range x.Fields {
			out[f.Name.Value] = parseLiteral(f.Value)
		}
		return out
	}
	return nil
}

// descriptions of the fixture tools, by name.
func descriptions() map[string]string {
	out := map[string]string{}
	for _, t := range fixture.Tools() {
		out[t.Name] = t.Description
	}
	return out
}

// Schema returns the fixture schema (see SDL) backed by f.
func Schema(f *fixture.Fixture) (graphql.Schema, error) {
	desc := descriptions()
	call := func(name string) graphql.FieldResolveFn {
		return func(p graphql.ResolveParams) (any, error) {
			ctx := p.Context
			if ctx == nil {
				ctx = context.Background()
			}
			args := map[string]any{}
			for k, v := range p.Args {
				if v != nil {
					args[k] = v
				}
			}
			v, err := f.Call(ctx, name, args)
			var failure *fixture.Failure
			if errors.As(err, &failure) {
				return nil, errors.New(failure.Message)
			}
			return v, err
		}
	}
	addResult := graphql.NewObject(graphql.ObjectConfig{Name: "AddResult", Fields: graphql.Fields{
		"sum": {Type: graphql.NewNonNull(graphql.Float), Description: "a + b"},
	}})
	sleepResult := graphql.NewObject(graphql.ObjectConfig{Name: "SleepResult", Fields: graphql.Fields{
		"slept_ms": {Type: graphql.NewNonNull(graphql.Int), Description: "how long the call slept"},
	}})
	query := graphql.NewObject(graphql.ObjectConfig{Name: "Query", Fields: graphql.Fields{
		"echo": {Type: JSON, Description: desc[fixture.Echo], Resolve: call(fixture.Echo), Args: graphql.FieldConfigArgument{
			"text":  {Type: graphql.String},
			"obj":   {Type: JSON},
			"blob":  {Type: graphql.String},
			"value": {Type: JSON},
			"x":     {Type: JSON},
		}},
		"add": {Type: graphql.NewNonNull(addResult), Description: desc[fixture.Add], Resolve: call(fixture.Add), Args: graphql.FieldConfigArgument{
			"a": {Type: graphql.NewNonNull(graphql.Float)},
			"b": {Type: graphql.NewNonNull(graphql.Float)},
		}},
		"sleep": {Type: graphql.NewNonNull(sleepResult), Description: desc[fixture.Sleep], Resolve: call(fixture.Sleep), Args: graphql.FieldConfigArgument{
			"ms": {Type: graphql.NewNonNull(graphql.Int)},
		}},
	}})
	mutation := graphql.NewObject(graphql.ObjectConfig{Name: "Mutation", Fields: graphql.Fields{
		"fail": {Type: JSON, Description: desc[fixture.Fail], Resolve: call(fixture.Fail), Args: graphql.FieldConfigArgument{
			"message": {Type: graphql.String},
		}},
	}})
	subscription := graphql.NewObject(graphql.ObjectConfig{Name: "Subscription", Fields: graphql.Fields{
		"count": {
			Type:        graphql.NewNonNull(graphql.Int),
			Description: desc[fixture.Count],
			Args: graphql.FieldConfigArgument{
				"n":        {Type: graphql.NewNonNull(graphql.Int)},
				"delay_ms": {Type: graphql.Int},
			},
			Resolve: func(p graphql.ResolveParams) (any, error) { return p.Source, nil },
			Subscribe: func(p graphql.ResolveParams) (any, error) {
				ctx := p.Context
				ch := make(chan any)
				go func() {
					defer close(ch)
					_ = f.Stream(ctx, fixture.Count, p.Args, func(v any) error {
						select {
						case ch <- v:
							return nil
						case <-ctx.Done():
							return ctx.Err()
						}
					})
				}()
				return ch, nil
			},
		},
	}})
	return graphql.NewSchema(graphql.SchemaConfig{Query: query, Mutation: mutation, Subscription: subscription, Types: []graphql.Type{JSON}})
}

// Server serves a GraphQL schema over HTTP and graphql-transport-ws. It
// is safe for concurrent use.
type Server struct {
	schema graphql.Schema
	opts   Options
	up     websocket.Upgrader
	subs   atomic.Int64

	mu    sync.Mutex
	conns map[*websocket.Conn]struct{}
}

// New returns a Server of f's tools. It panics if the fixture schema does
// not build (a bug).
func New(f *fixture.Fixture, opts Options) *Server {
	s, err := Schema(f)
	if err != nil {
		panic(err)
	}
	return NewWithSchema(s, opts)
}

// NewWithSchema returns a Server of any schema, for tests that need other
// shapes than the fixture tools.
func NewWithSchema(schema graphql.Schema, opts Options) *Server {
	if opts.MaxBodyBytes == 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.InitTimeout == 0 {
		opts.InitTimeout = 10 * time.Second
	}
	return &Server{
		schema: schema,
		opts:   opts,
		up: websocket.Upgrader{
			Subprotocols: []string{Subprotocol},
			// Tools are called by daemons, not browsers: no origin to check.
			CheckOrigin: func(*http.Request) bool { return true },
		},
		conns: map[*websocket.Conn]struct{}{},
	}
}

// Handler returns the server's routes.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/graphql", s.serveHTTP)
	return mux
}

// NewServer returns an *http.Server for addr serving New(f, opts).
func NewServer(addr string, f *fixture.Fixture, opts Options) *http.Server {
	return &http.Server{Addr: addr, Handler: New(f, opts).Handler(), ReadHeaderTimeout: 10 * time.Second}
}

// Subscriptions returns how many subscribe messages the server accepted.
func (s *Server) Subscriptions() int64 { return s.subs.Load() }

// DropConnections breaks every open WebSocket connection at once, without
// a close frame, and returns how many it broke.
func (s *Server) DropConnections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		_ = c.NetConn().Close()
	}
	return len(s.conns)
}

// Request is a GraphQL request as POSTed or sent in a subscribe message.
type Request struct {
	Query         string         `json:"query"`
	Variables     map[string]any `json:"variables"`
	OperationName string         `json:"operationName"`
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if websocket.IsWebSocketUpgrade(r) {
		s.serveWS(w, r)
		return
	}
	var req Request
	switch r.Method {
	case http.MethodPost:
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes))
		if err != nil {
			writeJSON(w, http.StatusRequestEntityTooLarge, errorsResult("request body too large"))
			return
		}
		if err := json.Unmarshal(body, &req); err != nil || req.Query == "" {
			writeJSON(w, http.StatusBadRequest, errorsResult("the body must be a JSON object with a query"))
			return
		}
	case http.MethodGet:
		q := r.URL.Query()
		req.Query, req.OperationName = q.Get("query"), q.Get("operationName")
		if v := q.Get("variables"); v != "" {
			if err := json.Unmarshal([]byte(v), &req.Variables); err != nil {
				writeJSON(w, http.StatusBadRequest, errorsResult("variables is not a JSON object"))
				return
			}
		}
		if req.Query == "" {
			writeJSON(w, http.StatusBadRequest, errorsResult("no query"))
			return
		}
	default:
		w.Header().Set("Allow", "GET, POST")
		writeJSON(w, http.StatusMethodNotAllowed, errorsResult("use GET or POST"))
		return
	}
	writeJSON(w, http.StatusOK, s.execute(r.Context(), &req))
}

func errorsResult(msg string) *graphql.Result {
	return &graphql.Result{Errors: []gqlerrors.FormattedError{{Message: msg}}}
}

// introspects reports whether a document asks for the schema.
func introspects(query string) bool {
	return strings.Contains(query, "__schema") || strings.Contains(query, "__type")
}

// execute runs a query or mutation.
func (s *Server) execute(ctx context.Context, req *Request) *graphql.Result {
	if s.opts.DisableIntrospection && introspects(req.Query) {
		return errorsResult("GraphQL introspection is not allowed by this server")
	}
	return graphql.Do(graphql.Params{
		Schema:         s.schema,
		RequestString:  req.Query,
		VariableValues: req.Variables,
		OperationName:  req.OperationName,
		Context:        ctx,
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = json.Marshal(errorsResult("cannot encode the result: " + err.Error()))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// message is one graphql-transport-ws message.
type message struct {
	ID      string          `json:"id,omitempty"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// session is one WebSocket connection.
type session struct {
	s       *Server
	ws      *websocket.Conn
	writeMu sync.Mutex

	mu    sync.Mutex
	ops   map[string]context.CancelFunc
	acked bool
}

func (s *Server) serveWS(w http.ResponseWriter, r *http.Request) {
	if !containsToken(websocket.Subprotocols(r), Subprotocol) {
		http.Error(w, "this endpoint speaks the graphql-transport-ws subprotocol only", http.StatusBadRequest)
		return
	}
	ws, err := s.up.Upgrade(w, r, nil)
	if err != nil {
		return // Upgrade has answered the client
	}
	s.mu.Lock()
	s.conns[ws] = struct{}{}
	s.mu.Unlock()
	ws.SetReadLimit(s.opts.MaxBodyBytes)
	ctx, cancel := context.WithCancel(context.Background())
	sess := &session{s: s, ws: ws, ops: map[string]context.CancelFunc{}}
	var wg sync.WaitGroup
	defer func() {
		cancel() // the connection is gone: stop its operations
		wg.Wait()
		ws.Close()
		s.mu.Lock()
		delete(s.conns, ws)
		s.mu.Unlock()
	}()
	initTimer := time.AfterFunc(s.opts.InitTimeout, func() {
		sess.mu.Lock()
		acked := sess.acked
		sess.mu.Unlock()
		if !acked {
			sess.close(4408, "Connection initialisation timeout")
		}
	})
	defer initTimer.Stop()
	for {
		mt, data, err := ws.ReadMessage()
		if err != nil {
			return
		}
		var m message
		if mt != websocket.TextMessage || json.Unmarshal(data, &m) != nil || m.Type == "" {
			sess.close(4400, "Invalid message received")
			return
		}
		sess.mu.Lock()
		acked := sess.acked
		sess.mu.Unlock()
		switch m.Type {
		case "connection_init":
			if acked {
				sess.close(4429, "Too many initialisation requests")
				return
			}
			sess.mu.Lock()
			sess.acked = true
			sess.mu.Unlock()
			_ = sess.send(message{Type: "connection_ack"})
		case "ping":
			_ = sess.send(message{Type: "pong"})
		case "pong":
		case "subscribe":
			if !acked {
				sess.close(4401, "Unauthorized")
				return
			}
			var req Request
			if m.ID == "" || json.Unmarshal(m.Payload, &req) != nil || req.Query == "" {
				sess.close(4400, "Invalid subscribe message")
				return
			}
			sess.mu.Lock()
			if _, dup := sess.ops[m.ID]; dup {
				sess.mu.Unlock()
				sess.close(4409, "Subscriber for "+m.ID+" already exists")
				return
			}
			octx, stop := context.WithCancel(ctx)
			sess.ops[m.ID] = stop
			sess.mu.Unlock()
			s.subs.Add(1)
			wg.Go(func() {
				defer func() {
					stop()
					sess.mu.Lock()
					delete(sess.ops, m.ID)
					sess.mu.Unlock()
				}()
				sess.run(octx, m.ID, &req)
			})
		case "complete":
			sess.mu.Lock()
			if stop := sess.ops[m.ID]; stop != nil {
				stop()
			}
			sess.mu.Unlock()
		default:
			sess.close(4400, "Unknown message type "+m.Type)
			return
		}
	}
}

func containsToken(list []string, want string) bool {
	for _, v := range list {
		if v == want {
			return true
		}
	}
	return false
}

// run carries out one operation: a subscription streams next messages,
// a query or mutation sends one; then complete, unless the client stopped
// it. Errors before execution (a document that does not parse or
// validate) are an error message.
func (sess *session) run(ctx context.Context, id string, req *Request) {
	s := sess.s
	if s.opts.DisableIntrospection && introspects(req.Query) {
		sess.sendErrors(id, errorsResult("GraphQL introspection is not allowed by this server").Errors)
		return
	}
	doc, err := parser.Parse(parser.ParseParams{Source: req.Query})
	if err != nil {
		sess.sendErrors(id, []gqlerrors.FormattedError{{Message: err.Error()}})
		return
	}
	if !isSubscription(doc, req.OperationName) {
		res := s.execute(ctx, req)
		if ctx.Err() != nil {
			return
		}
		if len(res.Errors) > 0 && res.Data == nil {
			sess.sendErrors(id, res.Errors)
			return
		}
		sess.sendResult(id, res)
		_ = sess.send(message{ID: id, Type: "complete"})
		return
	}
	results := graphql.Subscribe(graphql.Params{
		Schema:         s.schema,
		RequestString:  req.Query,
		VariableValues: req.Variables,
		OperationName:  req.OperationName,
		Context:        ctx,
	})
	first := true
	for res := range results {
		// Keep draining after cancellation: the executor blocks on this
		// channel until it sees the cancelled context.
		if ctx.Err() != nil {
			continue
		}
		if first && len(res.Errors) > 0 && res.Data == nil {
			sess.sendErrors(id, res.Errors)
			for range results {
			}
			return
		}
		first = false
		sess.sendResult(id, res)
	}
	if ctx.Err() == nil {
		_ = sess.send(message{ID: id, Type: "complete"})
	}
}

// isSubscription reports whether the operation a request runs is a
// subscription.
func isSubscription(doc *ast.Document, opName string) bool {
	for _, d := range doc.Definitions {
		op, ok := d.(*ast.OperationDefinition)
		if !ok {
			continue
		}
		if opName == "" || op.Name != nil && op.Name.Value == opName {
			return op.Operation == ast.OperationTypeSubscription
		}
	}
	return false
}

func (sess *session) sendResult(id string, res *graphql.Result) {
	b, _ := json.Marshal(res)
	_ = sess.send(message{ID: id, Type: "next", Payload: b})
}

func (sess *session) sendErrors(id string, errs []gqlerrors.FormattedError) {
	b, _ := json.Marshal(errs)
	_ = sess.send(message{ID: id, Type: "error", Payload: b})
}

// send writes one message.
func (sess *session) send(m message) error {
	b, _ := json.Marshal(m)
	sess.writeMu.Lock()
	defer sess.writeMu.Unlock()
	_ = sess.ws.SetWriteDeadline(time.Now().Add(10 * time.Second))
	return sess.ws.WriteMessage(websocket.TextMessage, b)
}

// close ends the connection with a graphql-transport-ws close code.
func (sess *session) close(code int, reason string) {
	_ = sess.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, reason), time.Now().Add(time.Second))
	_ = sess.ws.Close()
}
