package envelope

import (
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/utcp"
)

// units returns a read function that hands out frames one by one, then
// io.EOF.
func units(frames ...string) func() ([]byte, error) {
	return func() ([]byte, error) {
		if len(frames) == 0 {
			return nil, io.EOF
		}
		f := frames[0]
		frames = frames[1:]
		return []byte(f), nil
	}
}

func answers(frames ...string) func() (*Answer, error) {
	read := units(frames...)
	return func() (*Answer, error) { return NextAnswer(read, "tcp", "frame", "127.0.0.1:1", "7") }
}

// TestNextAnswerSkipsOtherCalls: answers for another id are skipped,
// anything that is not an answer frame is a transport error naming the
// unit, and read's error comes back as it is.
func TestNextAnswerSkipsOtherCalls(t *testing.T) {
	next := answers(`{"type":"result","id":"6","result":1}`, `{"type":"result","id":7,"result":2}`)
	a, err := next()
	if err != nil || a.Type != FrameResult || string(a.Result) != "2" {
		t.Fatalf("got %+v, %v; want the result of id 7", a, err)
	}
	if _, err := next(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the frames: %v, want io.EOF", err)
	}
	for frame, want := range map[string]string{
		`not json`:               "not a utcpd envelope datagram: not json",
		`{"id":"7"}`:             "not a utcpd envelope datagram",
		`{"type":"manual"}`:      `a datagram of unknown type "manual"`,
		`{"type":"call","id":1}`: `a datagram of unknown type "call"`,
	} {
		_, err := NextAnswer(units(frame), "udp", "datagram", "127.0.0.1:1", "7")
		if utcp.CodeOf(err) != utcp.CodeTransportError || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "udp: 127.0.0.1:1 answered") {
			t.Errorf("%s: %v, want a transport error with %q", frame, err, want)
		}
	}
}

// TestCollect: a result frame is the value, events up to the end frame a
// list (empty, not nil, when none came), an error frame the tool's error;
// ended is false only when the call was cut short.
func TestCollect(t *testing.T) {
	cases := []struct {
		name   string
		frames []string
		limit  int64
		want   any
		ended  bool
		code   utcp.Code
	}{
		{"result", []string{`{"type":"event","id":"7","data":1}`, `{"type":"result","id":"7","result":{"a":1}}`}, 100, map[string]any{"a": json.Number("1")}, true, ""},
		{"events", []string{`{"type":"event","id":"7","data":1}`, `{"type":"event","id":"7","data":"x"}`, `{"type":"end","id":"7"}`}, 100, []any{json.Number("1"), "x"}, true, ""},
		{"no events", []string{`{"type":"end","id":"7"}`}, 100, []any{}, true, ""},
		{"tool error", []string{`{"type":"error","id":"7","error":{"message":"boom","data":3}}`}, 100, nil, true, utcp.CodeToolError},
		{"not found", []string{`{"type":"error","id":"7","error":{"code":"tool_not_found","message":"no"}}`}, 100, nil, true, utcp.CodeToolNotFound},
		{"too large", []string{`{"type":"event","id":"7","data":"12345"}`, `{"type":"event","id":"7","data":"12345"}`}, 10, nil, false, utcp.CodePayloadTooLarge},
		{"cut short", []string{`{"type":"event","id":"7","data":1}`}, 100, nil, false, utcp.CodeTransportError},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			next := answers(c.frames...)
			if c.name == "cut short" {
				inner := next
				next = func() (*Answer, error) {
					a, err := inner()
					if errors.Is(err, io.EOF) {
						return nil, &utcp.TransportError{Err: err}
					}
					return a, err
				}
			}
			v, ended, err := Collect(next, "tcp", c.limit)
			if ended != c.ended {
				t.Errorf("ended = %v, want %v", ended, c.ended)
			}
			if c.code != "" {
				if utcp.CodeOf(err) != c.code {
					t.Fatalf("err = %v, want code %s", err, c.code)
				}
				if c.code == utcp.CodePayloadTooLarge && !errors.Is(err, transports.ErrTooLarge) {
					t.Errorf("%v does not wrap ErrTooLarge", err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(v, c.want) {
				t.Fatalf("got %#v, %v; want %#v", v, err, c.want)
			}
		})
	}
}

// TestStream: events, then the result as one last event and io.EOF; an
// early Close aborts the call once and finishes it unended; finish is
// called exactly once.
func TestStream(t *testing.T) {
	var finished []bool
	aborts := 0
	s := NewStream("udp", answers(`{"type":"event","id":"7","event":"tick","data":1}`, `{"type":"result","id":"7","result":2}`),
		func(ended bool) { finished = append(finished, ended) }, func() { aborts++ })
	ev, err := s.Recv()
	if err != nil || ev.Type != "tick" || ev.Data != json.Number("1") {
		t.Fatalf("first: %+v, %v", ev, err)
	}
	ev, err = s.Recv()
	if err != nil || ev.Data != json.Number("2") {
		t.Fatalf("result: %+v, %v", ev, err)
	}
	if _, err := s.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the result: %v, want io.EOF", err)
	}
	_ = s.Close()
	if !reflect.DeepEqual(finished, []bool{true}) || aborts != 0 {
		t.Fatalf("finish calls %v, aborts %d; want [true], 0", finished, aborts)
	}

	finished, aborts = nil, 0
	s = NewStream("udp", answers(`{"type":"event","id":"7","data":1}`), func(ended bool) { finished = append(finished, ended) }, func() { aborts++ })
	if _, err := s.Recv(); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	_ = s.Close()
	if _, err := s.Recv(); utcp.CodeOf(err) != utcp.CodeCanceled || err.Error() != "udp: stream closed" {
		t.Fatalf("after Close: %v, want canceled %q", err, "udp: stream closed")
	}
	if !reflect.DeepEqual(finished, []bool{false}) || aborts != 1 {
		t.Fatalf("finish calls %v, aborts %d; want [false], 1", finished, aborts)
	}

	s = NewStream("tcp", answers(`{"type":"error","id":"7","error":"bad"}`), func(bool) {}, nil)
	var te *utcp.ToolError
	if _, err := s.Recv(); !errors.As(err, &te) || te.Message != "bad" {
		t.Fatalf("error frame: %v, want the tool error %q", err, "bad")
	}
}
