package httpx_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/utcpd/utcpd/api/httpx"
	"github.com/utcpd/utcpd/utcp"
)

func TestStatusCoversEveryCode(t *testing.T) {
	want := map[utcp.Code]int{
		utcp.CodeToolNotFound: 404, utcp.CodeAmbiguousTool: 409, utcp.CodeInvalidArguments: 400,
		utcp.CodeProtocolNotAllowed: 403, utcp.CodeGuardDenied: 403, utcp.CodeGuardError: 403,
		utcp.CodeReviewPending: 403, utcp.CodeGuardReviewTimeout: 403, utcp.CodeVariableNotFound: 500, utcp.CodeTransportError: 502,
		utcp.CodeTimeout: 504, utcp.CodePayloadTooLarge: 413, utcp.CodeUnauthorized: 401,
		utcp.CodeInvalidRequest: 400, utcp.CodeNotFound: 404, utcp.CodeMethodNotAllowed: 405,
		utcp.CodeManualExists: 409, utcp.CodeManualNotFound: 404, utcp.CodeInvalidTemplate: 400,
		utcp.CodeDiscoveryFailed: 422, utcp.CodeUnavailable: 503, utcp.CodeCanceled: 499,
		utcp.CodeInternal: 500, utcp.CodeManualReadOnly: 409, utcp.CodeForbidden: 403,
		utcp.CodeToolError: 502, utcp.CodeUnsupported: 501, utcp.CodeInvalidConfig: 500, utcp.CodeInvalidManual: 422,
		utcp.CodeUnsupportedMediaType: 415, utcp.CodeRateLimited: 429,
	}
	for _, c := range utcp.Codes() {
		w, ok := want[c]
		if !ok {
			t.Errorf("code %q has no documented status in this test: add it", c)
			continue
		}
		if got := httpx.Status(c); got != w {
			t.Errorf("Status(%q) = %d, want %d", c, got, w)
		}
	}
	if got := httpx.Status("made_up"); got != 500 {
		t.Errorf("unknown code: %d", got)
	}
}

