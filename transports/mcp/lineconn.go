package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/utcpd/utcpd/internal/jsonx"
)

// lineConn is a stdio server's standard output and input as the SDK
// client's connection: one JSON-RPC message (or batch) per line.
//
// It replaces the SDK's IOTransport, whose reader decodes every message
// through a streaming JSON decoder that starts with a 32 KiB buffer and
// then decodes it again with the SDK's reflection decoder (hundreds of
// kilobytes allocated per tools/call). lineConn reads lines with one
// reused buffer, decodes the usual message shapes with a small scanner
// (one allocation for the message's bytes) and hands anything unusual to
// jsonrpc.DecodeMessage, so that what it accepts and refuses is the SDK's;
// it writes from one reused buffer. The contract is the SDK's ioConn's:
// newline-delimited values (a value may span lines), blank lines skipped,
// a batch read as its messages one by one and the answers to the requests
// in it written back as one batch, the line length capped, Close
// unblocking Read and closing both pipes, and a Read or Write on a done
// context failing.
type lineConn struct {
	rc  io.ReadCloser
	wc  io.WriteCloser
	max int          // longest message read, in bytes
	tap func([]byte) // sees every line read up to tapLimit bytes; may be nil

	incoming chan readResult
	closed   chan struct{}

	closeOnce sync.Once
	closeErr  error

	queue []jsonrpc.Message // the rest of the last batch read; Read is not concurrent

	writeMu sync.Mutex
	wbuf    []byte

	batchMu sync.Mutex
	batches map[jsonrpc.ID]*lineBatch

	// The connection's own calls (call), by id; ended is why no more
	// answers will come, once reading stopped.
	callMu sync.Mutex
	calls  map[string]chan *jsonrpc.Response
	callN  int64
	ended  error
}

type readResult struct {
	msgs  []jsonrpc.Message // more than one, or a batch of one, for a batch
	msg   jsonrpc.Message
	batch bool
	err   error
}

// lineBatch is an incoming batch's requests still unanswered and the
// answers so far, written back together once complete.
type lineBatch struct {
	unresolved map[jsonrpc.ID]int
	responses  []*jsonrpc.Response
}

// lineTooLongError is the error of a message over the configured size.
type lineTooLongError struct{ max int }

func (e lineTooLongError) Error() string {
	return fmt.Sprintf("a message from the server is longer than %d bytes (max_message_bytes)", e.max)
}

// lineTransport hands the SDK client its one lineConn.
type lineTransport struct{ c *lineConn }

func (t lineTransport) Connect(context.Context) (sdk.Connection, error) { return t.c, nil }

// newLineConn starts reading r; max <= 0 means no cap.
func newLineConn(r io.ReadCloser, w io.WriteCloser, max int, tap func([]byte)) *lineConn {
	c := &lineConn{rc: r, wc: w, max: max, tap: tap, incoming: make(chan readResult), closed: make(chan struct{})}
	// Reads run in their own goroutine so that Read can select on Close
	// and on its context, as the SDK's ioConn does.
	go c.readLoop()
	return c
}

func (c *lineConn) readLoop() {
	br := bufio.NewReaderSize(endReader{c.rc}, 64<<10)
	var line []byte // the value being read, when it spans fragments or lines
	for {
		res, ok := c.next(br, &line)
		if !ok {
			continue
		}
		// An answer to one of the connection's own calls goes to its
		// caller from here, not through the SDK's reader first: one
		// goroutine handoff a call instead of two. Messages before it
		// have been taken by the SDK's Read already (incoming is not
		// buffered), which is all the order the SDK itself keeps: it
		// handles notifications on a goroutine of their own.
		if resp, isResp := res.msg.(*jsonrpc.Response); isResp && res.err == nil && !res.batch && c.answer(resp) {
			continue
		}
		select {
		case c.incoming <- res:
		case <-c.closed:
			return
		}
		if res.err != nil {
			return
		}
	}
}

// endReader turns the read deadline set on standard output once the
// process is gone into the end of the output.
type endReader struct{ r io.Reader }

func (e endReader) Read(b []byte) (int, error) {
	n, err := e.r.Read(b)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		err = io.EOF
	}
	return n, err
}

