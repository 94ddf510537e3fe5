package httpx

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"github.com/utcpd/utcpd/utcp"
)

// DefaultMaxBodyBytes is the request body limit used when none is
// configured: 4 MiB.
const DefaultMaxBodyBytes int64 = 4 << 20

// maxPooled is the largest buffer returned to the pool; bigger ones are
// left to the garbage collector so one huge body does not pin memory.
const maxPooled = 64 << 10

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// GetBuffer returns an empty buffer from a shared pool. Return it with
// PutBuffer when done, and do not keep slices of its bytes after that.
func GetBuffer() *bytes.Buffer { return bufPool.Get().(*bytes.Buffer) }

// PutBuffer resets b and returns it to the pool (unless it grew large).
func PutBuffer(b *bytes.Buffer) {
	if b.Cap() > maxPooled {
		return
	}
	b.Reset()
	bufPool.Put(b)
}

// WriteJSON writes v as a JSON body with status. Encoding happens before
// the header is written, so a value that cannot be encoded becomes an
// internal error envelope instead of half an answer.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	buf := GetBuffer()
	defer PutBuffer(buf)
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		buf.Reset()
		buf.WriteString(`{"error":{"code":"internal","message":"` + internalMessage + `","details":{}}}` + "\n")
		status = http.StatusInternalServerError
	}
	WriteRaw(w, status, "application/json", buf.Bytes())
}

var (
	jsonContentType = []string{"application/json"}
	nosniff         = []string{"nosniff"}
)

// WriteRaw writes body with status and content type, setting
// Content-Length.
func WriteRaw(w http.ResponseWriter, status int, contentType string, body []byte) {
	h := w.Header()
	// Canonical keys set directly; the constant values are shared,
	// read-only slices (net/http only reads them), sparing allocations.
	if contentType == "application/json" {
		h["Content-Type"] = jsonContentType
	} else {
		h["Content-Type"] = []string{contentType}
	}
	h["Content-Length"] = []string{strconv.Itoa(len(body))}
	h["X-Content-Type-Options"] = nosniff
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// ReadBody reads the request body, at most limit bytes (limit <= 0 means
// DefaultMaxBodyBytes), into buf. A longer body is an
// *http.MaxBytesError (payload_too_large; the connection is closed after
// the answer). A non-empty body must be declared as JSON
// (application/json or a +json type): anything else is invalid_request,
// which also keeps browsers from posting to the API cross-site without a
// CORS preflight.
func ReadBody(w http.ResponseWriter, r *http.Request, limit int64, buf *bytes.Buffer) error {
	if limit <= 0 {
		limit = DefaultMaxBodyBytes
	}
	if r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	if r.ContentLength > limit {
		// Refuse without reading; the connection is closed after the
		// answer since the body was not consumed.
		return &http.MaxBytesError{Limit: limit}
	}
	// The buffer grows with the bytes that arrive, never ahead of them
	// from Content-Length: a client that announces a large body and
	// stalls costs what it sent (docs/security.md, "Bounded input").
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return err
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return Errorf(utcp.CodeInvalidRequest, "the request body did not arrive within the read timeout (gateway.read_timeout)").
				WithDetail("reason", "read_timeout")
		}
		if r.Context().Err() != nil {
			return fmt.Errorf("reading the request body: %w", r.Context().Err())
		}
		return Errorf(utcp.CodeInvalidRequest, "reading the request body: %w", err)
	}
	if buf.Len() > 0 && !isJSONType(r.Header.Get("Content-Type")) {
		return Errorf(utcp.CodeInvalidRequest, "the request body must be JSON sent with Content-Type: application/json").
			WithDetail("content_type", r.Header.Get("Content-Type"))
	}
	return nil
}

// isJSONType reports whether ct is application/json or */*+json.
func isJSONType(ct string) bool {
	if ct == "application/json" {
		return true
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

// DecodeStrict decodes the JSON document data into v: numbers as
// json.Number, unknown object fields refused, exactly one value. Every
// failure is invalid_request, with the offending field or byte offset in
// the details.
func DecodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	end := dec.InputOffset()
	if _, err := dec.Token(); err != io.EOF {
		return Errorf(utcp.CodeInvalidRequest, "malformed JSON: unexpected data after the top-level value").
			WithDetail("offset", end)
	}
	return nil
}

// decodeError describes a JSON decoding failure as invalid_request.
func decodeError(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.EOF):
		return Errorf(utcp.CodeInvalidRequest, "malformed JSON: the body is empty")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return Errorf(utcp.CodeInvalidRequest, "malformed JSON: the body ends early")
	case errors.As(err, &syn):
		return Errorf(utcp.CodeInvalidRequest, "malformed JSON: %w", syn).WithDetail("offset", syn.Offset)
	case errors.As(err, &typ):
		if typ.Field == "" {
			return Errorf(utcp.CodeInvalidRequest, "the body: a JSON %s cannot be used here (want %s)", typ.Value, jsonKind(typ.Type)).
				WithDetail("got", typ.Value)
		}
		return Errorf(utcp.CodeInvalidRequest, "field %s: a JSON %s cannot be used here (want %s)", typ.Field, typ.Value, jsonKind(typ.Type)).
			WithDetail("field", typ.Field).WithDetail("got", typ.Value)
	}
	msg := err.Error()
	if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		name, _ := strconv.Unquote(f)
		return Errorf(utcp.CodeInvalidRequest, "unknown field %s", f).WithDetail("field", name)
	}
	return Errorf(utcp.CodeInvalidRequest, "malformed JSON: %s", strings.TrimPrefix(msg, "json: "))
}

// jsonKind names the JSON kind a Go type decodes from.
func jsonKind(t reflect.Type) string {
	if t == nil {
		return "another kind of value"
	}
	if t == reflect.TypeFor[json.Number]() {
		return "a number"
	}
	switch t.Kind() {
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	}
	return "another kind of value"
}
