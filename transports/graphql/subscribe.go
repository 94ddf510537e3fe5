package graphql

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/utcpd/utcpd/internal/jsonx"
	"github.com/utcpd/utcpd/internal/netguard"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/transports/internal/httpclient"
	"github.com/utcpd/utcpd/utcp"
)

// This file is the client side of the graphql-transport-ws protocol
// (the GraphQL over WebSocket protocol of the graphql-ws library), used
// for subscriptions: one connection per subscription.

// Subprotocol is the WebSocket subprotocol of graphql-transport-ws.
const Subprotocol = "graphql-transport-ws"

// The message types of graphql-transport-ws.
const (
	MsgConnectionInit = "connection_init" // client → server, first
	MsgConnectionAck  = "connection_ack"  // server → client, answers connection_init
	MsgPing           = "ping"            // either way
	MsgPong           = "pong"            // either way, answers ping
	MsgSubscribe      = "subscribe"       // client → server: {id, payload: {query, variables, operationName}}
	MsgNext           = "next"            // server → client: {id, payload: an execution result}
	MsgError          = "error"           // server → client: {id, payload: [GraphQL errors]}; ends the operation
	MsgComplete       = "complete"        // either way: the operation is over (client: stop it)
)

// Message is one graphql-transport-ws message.
type Message struct {
	// ID names the operation (subscribe, next, error, complete).
	ID string `json:"id,omitempty"`
	// Type is one of the Msg* constants.
	Type string `json:"type"`
	// Payload is the message's content, if any.
	Payload json.RawMessage `json:"payload,omitempty"`
}

// controlTimeout bounds the writes of control messages (complete, pong,
// close).
const controlTimeout = time.Second

// subID is the id of the one operation a connection carries.
const subID = "1"

// subStream is one subscription: its connection, and the messages its
// reader hands over. It is the transports.Stream of CallToolStream.
type subStream struct {
	t    *Transport
	ws   *websocket.Conn
	url  string
	key  string      // the key of data that is an event's value ("" : see result)
	stop func() bool // guarded by mu

	writeMu sync.Mutex

	msgs    chan *Message
	closing chan struct{} // closed when the stream starts closing
	done    chan struct{} // closed when the reader has ended

	mu        sync.Mutex
	err       error // sticky: io.EOF or what ended the stream
	readErr   error // why the reader ended
	finished  bool  // the server ended the operation (complete or error)
	closeOnce sync.Once
}