// next reads one line and decodes it; ok is false for a line that
// completes no message (blank, or the start of a value that goes on).
func (c *lineConn) next(br *bufio.Reader, acc *[]byte) (readResult, bool) {
	frag, err := br.ReadSlice('\n')
	for errors.Is(err, bufio.ErrBufferFull) {
		if c.max > 0 && len(*acc)+len(frag) > c.max {
			return readResult{err: lineTooLongError{c.max}}, true
		}
		*acc = append(*acc, frag...)
		frag, err = br.ReadSlice('\n')
	}
	data := frag
	if len(*acc) > 0 {
		*acc = append(*acc, frag...)
		data = *acc
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return readResult{err: err}, true
	}
	eof := err != nil
	physical := bytes.TrimSuffix(data, []byte{'\n'})
	if c.max > 0 && len(bytes.TrimSuffix(physical, []byte{'\r'})) > c.max {
		return readResult{err: lineTooLongError{c.max}}, true
	}
	if c.tap != nil && len(data) > 0 && !eof {
		// The tap sees each physical line: the last one of a value that
		// spans lines is what follows the previous newline.
		last := physical
		if i := bytes.LastIndexByte(last, '\n'); i >= 0 {
			last = last[i+1:]
		}
		if len(last) <= tapLimit {
			c.tap(last)
		}
	}
	value := bytes.TrimSpace(data)
	if len(value) == 0 {
		*acc = (*acc)[:0]
		if eof {
			return readResult{err: io.EOF}, true
		}
		return readResult{}, false
	}
	if !json.Valid(value) {
		if !eof && incomplete(value) {
			// A value that spans lines: keep reading, as the SDK's
			// streaming decoder does.
			if len(*acc) == 0 {
				*acc = append(*acc, data...)
			}
			return readResult{}, false
		}
		*acc = (*acc)[:0]
		if eof && incomplete(value) {
			return readResult{err: io.ErrUnexpectedEOF}, true
		}
		return readResult{err: fmt.Errorf("a message from the server is not JSON: %w", syntaxError(value))}, true
	}
	// The last message may come without its newline: it is delivered,
	// and the next read reports the end.
	res := decodeLine(value)
	if cap(*acc) > 1<<20 {
		*acc = nil // do not keep a large message's buffer
	} else {
		*acc = (*acc)[:0]
	}
	return res, true
}

// incomplete reports whether value is the start of a JSON value.
func incomplete(value []byte) bool {
	var raw json.RawMessage
	err := json.Unmarshal(value, &raw)
	return err != nil && err.Error() == "unexpected end of JSON input"
}

func syntaxError(value []byte) error {
	var raw json.RawMessage
	return json.Unmarshal(value, &raw)
}

