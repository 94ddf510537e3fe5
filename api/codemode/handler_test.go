package codemode

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/utcpd/utcpd/api/httpx"
)

func TestHandler(t *testing.T) {
	e := newTestEnv(t, Options{})
	rt := httpx.NewRouter()
	NewHandler(e.r, 1<<20, nil).Register(rt, httpx.RequireKeys(httpx.NewKeys([]string{"k1"}), "utcpd"))
	srv := httptest.NewServer(rt)
	defer srv.Close()
	post := func(key, body string) (int, map[string]any) {
		req, _ := http.NewRequestWithContext(t.Context(), "POST", srv.URL+"/v1/codemode", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		return resp.StatusCode, m
	}
	if st, _ := post("", `{"code":"return 1"}`); st != http.StatusUnauthorized {
		t.Fatalf("no key: %d", st)
	}
	st, m := post("k1", `{"code":"print('x') return call_tool('demo.add', {a=1, b=2}).sum","max_tool_calls":3}`)
	if st != 200 || jsonOf(t, m["result"]) != "3" || jsonOf(t, m["logs"]) != `["x"]` || len(m["tool_calls"].([]any)) != 1 {
		t.Fatalf("%d %v", st, m)
	}
	st, m = post("k1", `{"code":"error('boom')"}`)
	errObj, _ := m["error"].(map[string]any)
	if st != 200 || errObj["stage"] != "execute" || errObj["type"] != "runtime_error" || errObj["logs"] == nil {
		t.Fatalf("%d %v", st, m)
	}
	for body, want := range map[string]int{`{}`: 400, `{"code":"return 1","bogus":1}`: 400, `not json`: 400} {
		if st, m := post("k1", body); st != want || m["error"].(map[string]any)["code"] == nil {
			t.Errorf("%s: %d %v", body, st, m)
		}
	}
	req, _ := http.NewRequestWithContext(t.Context(), "GET", srv.URL+"/v1/codemode/interfaces?q=sum&limit=1", nil)
	req.Header.Set("Authorization", "Bearer k1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var in Interfaces
	if err := json.NewDecoder(resp.Body).Decode(&in); err != nil || len(in.Tools) != 1 || in.Tools[0].Name != "demo.add" {
		t.Fatalf("%v %+v", err, in)
	}
}

func TestRequestFromArgs(t *testing.T) {
	req, err := RequestFromArgs(map[string]any{"code": "return 1", "timeout_ms": json.Number("500"), "max_tool_calls": 3.0})
	if err != nil || req.TimeoutMS != 500 || req.MaxToolCalls != 3 {
		t.Fatalf("%+v %v", req, err)
	}
	for _, bad := range []map[string]any{{}, {"code": 1}, {"code": "x", "timeout_ms": -1}, {"code": "x", "timeout_ms": 1.5}, {"code": "x", "other": 1}} {
		if _, err := RequestFromArgs(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}