// subscribe opens a connection for one subscription: the handshake with
// subprotocol graphql-transport-ws, headers and auth; connection_init up
// to connection_ack; then subscribe.
func (t *Transport) subscribe(ctx context.Context, spec *Template, auth *utcp.Auth, p *callPlan) (*subStream, error) {
	u, err := spec.subscriptionURL()
	if err != nil {
		return nil, err
	}
	redacted := utcp.RedactURL(u)
	hs := spec.timeout()
	if hs == 0 {
		hs = DefaultTimeout
	}
	hctx, cancel := context.WithTimeout(ctx, hs)
	defer cancel()
	req, err := http.NewRequestWithContext(hctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, utcp.Errorf(utcp.CodeInvalidTemplate, "graphql: subscription url: %w", err)
	}
	for k, v := range spec.Headers {
		req.Header.Set(k, v)
	}
	for k, v := range p.headers {
		req.Header[k] = v
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", "utcpd")
	}
	if err := httpclient.ApplyAuth(hctx, req, auth, t.tokens); err != nil {
		return nil, err
	}
	d := websocket.Dialer{
		Proxy:            http.ProxyFromEnvironment,
		HandshakeTimeout: hs,
		Subprotocols:     []string{Subprotocol},
		NetDialContext:   netguard.DialContext(&net.Dialer{KeepAlive: 30 * time.Second}),
	}
	ws, resp, err := d.DialContext(hctx, req.URL.String(), req.Header)
	if err != nil {
		if hctx.Err() != nil {
			return nil, fmt.Errorf("graphql subscription %s: %w", redacted, context.Cause(hctx))
		}
		if resp != nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
			return nil, &utcp.TransportError{Status: resp.StatusCode,
				Err: fmt.Errorf("graphql subscription: the WebSocket handshake with %s was refused: HTTP %d %s: %s", redacted, resp.StatusCode, http.StatusText(resp.StatusCode), jsonx.Excerpt(body))}
		}
		return nil, &utcp.TransportError{Err: fmt.Errorf("graphql subscription %s: %w", redacted, err)}
	}
	fail := func(err error) (*subStream, error) {
		_ = ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(controlTimeout))
		ws.Close()
		return nil, err
	}
	if ws.Subprotocol() != Subprotocol {
		return fail(&utcp.TransportError{Err: fmt.Errorf("graphql subscription %s: the server did not select the WebSocket subprotocol %q (it selected %q): it does not speak graphql-transport-ws", redacted, Subprotocol, ws.Subprotocol())})
	}
	ws.SetReadLimit(t.cfg.MaxMessageBytes)
	stopHandshake := context.AfterFunc(hctx, func() { _ = ws.SetReadDeadline(time.Now()) })
	ackErr := func() error {
		_ = ws.SetWriteDeadline(time.Now().Add(hs))
		if err := ws.WriteJSON(Message{Type: MsgConnectionInit, Payload: json.RawMessage(`{}`)}); err != nil {
			return err
		}
		for {
			var m Message
			if err := readMessage(ws, &m); err != nil {
				return err
			}
			switch m.Type {
			case MsgConnectionAck:
				return nil
			case MsgPing:
				if err := ws.WriteJSON(Message{Type: MsgPong}); err != nil {
					return err
				}
			case MsgPong:
			default:
				return fmt.Errorf("the server answered connection_init with %q, not connection_ack", m.Type)
			}
		}
	}()
	if !stopHandshake() || hctx.Err() != nil {
		return fail(fmt.Errorf("graphql subscription %s: waiting for connection_ack: %w", redacted, context.Cause(hctx)))
	}
	if ackErr != nil {
		return fail(t.wsError(redacted, ackErr))
	}
	_ = ws.SetReadDeadline(time.Time{})
	payload := map[string]any{"query": p.op.document, "variables": p.vars}
	if p.opName != "" {
		payload["operationName"] = p.opName
	}
	pb, err := jsonx.Marshal(payload)
	if err != nil {
		return fail(utcp.Errorf(utcp.CodeInvalidArguments, "graphql: cannot encode the variables: %w", err))
	}
	if err := ws.WriteJSON(Message{ID: subID, Type: MsgSubscribe, Payload: pb}); err != nil {
		return fail(t.wsError(redacted, err))
	}
	_ = ws.SetWriteDeadline(time.Time{})
	s := &subStream{
		t:       t,
		ws:      ws,
		url:     redacted,
		key:     p.key,
		msgs:    make(chan *Message, 64),
		closing: make(chan struct{}),
		done:    make(chan struct{}),
	}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return fail(errClosed)
	}
	t.streams[s] = struct{}{}
	t.wg.Add(1)
	go s.readLoop()
	t.mu.Unlock()
	stop := context.AfterFunc(ctx, func() { s.shut(fmt.Errorf("graphql subscription %s: %w", redacted, context.Cause(ctx))) })
	s.mu.Lock()
	s.stop = stop
	s.mu.Unlock()
	return s, nil
}

// readMessage reads one message, refusing binary and malformed frames.
func readMessage(ws *websocket.Conn, m *Message) error {
	mt, data, err := ws.ReadMessage()
	if err != nil {
		return err
	}
	if mt != websocket.TextMessage {
		return errors.New("a binary frame arrived; graphql-transport-ws sends JSON text")
	}
	if err := json.Unmarshal(data, m); err != nil || m.Type == "" {
		return fmt.Errorf("a frame is not a graphql-transport-ws message: %s", jsonx.Excerpt(data))
	}
	return nil
}

// wsError turns a connection error into the error callers see.
func (t *Transport) wsError(url string, err error) error {
	var ce *websocket.CloseError
	switch {
	case errors.Is(err, websocket.ErrReadLimit):
		return utcp.Errorf(utcp.CodePayloadTooLarge, "graphql subscription %s: a message is larger than %d bytes: %w", url, t.cfg.MaxMessageBytes, transports.ErrTooLarge).
			WithDetail("limit_bytes", t.cfg.MaxMessageBytes)
	case errors.As(err, &ce):
		return &utcp.TransportError{Err: fmt.Errorf("graphql subscription %s: the server closed the connection (%d %s)", url, ce.Code, ce.Text)}
	}
	return &utcp.TransportError{Err: fmt.Errorf("graphql subscription %s: %w", url, err)}
}

