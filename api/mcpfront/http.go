package mcpfront

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/utcpd/utcpd/api/httpx"
	"github.com/utcpd/utcpd/utcp"
)

// Header names the front reads.
const (
	headerProtocolVersion = "Mcp-Protocol-Version"
	headerSessionID       = "Mcp-Session-Id"
	headerMethod          = "Mcp-Method"
)

// firstStatelessVersion is the first protocol revision served
// statelessly (SEP-2575).
const firstStatelessVersion = "2026-07-28"

// corsAllowHeaders are the request headers a browser client may send.
const corsAllowHeaders = "Authorization, Content-Type, Accept, Last-Event-ID, Mcp-Session-Id, Mcp-Protocol-Version, Mcp-Method, Mcp-Name"

// initHTTP builds the SDK's two handlers and the auth bridge.
func (s *Server) initHTTP() {
	get := func(*http.Request) *mcp.Server { return s.mcp }
	idle := s.opts.SessionIdleTimeout
	if idle < 0 {
		idle = 0
	}
	sdkLog := s.log.With("component", "mcp-http")
	// The event store lets a 2025-11-25 client resume an interrupted SSE
	// stream (Last-Event-ID, with a priming event first); it keeps the
	// newest 10 MiB of events across sessions.
	s.stateful = mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{
		EventStore:          mcp.NewMemoryEventStore(nil),
		SessionTimeout:      idle,
		MaxRequestBodyBytes: s.opts.MaxBodyBytes,
		Logger:              sdkLog,
	})
	// The sessions whose client cannot be asked anything during a call
	// (jsonSession) get application/json answers: one write per POST, no
	// SSE framing, no priming event, nothing kept in the event store.
	s.jsonful = mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{
		JSONResponse: true,
		EventStore:   mcp.NewMemoryEventStore(nil), // the GET stream's events
		// The front closes idle JSON sessions itself (lean.go): the
		// SDK does not see the calls served on the lean path.
		MaxRequestBodyBytes: s.opts.MaxBodyBytes,
		Logger:              sdkLog,
	})
	s.stateless = mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{
		Stateless:                    true,
		MaxRequestBodyBytes:          s.opts.MaxBodyBytes,
		PropagateRequestCancellation: true,
		Logger:                       sdkLog,
	})
	// The SDK binds a session to the TokenInfo.UserID that opened it and
	// hands the TokenInfo to tool handlers: serveHTTP has checked the key
	// already, this only records its principal.
	verify := func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		k, ok := s.keys.MatchKey(token)
		if !ok {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: k.Name, Extra: map[string]any{extraKey: k}}, nil
	}
	s.authed = auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})
}

// Handler returns the Streamable HTTP endpoint (mount it at Path; it
// serves POST, GET, DELETE and OPTIONS, and refuses other methods with
// 405): Origin check and CORS, API-key
// check, session limit, then the SDK's handler for the request's
// protocol revision.
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serveHTTP) }

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodPost, http.MethodGet, http.MethodDelete, http.MethodOptions:
	default:
		w.Header().Set("Allow", "GET, POST, DELETE, OPTIONS")
		writeHTTPError(w, http.StatusMethodNotAllowed, utcp.CodeMethodNotAllowed, "Method Not Allowed: use POST, GET, DELETE or OPTIONS")
		return
	}
	if origin := r.Header.Get("Origin"); origin != "" {
		if !s.originAllowed(origin) {
			writeHTTPError(w, http.StatusForbidden, utcp.CodeForbidden,
				"Forbidden: origin "+strconv.Quote(origin)+" is not allowed (gateway.allowed_origins)")
			return
		}
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", origin)
		h.Set("Access-Control-Expose-Headers", "Mcp-Session-Id, Mcp-Protocol-Version, WWW-Authenticate")
		h.Add("Vary", "Origin")
		if r.Method == http.MethodOptions {
			h.Set("Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS")
			h.Set("Access-Control-Allow-Headers", corsAllowHeaders)
			h.Set("Access-Control-Max-Age", "600")
		}
	}
	if r.Method == http.MethodOptions {
		w.Header().Set("Allow", "GET, POST, DELETE, OPTIONS")
		w.WriteHeader(http.StatusNoContent)
		return
	}
	// What the SDK refuses (a body that is not JSON, a missing Accept, an
	// unknown session, ...) it writes as text/plain: make it a JSON-RPC
	// error object, as the front's own refusals.
	jw := &jsonRefusals{ResponseWriter: w}
	defer jw.finish()
	w = jw
	if s.keys.Len() > 0 {
		tok, ok := httpx.BearerToken(r)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="utcpd"`)
			writeHTTPError(w, http.StatusUnauthorized, utcp.CodeUnauthorized, `Unauthorized: this endpoint needs "Authorization: Bearer <API key>"`)
			return
		}
		if _, ok := s.keys.Match(tok); !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="utcpd", error="invalid_token"`)
			writeHTTPError(w, http.StatusUnauthorized, utcp.CodeUnauthorized, "Unauthorized: the bearer token is not a valid API key")
			return
		}
		s.authed(http.HandlerFunc(s.route)).ServeHTTP(w, r)
		return
	}
	s.route(w, r)
}