func TestProblem(t *testing.T) {
	cases := []struct {
		name    string
		err     error
		status  int
		code    utcp.Code
		msg     string
		details map[string]any
	}{
		{"utcp error with details", utcp.NewError(utcp.CodeAmbiguousTool, "ambiguous").WithDetail("candidates", []string{"a.x", "b.x"}),
			409, utcp.CodeAmbiguousTool, "ambiguous", map[string]any{"candidates": []string{"a.x", "b.x"}}},
		{"wrapped", fmt.Errorf("demo.add: %w", utcp.NewError(utcp.CodeInvalidArguments, "bad")),
			400, utcp.CodeInvalidArguments, "demo.add: bad", map[string]any{}},
		{"tool error", &utcp.ToolError{Message: "HTTP 422", Value: map[string]any{"error": "x"}, Status: 422},
			502, utcp.CodeToolError, "HTTP 422", map[string]any{"value": map[string]any{"error": "x"}, "status": 422}},
		{"transport error", fmt.Errorf("t: %w", &utcp.TransportError{Status: 503, Err: errors.New("down")}),
			502, utcp.CodeTransportError, "t: transport error (status 503): down", map[string]any{"status": 503}},
		{"deadline", fmt.Errorf("x: %w", context.DeadlineExceeded), 504, utcp.CodeTimeout, "x: context deadline exceeded", map[string]any{}},
		{"canceled", context.Canceled, 499, utcp.CodeCanceled, "context canceled", map[string]any{}},
		{"internal hides its text", errors.New("open /secret/path: denied"), 500, utcp.CodeInternal,
			"internal error; the daemon log has the details", map[string]any{}},
		{"body too large", fmt.Errorf("reading: %w", &http.MaxBytesError{Limit: 10}), 413, utcp.CodePayloadTooLarge,
			"request body is larger than the limit", map[string]any{"limit_bytes": int64(10)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, env := httpx.Problem(c.err)
			if status != c.status {
				t.Errorf("status %d, want %d", status, c.status)
			}
			want := httpx.Envelope{Error: httpx.ErrorBody{Code: c.code, Message: c.msg, Details: c.details}}
			if diff := cmp.Diff(want, env); diff != "" {
				t.Errorf("envelope (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWriteErrorUnauthorizedChallenge(t *testing.T) {
	rec := httptest.NewRecorder()
	httpx.WriteError(rec, utcp.NewError(utcp.CodeUnauthorized, "no"))
	if rec.Code != 401 || rec.Header().Get("WWW-Authenticate") == "" {
		t.Errorf("%d %v", rec.Code, rec.Header())
	}
	var env httpx.Envelope
	if err := json.Unmarshal(rec.Body.Bytes(), &env); err != nil || env.Error.Code != utcp.CodeUnauthorized {
		t.Errorf("body %s", rec.Body)
	}
}

func TestDecodeStrict(t *testing.T) {
	type body struct {
		Arguments map[string]any `json:"arguments"`
		Count     int            `json:"count"`
	}
	cases := []struct {
		in      string
		msg     string
		details map[string]any
	}{
		{``, "malformed JSON: the body is empty", nil},
		{`{"arguments":`, "malformed JSON: the body ends early", nil},
		{`{"arguments":{}`, "malformed JSON: the body ends early", nil},
		{`{"arguments":{},}`, "malformed JSON: invalid character '}' looking for beginning of object key string", map[string]any{"offset": int64(17)}},
		{`{"nope":1}`, `unknown field "nope"`, map[string]any{"field": "nope"}},
		{`{"arguments":[1]}`, "field arguments: a JSON array cannot be used here (want an object)", map[string]any{"field": "arguments", "got": "array"}},
		{`{"count":"1"}`, "field count: a JSON string cannot be used here (want a number)", map[string]any{"field": "count", "got": "string"}},
		{`[]`, "the body: a JSON array cannot be used here (want an object)", map[string]any{"got": "array"}},
		{`{} {}`, "malformed JSON: unexpected data after the top-level value", map[string]any{"offset": int64(2)}},
	}
	for _, c := range cases {
		var b body
		err := httpx.DecodeStrict([]byte(c.in), &b)
		var ue *utcp.Error
		if !errors.As(err, &ue) || ue.Code != utcp.CodeInvalidRequest {
			t.Errorf("%q: err %v, want invalid_request", c.in, err)
			continue
		}
		if ue.Message != c.msg {
			t.Errorf("%q: message %q, want %q", c.in, ue.Message, c.msg)
		}
		if diff := cmp.Diff(c.details, ue.Details); diff != "" {
			t.Errorf("%q: details (-want +got):\n%s", c.in, diff)
		}
	}
	var b body
	if err := httpx.DecodeStrict([]byte(` {"arguments":{"n":12345678901234567890}} `), &b); err != nil {
		t.Fatal(err)
	}
	if b.Arguments["n"] != json.Number("12345678901234567890") {
		t.Errorf("numbers are not json.Number: %#v", b.Arguments["n"])
	}
}

func TestReadBody(t *testing.T) {
	cases := []struct {
		name, ctype, body string
		limit             int64
		code              utcp.Code
	}{
		{"json", "application/json", `{}`, 0, ""},
		{"json with charset", "application/json; charset=utf-8", `{}`, 0, ""},
		{"problem json", "application/problem+json", `{}`, 0, ""},
		{"empty without type", "", ``, 0, ""},
		{"form", "application/x-www-form-urlencoded", `{}`, 0, utcp.CodeInvalidRequest},
		{"text", "text/plain", `{}`, 0, utcp.CodeInvalidRequest},
		{"no type", "", `{}`, 0, utcp.CodeInvalidRequest},
		{"too large", "application/json", `{"a":"0123456789"}`, 8, utcp.CodePayloadTooLarge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/", strings.NewReader(c.body))
			if c.ctype != "" {
				r.Header.Set("Content-Type", c.ctype)
			}
			var buf bytes.Buffer
			err := httpx.ReadBody(httptest.NewRecorder(), r, c.limit, &buf)
			status, env := 0, httpx.Envelope{}
			if err != nil {
				status, env = httpx.Problem(err)
			}
			if env.Error.Code != c.code {
				t.Errorf("err %v (status %d), want code %q", err, status, c.code)
			}
			if err == nil && buf.String() != c.body {
				t.Errorf("read %q", buf.String())
			}
		})
	}
}

func TestKeys(t *testing.T) {
	k := httpx.NewKeys([]string{"alpha", "", "beta"})
	if k.Len() != 2 {
		t.Fatalf("Len %d", k.Len())
	}
	pa, ok := k.Match("alpha")
	pb, ok2 := k.Match("beta")
	if !ok || !ok2 || pa == pb || !strings.HasPrefix(pa, "key:") || len(pa) != len("key:")+8 {
		t.Errorf("principals %q %q", pa, pb)
	}
	for _, bad := range []string{"", "alph", "alphaa", "ALPHA"} {
		if _, ok := k.Match(bad); ok {
			t.Errorf("%q matched", bad)
		}
	}
	if _, ok := (&httpx.Keys{}).Match("x"); ok {
		t.Errorf("zero Keys matched")
	}
}

func TestBearerToken(t *testing.T) {
	for h, want := range map[string]string{"Bearer abc": "abc", "bearer abc ": "abc", "BEARER  abc": "abc", "Basic abc": "", "Bearer": "", "Bearer ": "", "": ""} {
		r := httptest.NewRequest("GET", "/", nil)
		if h != "" {
			r.Header.Set("Authorization", h)
		}
		got, ok := httpx.BearerToken(r)
		if got != want || ok != (want != "") {
			t.Errorf("%q: %q %v", h, got, ok)
		}
	}
}

func TestRouter(t *testing.T) {
	rt := httpx.NewRouter()
	rt.HandleFunc("GET /things/{id}", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "get ", r.PathValue("id")) })
	rt.HandleFunc("DELETE /things/{id}", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "delete ", r.PathValue("id")) })
	rt.HandleFunc("POST /things", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "post") })
	cases := []struct {
		method, path string
		status       int
		body, allow  string
	}{
		{"GET", "/things/a.b", 200, "get a.b", ""},
		{"DELETE", "/things/x", 200, "delete x", ""},
		{"HEAD", "/things/x", 200, "", ""},
		{"PUT", "/things/x", 405, "", "DELETE, GET, HEAD"},
		{"GET", "/things", 405, "", "POST"},
		{"GET", "/other", 404, "", ""},
		{"GET", "/things/x/y", 404, "", ""},
	}
	for _, c := range cases {
		rec := httptest.NewRecorder()
		rt.ServeHTTP(rec, httptest.NewRequest(c.method, c.path, nil))
		if rec.Code != c.status {
			t.Errorf("%s %s: %d %s", c.method, c.path, rec.Code, rec.Body)
		}
		if c.body != "" && rec.Body.String() != c.body {
			t.Errorf("%s %s: body %q", c.method, c.path, rec.Body)
		}
		if rec.Header().Get("Allow") != c.allow {
			t.Errorf("%s %s: Allow %q, want %q", c.method, c.path, rec.Header().Get("Allow"), c.allow)
		}
		if c.status >= 400 {
			var env httpx.Envelope
			if err := json.Unmarshal(rec.Body.Bytes(), &env); err != nil || env.Error.Code == "" {
				t.Errorf("%s %s: not an envelope: %s", c.method, c.path, rec.Body)
			}
		}
	}
	want := []string{"GET /things/{id}", "DELETE /things/{id}", "POST /things"}
	var got []string
	for _, r := range rt.Routes() {
		got = append(got, r.String())
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("routes (-want +got):\n%s", diff)
	}
	for _, bad := range []string{"/x", "get /x", "GET x", "POST /things"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Handle(%q) did not panic", bad)
				}
			}()
			rt.HandleFunc(bad, func(http.ResponseWriter, *http.Request) {})
		}()
	}
}

// TestErrorfWraps: a %w operand of Errorf is the error's cause; the
// message and the answer are the same as with %v.
func TestErrorfWraps(t *testing.T) {
	cause := errors.New("disk on fire")
	wrapped := httpx.Errorf(utcp.CodeUnavailable, "not ready: %w", cause)
	flat := httpx.Errorf(utcp.CodeUnavailable, "not ready: %v", cause)
	if !errors.Is(wrapped, cause) || errors.Is(flat, cause) {
		t.Errorf("chain: wrapped %v, flat %v", errors.Is(wrapped, cause), errors.Is(flat, cause))
	}
	ws, we := httpx.Problem(wrapped)
	fs, fe := httpx.Problem(flat)
	if ws != fs || !cmp.Equal(we, fe) || we.Error.Message != "not ready: disk on fire" {
		t.Errorf("answers differ: %d %+v, %d %+v", ws, we, fs, fe)
	}
}