// readLoop reads messages, answers pings, and hands next, error and
// complete messages of the subscription to the stream, until the
// connection ends.
func (s *subStream) readLoop() {
	defer s.t.wg.Done()
	defer close(s.done)
	for {
		var m Message
		err := readMessage(s.ws, &m)
		if err == nil {
			switch m.Type {
			case MsgPing:
				err = s.write(Message{Type: MsgPong})
			case MsgPong:
			case MsgNext, MsgError, MsgComplete:
				if m.ID != subID {
					continue
				}
				select {
				case s.msgs <- &m:
				case <-s.closing:
					return
				}
				continue
			default:
				err = fmt.Errorf("the server sent an unexpected %q message", m.Type)
			}
		}
		if err != nil {
			s.mu.Lock()
			s.readErr = s.t.wsError(s.url, err)
			s.mu.Unlock()
			s.ws.Close()
			return
		}
	}
}

// write sends one message.
func (s *subStream) write(m Message) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	_ = s.ws.SetWriteDeadline(time.Now().Add(controlTimeout))
	return s.ws.WriteJSON(m)
}

// next returns the next event and the size of its message, io.EOF after
// complete, or the error that ended the subscription.
func (s *subStream) next() (*utcp.Event, int, error) {
	s.mu.Lock()
	if s.err != nil {
		err := s.err
		s.mu.Unlock()
		return nil, 0, err
	}
	s.mu.Unlock()
	var m *Message
	select {
	case m = <-s.msgs:
	case <-s.closing:
		return nil, 0, s.end(nil)
	case <-s.done:
		select {
		case m = <-s.msgs:
		default:
			s.mu.Lock()
			err := s.readErr
			s.mu.Unlock()
			if err == nil {
				err = &utcp.TransportError{Err: fmt.Errorf("graphql subscription %s: connection closed", s.url)}
			}
			return nil, 0, s.end(err)
		}
	}
	switch m.Type {
	case MsgComplete:
		s.markFinished()
		return nil, 0, s.end(io.EOF)
	case MsgError:
		s.markFinished()
		var errs []any
		if v, ok := jsonx.DecodeValue(m.Payload); ok {
			if list, ok := v.([]any); ok {
				errs = list
			} else if v != nil {
				errs = []any{v}
			}
		}
		if len(errs) == 0 {
			errs = []any{map[string]any{"message": "the server ended the subscription with an error"}}
		}
		return nil, 0, s.end(gqlError(errs, nil, 0, s.key))
	}
	r := &response{body: m.Payload}
	r.decode()
	if !r.graphql {
		return nil, 0, s.end(&utcp.TransportError{Err: fmt.Errorf("graphql subscription %s: a next message's payload is not an execution result: %s", s.url, jsonx.Excerpt(m.Payload))})
	}
	if r.errs != nil {
		var data any
		if r.data != nil {
			data, _ = jsonx.DecodeValue(r.data)
		}
		return nil, 0, s.end(gqlError(r.errs, data, 0, s.key))
	}
	return &utcp.Event{Data: result(r.data, s.key)}, len(m.Payload), nil
}

func (s *subStream) markFinished() {
	s.mu.Lock()
	s.finished = true
	s.mu.Unlock()
}

// end records err as what ended the stream unless something did already,
// and returns the sticky error. A nil err keeps what shut recorded.
func (s *subStream) end(err error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = err
	}
	if s.err == nil {
		s.err = utcp.NewError(utcp.CodeCanceled, "graphql subscription %s: stream closed", s.url)
	}
	return s.err
}

// Recv returns the next event, io.EOF after the server completed the
// subscription, or the error that ended it.
func (s *subStream) Recv() (*utcp.Event, error) {
	ev, _, err := s.next()
	if err != nil {
		s.Close()
	}
	return ev, err
}

// Close ends the subscription: when the server has not ended it, it sends
// complete; then it closes the connection and waits for the reader. It is
// idempotent.
func (s *subStream) Close() error {
	s.shut(nil)
	return nil
}

// shut is Close recording why (nil: the caller closed the stream).
func (s *subStream) shut(why error) {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		if s.stop != nil {
			s.stop()
		}
		if s.err == nil && why != nil {
			s.err = why
		}
		finished := s.finished
		s.mu.Unlock()
		close(s.closing)
		if !finished {
			_ = s.write(Message{ID: subID, Type: MsgComplete})
		}
		_ = s.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(controlTimeout))
		s.ws.Close()
		<-s.done
		s.t.mu.Lock()
		delete(s.t.streams, s)
		s.t.mu.Unlock()
	})
}