// route hands r to the stateless handler (2026-07-28 and later) or the
// session handler, admitting new sessions and listen streams only below
// the limit.
func (s *Server) route(w http.ResponseWriter, r *http.Request) {
	if v := r.Header.Get(headerProtocolVersion); v >= firstStatelessVersion {
		if r.Method == http.MethodPost && r.Header.Get(headerMethod) == "subscriptions/listen" {
			if !s.admit(true) {
				s.refuseSession(w)
				return
			}
			defer s.release(true)
		}
		s.stateless.ServeHTTP(w, r)
		return
	}
	id := r.Header.Get(headerSessionID)
	if r.Method == http.MethodPost && id == "" {
		if !s.admit(false) {
			s.refuseSession(w)
			return
		}
		defer s.release(false)
		if s.jsonSession(r) {
			s.jsonful.ServeHTTP(w, r)
			if id := w.Header().Get(headerSessionID); id != "" {
				s.trackJSONSession(r, id)
				s.pruneJSONIDs()
			}
			return
		}
	}
	if id != "" {
		if v, ok := s.jsonIDs.Load(id); ok {
			// As the SDK's timer: a POST pauses the idle timer, a GET
			// stream does not.
			if e := v.(*jsonSessionInfo); r.Method == http.MethodPost {
				e.begin()
				defer e.end()
				if s.serveLean(w, r, e) {
					return
				}
			}
			s.jsonful.ServeHTTP(w, r)
			if r.Method == http.MethodDelete {
				s.pruneJSONIDs()
			}
			return
		}
	}
	s.stateful.ServeHTTP(w, r)
}

// jsonSession reports whether the POST r, which opens a session, is an
// initialize request whose client declares neither the sampling nor the
// elicitation capability: nothing can be asked of such a client during
// a call, so its session is served by the application/json handler. It
// reads the body (up to Options.MaxBodyBytes) and puts it back, whole,
// for the SDK. Anything else (a batch, a body that does not decode) is
// left to the SSE handler, which answers it as before.
func (s *Server) jsonSession(r *http.Request) bool {
	limit := s.opts.MaxBodyBytes
	if limit <= 0 {
		limit = 4 << 20
	}
	head, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(head), r.Body), r.Body}
	if err != nil || int64(len(head)) > limit {
		return false
	}
	var msg struct {
		Method string `json:"method"`
		Params struct {
			Capabilities map[string]json.RawMessage `json:"capabilities"`
		} `json:"params"`
	}
	if json.Unmarshal(head, &msg) != nil || msg.Method != "initialize" {
		return false
	}
	_, sampling := msg.Params.Capabilities["sampling"]
	_, elicitation := msg.Params.Capabilities["elicitation"]
	return !sampling && !elicitation
}

