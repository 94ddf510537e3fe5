package tcpserver

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/utcpd/utcpd/transports/transporttest/fixture"
)

// client is a raw envelope connection to a Server on loopback.
type client struct {
	t  *testing.T
	fr Framing
	nc net.Conn
	br *bufio.Reader
}

func serve(t *testing.T, f *fixture.Fixture, fr Framing) *client {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(f, Options{Framing: fr})
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Serve(ln) }()
	t.Cleanup(func() { _ = s.Close(); <-done })
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(30 * time.Second)) // a hung server fails the test instead of hanging it
	return &client{t: t, fr: fr, nc: nc, br: bufio.NewReader(nc)}
}

func (c *client) send(frame string) {
	c.t.Helper()
	b, err := c.fr.appendFrame(nil, []byte(frame))
	if err != nil {
		c.t.Fatal(err)
	}
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatal(err)
	}
}

func (c *client) read() string {
	c.t.Helper()
	b, err := c.fr.readFrame(c.br, MaxFrame)
	if err != nil {
		c.t.Fatalf("reading an answer: %v", err)
	}
	return string(b)
}

// TestBadFrames: a frame that is not an envelope, or of an unknown
// type, is answered with invalid_request and the connection goes on.
func TestBadFrames(t *testing.T) {
	for name, fr := range map[string]Framing{"newline": {}, "prefix": {PrefixBytes: 2, LittleEndian: true}} {
		t.Run(name, func(t *testing.T) {
			c := serve(t, fixture.New(), fr)
			c.send(`this is not JSON`)
			if got, want := c.read(), `{"type":"error","error":{"code":"invalid_request","message":"not a JSON envelope frame"}}`; got != want {
				t.Errorf("garbage answered %s, want %s", got, want)
			}
			c.send(`{"type":"bogus","id":"3"}`)
			if got, want := c.read(), `{"type":"error","id":"3","error":{"code":"invalid_request","message":"unknown frame type \"bogus\""}}`; got != want {
				t.Errorf("unknown type answered %s, want %s", got, want)
			}
			c.send(`{"type":"call","id":"4","tool":"add","arguments":{"a":1,"b":2}}`)
			if got, want := c.read(), `{"type":"result","id":"4","result":{"sum":3}}`; got != want {
				t.Errorf("add after the garbage answered %s, want %s", got, want)
			}
			c.send(`{"type":"utcp","id":"5"}`)
			if got := c.read(); !strings.HasPrefix(got, `{"type":"manual","id":"5","manual":{`) {
				t.Errorf("discovery answered %s", got)
			}
		})
	}
}

// TestOversizedFrameEndsConnection: a length prefix announcing more than
// MaxFrame closes the connection without an answer.
func TestOversizedFrameEndsConnection(t *testing.T) {
	fr := Framing{PrefixBytes: 4}
	c := serve(t, fixture.New(), fr)
	if _, err := c.nc.Write([]byte{0x04, 0x00, 0x00, 0x01}); err != nil { // 64 MiB + 1
		t.Fatal(err)
	}
	if b, err := c.br.ReadByte(); !errors.Is(err, io.EOF) {
		t.Errorf("after an oversized prefix the server sent %q, %v; want the connection closed", b, err)
	}
}

// TestCancelFrame: a cancel frame stops the call it names, which is not
// answered; other calls on the connection go on.
func TestCancelFrame(t *testing.T) {
	f := fixture.New()
	c := serve(t, f, Framing{})
	c.send(`{"type":"call","id":"slow","tool":"sleep","arguments":{"ms":600000}}`)
	c.send(`{"type":"call","id":"fast","tool":"echo","arguments":{}}`)
	if got, want := c.read(), `{"type":"result","id":"fast","result":{}}`; got != want {
		t.Fatalf("echo answered %s, want %s", got, want)
	}
	c.send(`{"type":"cancel","id":"slow"}`)
	deadline := time.Now().Add(30 * time.Second)
	for f.Canceled() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the cancel frame did not stop the sleep call")
		}
		time.Sleep(time.Millisecond)
	}
	// Had the cancelled call been answered, its answer would come first.
	c.send(`{"type":"call","id":"after","tool":"count","arguments":{"n":1}}`)
	var got []string
	for range 2 {
		got = append(got, c.read())
	}
	if want := `{"type":"event","id":"after","data":1}` + "\n" + `{"type":"end","id":"after"}`; strings.Join(got, "\n") != want {
		t.Errorf("count after the cancel answered\n%s\nwant\n%s", strings.Join(got, "\n"), want)
	}
}

// TestTemplate: the template describes the server's framing.
func TestTemplate(t *testing.T) {
	for _, c := range []struct {
		fr   Framing
		want string
	}{
		{Framing{}, `{"call_template_type":"tcp","envelope":true,"framing_strategy":"delimiter","host":"127.0.0.1","interpret_escape_sequences":false,"max_response_size":67108864,"message_delimiter":"\n","port":9}`},
		{Framing{PrefixBytes: 8, LittleEndian: true}, `{"call_template_type":"tcp","envelope":true,"framing_strategy":"length_prefix","host":"127.0.0.1","length_prefix_bytes":8,"length_prefix_endian":"little","max_response_size":67108864,"port":9}`},
		{Framing{PrefixBytes: 2}, `{"call_template_type":"tcp","envelope":true,"framing_strategy":"length_prefix","host":"127.0.0.1","length_prefix_bytes":2,"max_response_size":67108864,"port":9}`},
	} {
		b, _ := json.Marshal(New(nil, Options{Framing: c.fr}).Template("127.0.0.1:9"))
		if string(b) != c.want {
			t.Errorf("%+v: template %s, want %s", c.fr, b, c.want)
		}
	}
}
