// Package httpdemo holds what the streaming HTTP demo servers (sseserver,
// streamablehttpserver) share: the http.Server they run, the fixture
// manual they serve, JSON answers, and the streaming of count.
package httpdemo

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/utcpd/utcpd/examples/servers/http/httpserver"
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
	"github.com/utcpd/utcpd/utcp"
)

// NewServer returns an *http.Server for addr serving h, with
// httpserver.MaxHeaderBytes, a 10 s read-header timeout and a 2 min idle
// timeout. It sets no write timeout: streams may last.
func NewServer(addr string, h http.Handler) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           h,
		MaxHeaderBytes:    httpserver.MaxHeaderBytes,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
}

// BaseURL returns scheme://host of r as the client addressed it.
func BaseURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// Manual returns the fixture manual whose tool templates are named name,
// of call_template_type typ, with url baseURL + "/tools/" + tool, the
// fields of extra, and "allow_insecure": true when allowInsecure is set.
func Manual(baseURL, name, typ string, allowInsecure bool, extra map[string]any) *utcp.Manual {
	return fixture.Manual(func(tool string) *utcp.CallTemplate {
		fields := map[string]any{
			"name":               name,
			"call_template_type": typ,
			"url":                baseURL + "/tools/" + tool,
		}
		for k, v := range extra {
			fields[k] = v
		}
		if allowInsecure {
			fields["allow_insecure"] = true
		}
		raw, _ := json.Marshal(fields)
		return &utcp.CallTemplate{Name: name, Type: typ, Raw: raw}
	})
}

// Call runs tool name of f with args and answers with one JSON document:
// 200 with the result, else as WriteError.
func Call(w http.ResponseWriter, r *http.Request, f *fixture.Fixture, name string, args map[string]any) {
	v, err := f.Call(r.Context(), name, args)
	if err != nil {
		WriteError(w, err)
		return
	}
	WriteJSON(w, http.StatusOK, v)
}

// Stream runs streaming tool name of f with args. Its values are
// numbered from 1; those numbered up to resume are not sent. Before the
// first value sent it answers 200 with Content-Type contentType,
// Cache-Control no-cache and X-Accel-Buffering no; each value, as JSON, is
// written as frame makes it and flushed at once. A tool with nothing to
// send gives an empty 200 stream; one that fails before anything is sent
// answers as WriteError, after that it breaks the connection
// (http.ErrAbortHandler) so the client sees the stream did not end
// cleanly.
func Stream(w http.ResponseWriter, r *http.Request, f *fixture.Fixture, name string, args map[string]any,
	contentType string, resume int, frame func(i int, data []byte) string) {
	rc := http.NewResponseController(w)
	started := false
	start := func() {
		h := w.Header()
		h.Set("Content-Type", contentType)
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no")
		w.WriteHeader(http.StatusOK)
		started = true
	}
	i := 0
	err := f.Stream(r.Context(), name, args, func(v any) error {
		i++
		if i <= resume {
			return nil
		}
		if !started {
			start()
		}
		data, err := json.Marshal(v)
		if err != nil {
			return err
		}
		if _, err := io.WriteString(w, frame(i, data)); err != nil {
			return err
		}
		return rc.Flush()
	})
	switch {
	case err == nil && !started:
		start() // nothing sent: an empty stream
	case err == nil:
	case !started:
		WriteError(w, err)
	default:
		// Too late for a status: break the connection so the client sees
		// the stream did not end cleanly.
		panic(http.ErrAbortHandler)
	}
}

// WriteError answers a failed call: 422 {"error": message} for a tool
// failure, 404 {"error": ...} for an unknown tool, a bare 503 when the
// client went away, and 400 {"error": ...} otherwise (a bad argument).
func WriteError(w http.ResponseWriter, err error) {
	var failure *fixture.Failure
	switch {
	case errors.As(err, &failure):
		WriteJSON(w, http.StatusUnprocessableEntity, map[string]any{"error": failure.Message})
	case errors.Is(err, fixture.ErrUnknownTool):
		WriteJSON(w, http.StatusNotFound, map[string]any{"error": err.Error()})
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		w.WriteHeader(http.StatusServiceUnavailable) // the client went away
	default:
		WriteJSON(w, http.StatusBadRequest, map[string]any{"error": err.Error()})
	}
}

// WriteJSON answers status with v as JSON, or 500 when v does not encode.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, `{"error":"cannot encode the result"}`, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
