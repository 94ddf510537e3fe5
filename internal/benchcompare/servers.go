package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
)

// The helper processes the harness runs from its own executable, chosen
// by the environment variable roleEnv: the minimal tool server, the bare
// hop and the bare MCP hop (mcphop.go). Each listens on 127.0.0.1:0 and prints "listening on ADDR".
const roleEnv = "BENCHCOMPARE_ROLE"

// runRole runs the role named by roleEnv, if any, and reports whether it
// did (it returns only when the role's server fails).
func runRole() bool {
	switch os.Getenv(roleEnv) {
	case "tool":
		serve(toolHandler())
	case "hop":
		serve(hopHandler(os.Getenv("BENCHCOMPARE_TARGET")))
	case "mcphop":
		runMCPHop()
	default:
		return false
	}
	return true
}

func serve(h http.Handler) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("listening on %s\n", ln.Addr())
	err = (&http.Server{Handler: h}).Serve(ln)
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}

// toolHandler is the minimal Go tool server: GET /add?a=1&b=2 answers
// {"sum":3}, and GET /utcp its UTCP manual (one tool, add, called with a
// GET to /add on the Host the manual was fetched from).
func toolHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /add", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		a, err1 := strconv.ParseFloat(q.Get("a"), 64)
		b, err2 := strconv.ParseFloat(q.Get("b"), 64)
		if err1 != nil || err2 != nil {
			http.Error(w, "a and b must be numbers", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"sum":` + strconv.FormatFloat(a+b, 'g', -1, 64) + `}`))
	})
	mux.HandleFunc("GET /utcp", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"utcp_version":"1.1.0","manual_version":"1.0.0","tools":[{"name":"add",
"description":"Add returns the sum of a and b.",
"inputs":{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"]},
"outputs":{"type":"object","properties":{"sum":{"type":"number"}}},
"tool_call_template":{"call_template_type":"http","http_method":"GET","url":"http://%s/add"}}]}`, r.Host)
	})
	return mux
}

// hopHandler is the bare hop, the floor of any HTTP-to-HTTP gateway:
// POST in, GET to the tool, copy the answer back. Nothing else.
func hopHandler(target string) http.Handler {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		resp, err := client.Get(target)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	})
}