// pruneJSONIDs forgets the IDs of JSON sessions that have ended (closed
// by DELETE or idle): it runs when one opens or is deleted, so the set
// stays as large as the open sessions.
func (s *Server) pruneJSONIDs() {
	live := map[string]bool{}
	for ss := range s.mcp.Sessions() {
		if id := ss.ID(); id != "" {
			live[id] = true
		}
	}
	s.jsonIDs.Range(func(k, v any) bool {
		if !live[k.(string)] {
			s.jsonIDs.Delete(k)
			e := v.(*jsonSessionInfo)
			e.cancelAll()
			e.mu.Lock()
			if e.timer != nil {
				e.timer.Stop()
			}
			e.mu.Unlock()
		}
		return true
	})
}

// admit reserves room for a new session (or listen stream). A request
// still creating a session counts until its handler returns, although
// its session may already be open (counted twice for a moment), so at
// the limit admit waits briefly for such requests to finish before it
// refuses.
func (s *Server) admit(listen bool) bool {
	max := s.opts.MaxSessions
	deadline := time.Now().Add(admitWait)
	for {
		s.sessMu.Lock()
		if max <= 0 || s.openSessions()+s.admitting+s.listens < max {
			if listen {
				s.listens++
			} else {
				s.admitting++
			}
			s.sessMu.Unlock()
			return true
		}
		busy := s.admitting > 0
		s.sessMu.Unlock()
		if !busy || time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// admitWait bounds admit's wait for session-creating requests to end.
const admitWait = 250 * time.Millisecond

// release ends a reservation: a created session then counts among the
// server's sessions; a listen stream has ended.
func (s *Server) release(listen bool) {
	s.sessMu.Lock()
	defer s.sessMu.Unlock()
	if listen {
		s.listens--
	} else {
		s.admitting--
	}
}

// openSessions counts the server's sessions that have an id (stateful
// HTTP sessions; stateless requests use ephemeral sessions without one).
func (s *Server) openSessions() int {
	n := 0
	for ss := range s.mcp.Sessions() {
		if ss.ID() != "" {
			n++
		}
	}
	return n
}

// Sessions returns the number of open HTTP sessions and listen streams.
func (s *Server) Sessions() int {
	s.sessMu.Lock()
	defer s.sessMu.Unlock()
	return s.openSessions() + s.listens
}

func (s *Server) refuseSession(w http.ResponseWriter) {
	w.Header().Set("Retry-After", "10")
	writeHTTPError(w, http.StatusServiceUnavailable, utcp.CodeUnavailable,
		"Service Unavailable: too many open MCP sessions (limit "+strconv.Itoa(s.opts.MaxSessions)+"); end idle sessions or retry later")
}

// originAllowed reports whether a browser origin may use the endpoint:
// a loopback origin, or one of Options.AllowedOrigins.
func (s *Server) originAllowed(origin string) bool {
	o := normalOrigin(origin)
	if s.anyOrig || s.origins[o] {
		return true
	}
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return false
	}
	host := strings.TrimSuffix(u.Hostname(), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Refuse writes a refusal of the daemon's perimeter (api/httpx.Perimeter)
// as the MCP transport expects it: a JSON-RPC error object without an id,
// the utcpd code in its data, with the code's HTTP status.
func Refuse(w http.ResponseWriter, err *utcp.Error) {
	writeHTTPError(w, httpx.Status(err.Code), err.Code, http.StatusText(httpx.Status(err.Code))+": "+err.Message)
}

// writeHTTPError writes a JSON-RPC error without an id, as the MCP
// transport allows for HTTP-level refusals, with the utcpd code in data.
func writeHTTPError(w http.ResponseWriter, status int, code utcp.Code, message string) {
	writeRPCError(w, status, -32000, code, message)
}

// writeRPCError writes a JSON-RPC error of code rpc without an id, with
// the utcpd code in data and the HTTP status.
func writeRPCError(w http.ResponseWriter, status int, rpc int64, code utcp.Code, message string) {
	data, _ := json.Marshal(map[string]any{"code": code, "details": map[string]any{}})
	body, _ := json.Marshal(map[string]any{
		"jsonrpc": "2.0",
		"id":      nil,
		"error":   &jsonrpc.Error{Code: rpc, Message: message, Data: data},
	})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}

// maxRefusalBody caps the text of a refusal kept for its JSON-RPC form.
const maxRefusalBody = 4 << 10

// jsonRefusals is the ResponseWriter the SDK's handlers get: an error
// status written as text/plain (http.Error) is held back and written by
// finish as a JSON-RPC error object without an id, with the same status,
// the SDK's message, and the utcpd code in its data. Everything else
// passes through unchanged, streams included (Flush, Unwrap).
type jsonRefusals struct {
	http.ResponseWriter
	wrote   bool
	refusal int // the status of a held-back refusal, 0 if none
	body    []byte
}

func (j *jsonRefusals) WriteHeader(status int) {
	if j.wrote {
		return
	}
	j.wrote = true
	if status >= 400 && strings.HasPrefix(j.Header().Get("Content-Type"), "text/plain") {
		j.refusal = status
		return
	}
	j.ResponseWriter.WriteHeader(status)
}

func (j *jsonRefusals) Write(p []byte) (int, error) {
	if !j.wrote {
		j.WriteHeader(http.StatusOK)
	}
	if j.refusal != 0 {
		if room := maxRefusalBody - len(j.body); room > 0 {
			j.body = append(j.body, p[:min(len(p), room)]...)
		}
		return len(p), nil
	}
	return j.ResponseWriter.Write(p)
}

// Flush passes a stream's flush on; a held-back refusal is not flushed.
func (j *jsonRefusals) Flush() {
	if j.refusal != 0 {
		return
	}
	if f, ok := j.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (j *jsonRefusals) Unwrap() http.ResponseWriter { return j.ResponseWriter }

// finish writes a held-back refusal.
func (j *jsonRefusals) finish() {
	if j.refusal == 0 {
		return
	}
	msg := strings.TrimSpace(strings.ToValidUTF8(string(j.body), "\uFFFD"))
	code, rpc := refusalCode(j.refusal, msg)
	j.Header().Del("Content-Length")
	if msg == "" {
		msg = http.StatusText(j.refusal)
	}
	writeRPCError(j.ResponseWriter, j.refusal, rpc, code, msg)
}

// refusalCode maps a refusal of the SDK to the utcpd code and the
// JSON-RPC error code of its answer: a body that is not JSON is -32700
// (parse error), another bad request -32600 (invalid request), a
// session the server does not know -32001 (as MCP clients read it), a
// server failure -32603, the rest -32000 like the front's own refusals.
func refusalCode(status int, msg string) (utcp.Code, int64) {
	switch status {
	case http.StatusBadRequest:
		// "cannot unmarshal": valid JSON of the wrong shape.
		if strings.HasPrefix(msg, "malformed payload") && !strings.Contains(msg, "cannot unmarshal") {
			return utcp.CodeInvalidRequest, jsonrpc.CodeParseError
		}
		return utcp.CodeInvalidRequest, jsonrpc.CodeInvalidRequest
	case http.StatusNotFound:
		return utcp.CodeNotFound, -32001
	case http.StatusUnauthorized:
		return utcp.CodeUnauthorized, -32000
	case http.StatusForbidden:
		return utcp.CodeForbidden, -32000
	case http.StatusMethodNotAllowed:
		return utcp.CodeMethodNotAllowed, -32000
	case http.StatusRequestEntityTooLarge:
		return utcp.CodePayloadTooLarge, -32000
	case http.StatusUnsupportedMediaType:
		return utcp.CodeUnsupportedMediaType, -32600
	}
	if status >= 500 {
		return utcp.CodeInternal, jsonrpc.CodeInternalError
	}
	return utcp.CodeInvalidRequest, jsonrpc.CodeInvalidRequest
}