// decodeLine decodes one valid JSON value: a message or a batch.
func decodeLine(value []byte) readResult {
	if value[0] != '[' {
		msg, err := decodeMessage(value)
		return readResult{msg: msg, err: err}
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(value, &raws); err != nil {
		return readResult{err: err}
	}
	if len(raws) == 0 {
		return readResult{batch: true, err: errors.New("empty batch")}
	}
	msgs := make([]jsonrpc.Message, 0, len(raws))
	for _, raw := range raws {
		msg, err := decodeMessage(raw)
		if err != nil {
			return readResult{batch: true, err: err}
		}
		msgs = append(msgs, msg)
	}
	return readResult{msgs: msgs, batch: true}
}

// decodeMessage is jsonrpc.DecodeMessage, without its allocations for
// the usual shapes.
func decodeMessage(data []byte) (jsonrpc.Message, error) {
	if msg := decodeFast(data); msg != nil {
		return msg, nil
	}
	return jsonrpc.DecodeMessage(data)
}

// maxDepth is the SDK's nesting limit; deeper messages go to its decoder,
// which refuses them.
const maxDepth = 1000

// decodeFast decodes a valid JSON value that is a message of the usual
// shape: the keys among jsonrpc, id, method, params and result, each once
// and without escapes, jsonrpc "2.0", an id that is an integer of up to
// 15 digits or a string without escapes, a method without escapes. It
// returns nil for anything else (an error answer, a null, a
// duplicate key, a malformed message), for the SDK's decoder to decide.
func decodeFast(d []byte) jsonrpc.Message {
	i := jsonx.SkipSpace(d, 0)
	if i >= len(d) || d[i] != '{' {
		return nil
	}
	var (
		seen                 uint8
		version              bool
		idRaw, method        []byte
		params, result       []byte
		hasMethod, hasParams bool
	)
	const (
		kVersion = 1 << iota
		kID
		kMethod
		kParams
		kResult
	)
	i++
	for {
		i = jsonx.SkipSpace(d, i)
		if d[i] == '}' {
			break
		}
		if d[i] == ',' {
			i = jsonx.SkipSpace(d, i+1)
		}
		ks := i + 1
		ke := ks
		for d[ke] != '"' {
			if d[ke] == '\\' {
				return nil
			}
			ke++
		}
		i = jsonx.SkipSpace(d, ke+1) + 1 // past ':'
		vs := jsonx.SkipSpace(d, i)
		ve, depth := jsonx.SkipValue(d, vs)
		if depth+1 > maxDepth {
			return nil
		}
		v := d[vs:ve]
		i = ve
		var bit uint8
		switch string(d[ks:ke]) {
		case "jsonrpc":
			bit = kVersion
			version = string(v) == `"2.0"`
		case "id":
			bit, idRaw = kID, v
		case "method":
			bit, method, hasMethod = kMethod, v, true
		case "params":
			bit, params, hasParams = kParams, v, true
		case "result":
			bit, result = kResult, v
		case "error":
			return nil
		default:
			continue
		}
		if seen&bit != 0 {
			return nil
		}
		seen |= bit
	}
	if !version || string(params) == "null" || string(result) == "null" {
		return nil
	}
	id, ok := fastID(idRaw)
	if !ok {
		return nil
	}
	if hasMethod {
		name, ok := jsonx.PlainString(method)
		if !ok {
			return nil
		}
		req := &jsonrpc.Request{ID: id, Method: internMethod(name)}
		if hasParams {
			req.Params = bytes.Clone(params)
		}
		return req
	}
	if !id.IsValid() {
		return nil
	}
	resp := &jsonrpc.Response{ID: id}
	if seen&kResult != 0 {
		resp.Result = bytes.Clone(result)
	}
	return resp
}

// fastID decodes an absent or null id, an integer of up to 15 digits
// (exact as the float64 the SDK decodes it through) or a string without
// escapes.
func fastID(v []byte) (jsonrpc.ID, bool) {
	if len(v) == 0 || string(v) == "null" {
		return jsonrpc.ID{}, true
	}
	if v[0] == '"' {
		s, ok := jsonx.PlainString(v)
		if !ok {
			return jsonrpc.ID{}, false
		}
		id, err := jsonrpc.MakeID(string(s))
		return id, err == nil
	}
	digits := v
	if digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 15 {
		return jsonrpc.ID{}, false
	}
	for _, b := range digits {
		if b < '0' || b > '9' {
			return jsonrpc.ID{}, false
		}
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		return jsonrpc.ID{}, false
	}
	id, err := jsonrpc.MakeID(float64(n))
	return id, err == nil
}

// internMethod returns the method name, without allocating for the
// methods a server sends all the time.
func internMethod(b []byte) string {
	switch string(b) {
	case "notifications/progress":
		return "notifications/progress"
	case "notifications/message":
		return "notifications/message"
	case "notifications/cancelled":
		return "notifications/cancelled"
	case "notifications/tools/list_changed":
		return "notifications/tools/list_changed"
	case "notifications/resources/updated":
		return "notifications/resources/updated"
	case "ping":
		return "ping"
	case "roots/list":
		return "roots/list"
	}
	return string(b)
}

// Read returns the next message, as the SDK's ioConn does; the answers
// to the connection's own calls go to them instead.
func (c *lineConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		msg, err := c.read(ctx)
		if err != nil {
			if errors.Is(err, io.EOF) && c.isClosed() {
				c.endCalls(sdk.ErrConnectionClosed)
			} else if ctx.Err() == nil {
				c.endCalls(err)
			}
			return nil, err
		}
		if resp, ok := msg.(*jsonrpc.Response); ok && c.answer(resp) {
			continue
		}
		return msg, nil
	}
}

func (c *lineConn) isClosed() bool {
	select {
	case <-c.closed:
		return true
	default:
		return false
	}
}

func (c *lineConn) read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	default:
	}
	if len(c.queue) > 0 {
		next := c.queue[0]
		c.queue = c.queue[1:]
		return next, nil
	}
	var res readResult
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case res = <-c.incoming:
	case <-c.closed:
		return nil, io.EOF
	}
	if res.err != nil {
		select {
		case <-c.closed:
			return nil, io.EOF // the read failed because of Close
		default:
		}
		return nil, res.err
	}
	if !res.batch {
		return res.msg, nil
	}
	var b *lineBatch
	for _, msg := range res.msgs {
		// Only calls are answered (the SDK's ioConn also counts the
		// notifications, which then hold the batch's answers forever).
		if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
			if b == nil {
				b = &lineBatch{unresolved: map[jsonrpc.ID]int{}}
			}
			if _, dup := b.unresolved[req.ID]; dup {
				return nil, fmt.Errorf("duplicate message ID %q", req.ID)
			}
			b.unresolved[req.ID] = len(b.responses)
			b.responses = append(b.responses, nil)
		}
	}
	if b != nil {
		if err := c.addBatch(b); err != nil {
			return nil, err
		}
	}
	c.queue = res.msgs[1:]
	return res.msgs[0], nil
}

