package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"sync"
)

// mcpServerEnv holds the stdio MCP server the bare MCP hop starts, as a
// JSON array: the command and its arguments.
const mcpServerEnv = "BENCHCOMPARE_MCP_SERVER"

// runMCPHop is the role "mcphop": the bare MCP hop, the floor of any
// Streamable HTTP MCP front over a stdio MCP server. It starts the server
// as its child and forwards each POST /mcp body as one line to the
// child's stdin; a request's answer is the child's line with the same id,
// as application/json; a notification or a response gets 202. No SDK,
// no session state beyond one fixed Mcp-Session-Id, no per-call
// goroutine: one reader goroutine on the child's stdout routes the
// answers by id.
//
// What it leaves out, deliberately: requests the child sends to the
// client (sampling, elicitation, roots) and the child's notifications are
// dropped, since a JSON answer has no room for them and the floor has no
// standalone SSE stream (GET answers 405); the echo calls measured
// through it need neither.
func runMCPHop() {
	var argv []string
	if err := json.Unmarshal([]byte(os.Getenv(mcpServerEnv)), &argv); err != nil || len(argv) == 0 {
		fmt.Fprintf(os.Stderr, "mcphop: %s must be a JSON array (command and arguments): %v\n", mcpServerEnv, err)
		os.Exit(1)
	}
	// The child stays in the hop's process group: stopping the hop's
	// group stops it too.
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	serve(newMCPHop(in, out, func() {
		fmt.Fprintf(os.Stderr, "mcphop: the MCP server's stdout ended: %v\n", cmd.Wait())
		os.Exit(1)
	}))
}

// newMCPHop forwards to the server reading in and writing out; its reader
// goroutine calls ended when out ends.
func newMCPHop(in io.Writer, out io.Reader, ended func()) *mcpHop {
	h := &mcpHop{in: in, pending: map[string]chan []byte{}}
	go func() {
		h.readReplies(out)
		ended()
	}()
	return h
}

// mcpHop forwards JSON-RPC messages between HTTP and one stdio server.
type mcpHop struct {
	wmu sync.Mutex // one line at a time on the child's stdin
	in  io.Writer

	mu      sync.Mutex
	pending map[string]chan []byte // raw id -> the waiting request's channel
}

// maxMessage bounds a POST body.
const maxMessage = 1 << 20

// hopSessionID is the session the hop announces on the initialize answer.
// There is one child and so one session; later requests' header is not
// checked.
const hopSessionID = "benchcompare-mcphop"

var jsonType = []string{"application/json"}

// envelope is what the hop reads of a message: its id, and its method to
// tell a request or notification from a response.
type envelope struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
}

func (h *mcpHop) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodPost:
	case http.MethodDelete:
		w.WriteHeader(http.StatusNoContent)
		return
	default: // GET too: no standalone SSE stream, which the client accepts
		http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
		return
	}
	// One byte more than the bound tells a body at the bound from one
	// over it; the line's newline fits in that room.
	body, err := io.ReadAll(io.LimitReader(r.Body, maxMessage+1))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if len(body) > maxMessage {
		http.Error(w, "message too large", http.StatusRequestEntityTooLarge)
		return
	}
	var env envelope
	if err := json.Unmarshal(body, &env); err != nil {
		http.Error(w, "not a JSON-RPC message: "+err.Error(), http.StatusBadRequest)
		return
	}
	isRequest := env.Method != "" && len(env.ID) > 0 && string(env.ID) != "null"
	var reply chan []byte
	if isRequest {
		id := string(env.ID)
		reply = make(chan []byte, 1)
		h.mu.Lock()
		_, dup := h.pending[id]
		if !dup {
			h.pending[id] = reply
		}
		h.mu.Unlock()
		if dup {
			http.Error(w, "a request with id "+id+" is in flight", http.StatusConflict)
			return
		}
		defer func() {
			h.mu.Lock()
			if h.pending[id] == reply { // still there when the caller went away
				delete(h.pending, id)
			}
			h.mu.Unlock()
		}()
	}
	h.wmu.Lock()
	_, err = h.in.Write(append(body, '\n'))
	h.wmu.Unlock()
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	if !isRequest {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	select {
	case line := <-reply:
		w.Header()["Content-Type"] = jsonType
		if env.Method == "initialize" {
			w.Header().Set("Mcp-Session-Id", hopSessionID)
		}
		_, _ = w.Write(line)
	case <-r.Context().Done():
	}
}

// readReplies hands each response line of the child to the request
// waiting for its id, until the child's stdout ends. Lines with a method
// (the child's own requests and notifications) and answers nobody waits
// for any more are dropped.
func (h *mcpHop) readReplies(out io.Reader) {
	br := bufio.NewReaderSize(out, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if err != nil {
			return
		}
		var env envelope
		if json.Unmarshal(line, &env) != nil || env.Method != "" || len(env.ID) == 0 {
			continue
		}
		h.mu.Lock()
		reply, ok := h.pending[string(env.ID)]
		delete(h.pending, string(env.ID))
		h.mu.Unlock()
		if ok {
			reply <- line // buffered: never blocks
		}
	}
}
