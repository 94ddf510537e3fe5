package websocketserver

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/utcpd/utcpd/transports/transporttest/fixture"
)

// This file is the plain side of the server, python-utcp's websocket
// protocol: no ids, one call at a time per connection, the tool named by
// the URL (see the package documentation).

// plainError is an error frame of the plain endpoints: the envelope's
// error frame without an id.
type plainError struct {
	Type  string    `json:"type"`
	Error wireError `json:"error"`
}

// servePlainDiscovery answers every frame of type "utcp" with the bare
// plain manual, and anything else with an invalid_request error frame.
func (s *Server) servePlainDiscovery(w http.ResponseWriter, r *http.Request) {
	s.serveConn(w, r, func(ws *websocket.Conn) onFrame {
		p := &plainConn{ws: ws}
		return func(_ context.Context, _ func(func()), mt int, data []byte) {
			var req struct {
				Type string `json:"type"`
			}
			if mt != websocket.TextMessage || json.Unmarshal(data, &req) != nil || req.Type != "utcp" {
				p.fail("invalid_request", `this endpoint answers {"type":"utcp"} with the manual; call the tools at /plain/{tool}`)
				return
			}
			_ = p.send(PlainManual(wsBase(r), s.opts))
		}
	})
}

// servePlainTool runs the tool of the path for each text frame, its
// arguments; the connection closing cancels the call in progress.
func (s *Server) servePlainTool(w http.ResponseWriter, r *http.Request) {
	tool := r.PathValue("tool")
	s.serveConn(w, r, func(ws *websocket.Conn) onFrame {
		p := &plainConn{ws: ws}
		return func(ctx context.Context, goCall func(func()), mt int, data []byte) {
			var args map[string]any
			if mt != websocket.TextMessage || json.Unmarshal(data, &args) != nil {
				p.fail("invalid_request", "expected the arguments as a JSON object in a text frame")
				return
			}
			goCall(func() { s.runPlain(ctx, p, tool, orEmpty(args)) })
		}
	})
}

// runPlain carries out one plain call: the result as one frame, or
// count's numbers one frame each and then a normal close.
func (s *Server) runPlain(ctx context.Context, p *plainConn, tool string, args map[string]any) {
	var err error
	if tool == fixture.Count {
		err = s.f.Stream(ctx, tool, args, func(v any) error { return p.send(v) })
		if err == nil {
			p.closeNormally()
			return
		}
	} else {
		var v any
		if v, err = s.f.Call(ctx, tool, args); err == nil {
			err = p.send(v)
		}
	}
	var failure *fixture.Failure
	switch {
	case err == nil, ctx.Err() != nil:
	case errors.As(err, &failure):
		p.fail("tool_error", failure.Message)
	case errors.Is(err, fixture.ErrUnknownTool):
		p.fail("tool_not_found", err.Error())
	default:
		p.fail("invalid_arguments", err.Error())
	}
}

// plainConn writes the frames of one plain connection.
type plainConn struct {
	ws      *websocket.Conn
	writeMu sync.Mutex
}

// send writes v as one JSON text frame.
func (p *plainConn) send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(plainError{Type: "error", Error: wireError{Code: "tool_error", Message: "cannot encode the result: " + err.Error()}})
	}
	p.writeMu.Lock()
	defer p.writeMu.Unlock()
	_ = p.ws.SetWriteDeadline(time.Now().Add(10 * time.Second))
	return p.ws.WriteMessage(websocket.TextMessage, b)
}

// fail writes an error frame.
func (p *plainConn) fail(code, message string) {
	_ = p.send(plainError{Type: "error", Error: wireError{Code: code, Message: message}})
}

// closeNormally ends the connection with a normal close frame (1000),
// the end of a plain stream; the read loop then ends.
func (p *plainConn) closeNormally() {
	p.writeMu.Lock()
	defer p.writeMu.Unlock()
	_ = p.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, "stream complete"), time.Now().Add(time.Second))
	_ = p.ws.NetConn().Close()
}