func (c *lineConn) addBatch(b *lineBatch) error {
	c.batchMu.Lock()
	defer c.batchMu.Unlock()
	for id := range b.unresolved {
		if _, ok := c.batches[id]; ok {
			return fmt.Errorf("invalid request: batch contains previously seen request %v", id.Raw())
		}
	}
	if c.batches == nil {
		c.batches = map[jsonrpc.ID]*lineBatch{}
	}
	for id := range b.unresolved {
		c.batches[id] = b
	}
	return nil
}

// updateBatch records an answer to a request that came in a batch; it
// returns the batch's answers once all are in, and whether resp belonged
// to one.
func (c *lineConn) updateBatch(resp *jsonrpc.Response) ([]*jsonrpc.Response, bool) {
	c.batchMu.Lock()
	defer c.batchMu.Unlock()
	b, ok := c.batches[resp.ID]
	if !ok {
		return nil, false
	}
	b.responses[b.unresolved[resp.ID]] = resp
	delete(b.unresolved, resp.ID)
	delete(c.batches, resp.ID)
	if len(b.unresolved) == 0 {
		return b.responses, true
	}
	return nil, true
}

// Write writes msg and a newline; concurrent writes are serialized.
func (c *lineConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	default:
	}
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	if resp, ok := msg.(*jsonrpc.Response); ok {
		if batch, ok := c.updateBatch(resp); ok {
			if len(batch) == 0 {
				return nil
			}
			raws := make([]json.RawMessage, len(batch))
			for i, r := range batch {
				raw, err := jsonrpc.EncodeMessage(r)
				if err != nil {
					return fmt.Errorf("encoding batch message: %w", err)
				}
				raws[i] = raw
			}
			data, err := json.Marshal(raws)
			if err != nil {
				return err
			}
			_, err = c.wc.Write(append(data, '\n'))
			return err
		}
	}
	buf, err := appendMessage(c.wbuf[:0], msg)
	if err != nil {
		return fmt.Errorf("marshaling message: %v", err)
	}
	buf = append(buf, '\n')
	_, err = c.wc.Write(buf)
	if cap(buf) <= 64<<10 {
		c.wbuf = buf
	}
	return err
}

// appendMessage appends msg as jsonrpc.EncodeMessage encodes it. The
// usual shapes (an integer id, a method name that needs no escaping, no
// error) are written directly; the rest through the SDK.
func appendMessage(buf []byte, msg jsonrpc.Message) ([]byte, error) {
	var id jsonrpc.ID
	var method string
	var params, result json.RawMessage
	switch m := msg.(type) {
	case *jsonrpc.Request:
		id, method, params = m.ID, m.Method, m.Params
	case *jsonrpc.Response:
		if m.Error != nil {
			return appendEncoded(buf, msg)
		}
		id, result = m.ID, m.Result
	default:
		return appendEncoded(buf, msg)
	}
	if !jsonx.Unescaped(method, false) {
		return appendEncoded(buf, msg)
	}
	start := len(buf)
	buf = append(buf, `{"jsonrpc":"2.0"`...)
	switch v := id.Raw().(type) {
	case nil:
	case int64:
		buf = append(buf, `,"id":`...)
		buf = strconv.AppendInt(buf, v, 10)
	default:
		return appendEncoded(buf[:start], msg)
	}
	if method != "" {
		buf = append(buf, `,"method":"`...)
		buf = append(buf, method...)
		buf = append(buf, '"')
	}
	for _, f := range [...]struct {
		key string
		raw json.RawMessage
	}{{`,"params":`, params}, {`,"result":`, result}} {
		if len(f.raw) == 0 {
			continue
		}
		buf = append(buf, f.key...)
		// Compact is what the encoder does with a RawMessage (without
		// HTML escaping): it also keeps newlines out of the line.
		b := bytes.NewBuffer(buf)
		if err := json.Compact(b, f.raw); err != nil {
			return appendEncoded(buf[:start], msg) // the SDK's error
		}
		buf = b.Bytes()
	}
	return append(buf, '}'), nil
}

