// Package eventstream reads text/event-stream bodies (Server-Sent
// Events) incrementally: the sse and streamable_http transports read their
// streams with it, and the REST front's benchmarks read its streams back.
package eventstream

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"time"

	"github.com/utcpd/utcpd/transports"
)

// Event is one dispatched server-sent event.
type Event struct {
	// Type is the value of the event's "event" field, "" when it had none
	// (browsers then call it "message").
	Type string
	// ID is the stream's last event ID when the event was dispatched: the
	// most recent "id" field seen so far on the stream, in this event or an
	// earlier one, as the SSE specification defines it.
	ID string
	// Data is the event's data lines joined with "\n".
	Data string
}

// lineSlack is how much longer than the event cap one line may be: the
// field name and colon in front of a data value of the cap's size.
const lineSlack = 256

// Reader reads server-sent events from a text/event-stream body
// incrementally, one event per Next call, holding at most one event (and
// one line) in memory. It follows the WHATWG parsing rules:
//
//   - lines end with CRLF, LF or a lone CR; a leading byte order mark is
//     dropped;
//   - a line starting with ':' is a comment and is ignored;
//   - "field: value" lines set event, data, id or retry (one space after
//     the colon is dropped; a line without a colon is a field with an empty
//     value); other field names are ignored;
//   - several data lines are joined with "\n"; an id containing NUL is
//     ignored; retry is honoured only when it is all ASCII digits;
//   - a blank line dispatches the event; a block without any data line
//     dispatches nothing (it may still set id or retry).
//
// Unlike a browser, a final event that is not followed by a blank line is
// still delivered when the stream ends cleanly (io.EOF from the
// underlying reader): a server that closes right after its last data line
// loses nothing. Any other error of the underlying reader (a connection
// dropped mid-stream, a truncated chunked body) is returned as it is, and
// the partial event is discarded.
//
// An event whose data is larger than the cap given to NewReader, or a
// line longer than the cap plus lineSlack bytes (room for the field name),
// fails with a payload_too_large *utcp.Error wrapping transports.ErrTooLarge before
// more than that is buffered. After any error, Next keeps returning that
// error.
//
// An Reader is not safe for concurrent use.
type Reader struct {
	br  *bufio.Reader
	max int64

	line    []byte
	data    []byte
	hasData bool
	typ     string
	lastID  string
	retry   time.Duration
	skipLF  bool // the previous line ended with CR: a following LF belongs to it
	started bool // the byte order mark check is done
	err     error
}

// NewReader returns an Reader reading r. maxEventBytes caps one line
// and one event's data; <= 0 means transports.DefaultMaxEventBytes.
func NewReader(r io.Reader, maxEventBytes int64) *Reader {
	if maxEventBytes <= 0 {
		maxEventBytes = transports.DefaultMaxEventBytes
	}
	return &Reader{br: bufio.NewReaderSize(r, 32<<10), max: maxEventBytes}
}

// Reset makes r read a new body, after a reconnection: it keeps the last
// event ID and the retry delay, and drops any partial line or event and any
// earlier error.
func (r *Reader) Reset(body io.Reader) {
	r.br.Reset(body)
	r.line = r.line[:0]
	r.data = r.data[:0]
	r.hasData = false
	r.typ = ""
	r.skipLF = false
	r.started = false
	r.err = nil
}

// LastEventID returns the stream's last event ID: the value to send as
// Last-Event-ID when reconnecting. It is "" until an id field arrives.
func (r *Reader) LastEventID() string { return r.lastID }

// Retry returns the reconnection delay the server last set with a retry
// field, or 0 when it set none.
func (r *Reader) Retry() time.Duration { return r.retry }

// Next returns the next event, io.EOF after the last one of a cleanly
// ended stream, or the error that ended the stream.
func (r *Reader) Next() (Event, error) {
	if r.err != nil {
		return Event{}, r.err
	}
	for {
		line, err := r.readLine()
		if err != nil {
			if errors.Is(err, io.EOF) && len(line) > 0 {
				if ferr := r.field(line); ferr != nil {
					err = ferr
				}
			}
			if errors.Is(err, io.EOF) && r.hasData {
				ev := r.dispatch()
				r.err = err
				return ev, nil
			}
			r.err = err
			return Event{}, err
		}
		if len(line) == 0 {
			if r.hasData {
				return r.dispatch(), nil
			}
			r.typ = "" // a block without data dispatches nothing
			continue
		}
		if err := r.field(line); err != nil {
			r.err = err
			return Event{}, err
		}
	}
}

// dispatch builds the pending event and resets the event buffers.
func (r *Reader) dispatch() Event {
	data := r.data
	if len(data) > 0 && data[len(data)-1] == '\n' {
		data = data[:len(data)-1]
	}
	ev := Event{Type: r.typ, ID: r.lastID, Data: string(data)}
	r.data = r.data[:0]
	r.hasData = false
	r.typ = ""
	return ev
}

// field processes one non-empty line.
func (r *Reader) field(line []byte) error {
	if line[0] == ':' {
		return nil
	}
	name, value := line, []byte(nil)
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		name, value = line[:i], line[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	switch string(name) {
	case "data":
		if int64(len(r.data)+len(value)+1) > r.max+1 {
			return transports.TooLarge(r.max)
		}
		r.data = append(r.data, value...)
		r.data = append(r.data, '\n')
		r.hasData = true
	case "event":
		r.typ = string(value)
	case "id":
		if bytes.IndexByte(value, 0) < 0 {
			r.lastID = string(value)
		}
	case "retry":
		if len(value) > 0 && allDigits(value) && len(value) < 12 {
			var ms int64
			for _, c := range value {
				ms = ms*10 + int64(c-'0')
			}
			r.retry = time.Duration(ms) * time.Millisecond
		}
	}
	return nil
}

func allDigits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// readLine returns the next line without its terminator. At the end of
// the input it returns the unterminated rest (possibly empty) with the
// reader's error.
func (r *Reader) readLine() ([]byte, error) {
	r.line = r.line[:0]
	for {
		if r.br.Buffered() == 0 {
			if _, err := r.br.Peek(1); err != nil {
				return r.line, err
			}
		}
		buf, _ := r.br.Peek(r.br.Buffered())
		if r.skipLF {
			r.skipLF = false
			if buf[0] == '\n' {
				_, _ = r.br.Discard(1)
				continue
			}
		}
		if !r.started {
			if len(buf) < 3 && bytes.HasPrefix([]byte("\xEF\xBB\xBF"), buf) {
				// Maybe a byte order mark split across reads: wait for more.
				if _, err := r.br.Peek(3); err == nil {
					continue
				}
				buf, _ = r.br.Peek(r.br.Buffered())
			}
			r.started = true
			if bytes.HasPrefix(buf, []byte("\xEF\xBB\xBF")) {
				_, _ = r.br.Discard(3)
				continue
			}
		}
		i := bytes.IndexAny(buf, "\r\n")
		if i < 0 {
			if int64(len(r.line)+len(buf)) > r.max+lineSlack {
				return nil, transports.TooLarge(r.max)
			}
			r.line = append(r.line, buf...)
			_, _ = r.br.Discard(len(buf))
			continue
		}
		if int64(len(r.line)+i) > r.max+lineSlack {
			return nil, transports.TooLarge(r.max)
		}
		r.line = append(r.line, buf[:i]...)
		r.skipLF = buf[i] == '\r'
		_, _ = r.br.Discard(i + 1)
		return r.line, nil
	}
}
