package udpserver

import (
	"encoding/json"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/utcpd/utcpd/examples/servers/internal/envelope"
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
)

// client is a connected UDP socket talking to a Server on loopback.
type client struct {
	t  *testing.T
	c  net.Conn
	s  *Server
	pc net.PacketConn
}

func serve(t *testing.T, f *fixture.Fixture) *client {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(f, Options{})
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Serve(pc) }()
	t.Cleanup(func() { _ = s.Close(); <-done })
	c, err := net.Dial("udp", pc.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(30 * time.Second)) // a lost datagram fails the test instead of hanging it
	return &client{t: t, c: c, s: s, pc: pc}
}

func (c *client) send(datagram string) {
	c.t.Helper()
	if _, err := c.c.Write([]byte(datagram)); err != nil {
		c.t.Fatal(err)
	}
}

func (c *client) read() string {
	c.t.Helper()
	buf := make([]byte, 1<<16)
	n, err := c.c.Read(buf)
	if err != nil {
		c.t.Fatalf("reading an answer: %v", err)
	}
	return string(buf[:n])
}

// TestDatagrams: each request datagram is answered by datagrams with its
// id; garbage and unknown types get invalid_request and the server goes
// on.
func TestDatagrams(t *testing.T) {
	c := serve(t, fixture.New())
	c.send(`this is not JSON`)
	if got, want := c.read(), `{"type":"error","error":{"code":"invalid_request","message":"not a JSON envelope datagram"}}`; got != want {
		t.Errorf("garbage answered %s, want %s", got, want)
	}
	c.send(`{"type":"bogus","id":"3"}`)
	if got, want := c.read(), `{"type":"error","id":"3","error":{"code":"invalid_request","message":"unknown frame type \"bogus\""}}`; got != want {
		t.Errorf("unknown type answered %s, want %s", got, want)
	}
	c.send(`{"type":"call","id":"4","tool":"add","arguments":{"a":1,"b":2}}`)
	if got, want := c.read(), `{"type":"result","id":"4","result":{"sum":3}}`; got != want {
		t.Errorf("add answered %s, want %s", got, want)
	}
	c.send(`{"type":"call","id":"5","tool":"count","arguments":{"n":2}}`)
	got := []string{c.read(), c.read(), c.read()}
	if want := `{"type":"event","id":"5","data":1} {"type":"event","id":"5","data":2} {"type":"end","id":"5"}`; strings.Join(got, " ") != want {
		t.Errorf("count answered %s, want %s", strings.Join(got, " "), want)
	}
	c.send(`{"type":"utcp","id":"6"}`)
	if got := c.read(); !strings.HasPrefix(got, `{"type":"manual","id":"6","manual":{`) {
		t.Errorf("discovery answered %s", got)
	}
}

// TestResultTooLarge: a result that does not fit one datagram is
// answered with an error datagram. Go's JSON escapes "<" as \u003c, so
// the echo of 20,000 of them is six times the request's size.
func TestResultTooLarge(t *testing.T) {
	c := serve(t, fixture.New())
	c.send(`{"type":"call","id":"big","tool":"echo","arguments":{"s":"` + strings.Repeat("<", 20_000) + `"}}`)
	if got, want := c.read(), `{"type":"error","id":"big","error":{"code":"invalid_request","message":"the result does not fit one datagram"}}`; got != want {
		t.Errorf("an oversized result answered %.200s, want %s", got, want)
	}
	// Any other frame too large is not sent at all.
	err := c.s.send(c.pc, c.c.LocalAddr(), envelope.Frame{Type: envelope.Event, ID: "x", Data: json.RawMessage(`"` + strings.Repeat("a", MaxDatagram) + `"`)})
	if !errors.Is(err, errTooBig) {
		t.Errorf("sending an oversized event: %v, want errTooBig", err)
	}
	// A frame of exactly MaxDatagram bytes is sent.
	frame := envelope.Frame{Type: envelope.Event, ID: "y"}
	overhead, _ := json.Marshal(frame)
	frame.Data = json.RawMessage(`"` + strings.Repeat("a", MaxDatagram-len(overhead)-len(`,"data":""`)) + `"`)
	if err := c.s.send(c.pc, c.c.LocalAddr(), frame); err != nil {
		t.Fatalf("sending an event of exactly MaxDatagram bytes: %v", err)
	}
	if got := c.read(); len(got) != MaxDatagram {
		t.Errorf("the datagram of MaxDatagram bytes arrived with %d", len(got))
	}
}

// TestCancelDatagram: a cancel datagram stops the call it names, which
// is not answered.
func TestCancelDatagram(t *testing.T) {
	f := fixture.New()
	c := serve(t, f)
	c.send(`{"type":"call","id":"slow","tool":"sleep","arguments":{"ms":600000}}`)
	c.send(`{"type":"cancel","id":"slow"}`)
	deadline := time.Now().Add(30 * time.Second)
	for f.Canceled() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the cancel datagram did not stop the sleep call")
		}
		time.Sleep(time.Millisecond)
	}
	// Had the cancelled call been answered, its answer would come first.
	c.send(`{"type":"call","id":"after","tool":"echo","arguments":{}}`)
	if got, want := c.read(), `{"type":"result","id":"after","result":{}}`; got != want {
		t.Errorf("echo after the cancel answered %s, want %s", got, want)
	}
}