func appendEncoded(buf []byte, msg jsonrpc.Message) ([]byte, error) {
	data, err := jsonrpc.EncodeMessage(msg)
	return append(buf, data...), err
}

// Close closes both pipes once; it unblocks Read and ends the
// connection's own calls.
func (c *lineConn) Close() error {
	c.closeOnce.Do(func() {
		// closed first: a Read woken by the pipe's closing says io.EOF.
		close(c.closed)
		c.closeErr = errors.Join(c.rc.Close(), c.wc.Close())
		c.endCalls(sdk.ErrConnectionClosed)
	})
	return c.closeErr
}

// callPrefix starts the ids of the connection's own calls: the SDK's
// are integers.
const callPrefix = "utcpd-"

// call sends a request of its own and returns the result: what the SDK's
// session does for a request, without decoding the result into a typed
// value through its decoder (two 32 KiB buffers per tools/call). Its
// errors are the SDK's: the error answer wrapped, the connection's end
// (sdk.ErrConnectionClosed once closed), a write's failure; on ctx's
// end it returns ctx.Err() and tells the server with
// notifications/cancelled, in the background.
func (c *lineConn) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	var pb bytes.Buffer
	enc := json.NewEncoder(&pb)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(params); err != nil {
		return nil, fmt.Errorf("calling %q: %w", method, err)
	}
	ch := make(chan *jsonrpc.Response, 1)
	c.callMu.Lock()
	if c.ended != nil {
		err := c.ended
		c.callMu.Unlock()
		return nil, fmt.Errorf("%w: calling %q: %v", sdk.ErrConnectionClosed, method, err)
	}
	c.callN++
	key := callPrefix + strconv.FormatInt(c.callN, 10)
	if c.calls == nil {
		c.calls = map[string]chan *jsonrpc.Response{}
	}
	c.calls[key] = ch
	c.callMu.Unlock()
	id, _ := jsonrpc.MakeID(key)
	if err := c.Write(ctx, &jsonrpc.Request{ID: id, Method: method, Params: bytes.TrimRight(pb.Bytes(), "\n")}); err != nil {
		c.forget(key)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("calling %q: %w", method, err)
	}
	select {
	case resp := <-ch:
		if resp.Error != nil {
			if errors.Is(resp.Error, sdk.ErrConnectionClosed) {
				return nil, fmt.Errorf("%w: calling %q", sdk.ErrConnectionClosed, method)
			}
			return nil, fmt.Errorf("calling %q: %w", method, resp.Error)
		}
		return resp.Result, nil
	case <-ctx.Done():
		c.forget(key)
		go c.cancelled(context.WithoutCancel(ctx), key, ctx.Err())
		return nil, ctx.Err()
	}
}

// cancelled tells the server a call is abandoned, as the SDK does.
func (c *lineConn) cancelled(ctx context.Context, key string, why error) {
	ctx, stop := context.WithTimeout(ctx, 5*time.Second)
	defer stop()
	params, err := json.Marshal(&sdk.CancelledParams{Reason: why.Error(), RequestID: key})
	if err != nil {
		return
	}
	_ = c.Write(ctx, &jsonrpc.Request{Method: "notifications/cancelled", Params: params})
}

func (c *lineConn) forget(key string) {
	c.callMu.Lock()
	delete(c.calls, key)
	c.callMu.Unlock()
}

// answer hands resp to the call of the connection's own it answers;
// false for an answer to the SDK's.
func (c *lineConn) answer(resp *jsonrpc.Response) bool {
	key, ok := resp.ID.Raw().(string)
	if !ok || len(key) <= len(callPrefix) || key[:len(callPrefix)] != callPrefix {
		return false
	}
	c.callMu.Lock()
	ch, ok := c.calls[key]
	delete(c.calls, key)
	c.callMu.Unlock()
	if ok {
		ch <- resp
	}
	return true // an abandoned call's answer is dropped, as the SDK drops one
}

// endCalls fails the calls in flight: no answer will come.
func (c *lineConn) endCalls(err error) {
	c.callMu.Lock()
	defer c.callMu.Unlock()
	if c.ended == nil {
		c.ended = err
	}
	for key, ch := range c.calls {
		ch <- &jsonrpc.Response{Error: err}
		delete(c.calls, key)
	}
}

// SessionID is empty: a stdio connection has no session id.
func (c *lineConn) SessionID() string { return "" }
