package tcpserver

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

var framings = map[string]Framing{
	"newline":         {},
	"crlf":            {Delimiter: "\r\n"},
	"prefix1":         {PrefixBytes: 1},
	"prefix2":         {PrefixBytes: 2},
	"prefix4":         {PrefixBytes: 4},
	"prefix8":         {PrefixBytes: 8},
	"prefix2 little":  {PrefixBytes: 2, LittleEndian: true},
	"prefix4 little":  {PrefixBytes: 4, LittleEndian: true},
	"prefix8 little":  {PrefixBytes: 8, LittleEndian: true},
	"multi-byte stop": {Delimiter: "<<END>>"},
}

// TestFramingRoundTrip: frames appended one after another come back one
// by one, whole, even when the connection delivers a byte at a time, and
// the end of the stream after the last is io.EOF.
func TestFramingRoundTrip(t *testing.T) {
	payloads := [][]byte{[]byte(`{"type":"call","id":"1"}`), {}, []byte("x"), []byte(strings.Repeat("é", 100)), []byte("END>> <<EN")}
	for name, fr := range framings {
		t.Run(name, func(t *testing.T) {
			var wire []byte
			for _, p := range payloads {
				var err error
				if wire, err = fr.appendFrame(wire, p); err != nil {
					t.Fatalf("appendFrame(%q): %v", p, err)
				}
			}
			for _, src := range map[string]io.Reader{"whole": bytes.NewReader(wire), "byte by byte": iotest.OneByteReader(bytes.NewReader(wire))} {
				// The smallest buffer bufio allows, so long frames span refills.
				r := bufio.NewReaderSize(src, 16)
				for _, want := range payloads {
					got, err := fr.readFrame(r, 1<<10)
					if err != nil {
						t.Fatalf("readFrame: %v, want %q", err, want)
					}
					if !bytes.Equal(got, want) {
						t.Fatalf("readFrame = %q, want %q", got, want)
					}
				}
				if got, err := fr.readFrame(r, 1<<10); err != io.EOF {
					t.Fatalf("after the last frame: %q, %v; want io.EOF", got, err)
				}
			}
		})
	}
}

// TestFramingBytes pins the wire bytes of a few frames, so that both
// directions cannot agree on a wrong layout.
func TestFramingBytes(t *testing.T) {
	for _, c := range []struct {
		fr   Framing
		want string
	}{
		{Framing{}, "hi\n"},
		{Framing{Delimiter: "\r\n"}, "hi\r\n"},
		{Framing{PrefixBytes: 1}, "\x02hi"},
		{Framing{PrefixBytes: 2}, "\x00\x02hi"},
		{Framing{PrefixBytes: 4}, "\x00\x00\x00\x02hi"},
		{Framing{PrefixBytes: 4, LittleEndian: true}, "\x02\x00\x00\x00hi"},
		{Framing{PrefixBytes: 8}, "\x00\x00\x00\x00\x00\x00\x00\x02hi"},
		{Framing{PrefixBytes: 8, LittleEndian: true}, "\x02\x00\x00\x00\x00\x00\x00\x00hi"},
	} {
		got, err := c.fr.appendFrame(nil, []byte("hi"))
		if err != nil || string(got) != c.want {
			t.Errorf("%+v: appendFrame(hi) = %q, %v; want %q", c.fr, got, err, c.want)
		}
	}
	// A length over one byte, both ways round: 0x0102 = 258.
	payload := bytes.Repeat([]byte("a"), 258)
	for fr, want := range map[Framing]string{{PrefixBytes: 2}: "\x01\x02", {PrefixBytes: 2, LittleEndian: true}: "\x02\x01"} {
		got, _ := fr.appendFrame(nil, payload)
		if string(got[:2]) != want {
			t.Errorf("%+v: prefix of 258 bytes = %q, want %q", fr, got[:2], want)
		}
		back, err := fr.readFrame(bufio.NewReader(bytes.NewReader(got)), 1<<10)
		if err != nil || len(back) != 258 {
			t.Errorf("%+v: read back %d bytes, %v", fr, len(back), err)
		}
	}
}

// TestFramingCutShort: a connection that ends inside a frame (inside the
// prefix, inside the body, before the delimiter) is io.ErrUnexpectedEOF,
// not a frame and not a clean end.
func TestFramingCutShort(t *testing.T) {
	for _, c := range []struct {
		fr   Framing
		wire string
	}{
		{Framing{PrefixBytes: 4}, "\x00\x00"},
		{Framing{PrefixBytes: 4}, "\x00\x00\x00\x05abc"},
		{Framing{PrefixBytes: 1}, "\x01"},
		{Framing{}, `{"type":"utcp"`},
		{Framing{Delimiter: "\r\n"}, "abc\r"},
	} {
		got, err := c.fr.readFrame(bufio.NewReader(strings.NewReader(c.wire)), 1<<10)
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("%+v on %q: %q, %v; want io.ErrUnexpectedEOF", c.fr, c.wire, got, err)
		}
	}
}

// TestFramingTooLarge: a length prefix announcing more than the limit is
// refused before the body is read; a delimited frame is refused once the
// limit is passed, having read only about that much; a frame of exactly
// the limit is fine.
func TestFramingTooLarge(t *testing.T) {
	const limit = 100
	// Only the prefix is there: reading the body would be ErrUnexpectedEOF.
	for _, fr := range []Framing{{PrefixBytes: 1}, {PrefixBytes: 4}, {PrefixBytes: 8, LittleEndian: true}} {
		wire, _ := fr.appendFrame(nil, make([]byte, limit+1))
		n := fr.PrefixBytes
		if _, err := fr.readFrame(bufio.NewReader(bytes.NewReader(wire[:n])), limit); !errors.Is(err, errTooLarge) {
			t.Errorf("%+v: a prefix announcing %d bytes: %v, want errTooLarge", fr, limit+1, err)
		}
	}
	// A prefix of 2^64-1 must not overflow into a small size.
	huge := Framing{PrefixBytes: 8}
	if _, err := huge.readFrame(bufio.NewReader(strings.NewReader("\xff\xff\xff\xff\xff\xff\xff\xff")), limit); !errors.Is(err, errTooLarge) {
		t.Errorf("a prefix of 2^64-1: %v, want errTooLarge", err)
	}

	// Delimited: an endless line.
	for _, fr := range []Framing{{}, {Delimiter: "\r\n"}} {
		// Ten times the limit stands for endless: a reader that gets
		// to its end has not stopped at the limit.
		src := &counting{r: iotest.OneByteReader(io.MultiReader(strings.NewReader(strings.Repeat("a", 10*limit)), iotest.ErrReader(errors.New("read far past the limit"))))}
		if _, err := fr.readFrame(bufio.NewReaderSize(src, 16), limit); !errors.Is(err, errTooLarge) {
			t.Fatalf("%+v: an endless line: %v, want errTooLarge", fr, err)
		}
		if src.n > limit+len(fr.delimiter())+16 {
			t.Errorf("%+v: read %d bytes of an endless line with a limit of %d", fr, src.n, limit)
		}
		// A frame one byte over, delimiter and all, is refused too.
		over := strings.Repeat("a", limit+1) + string(fr.delimiter())
		if _, err := fr.readFrame(bufio.NewReader(strings.NewReader(over)), limit); !errors.Is(err, errTooLarge) {
			t.Errorf("%+v: %d bytes and the delimiter: %v, want errTooLarge", fr, limit+1, err)
		}
	}
	for name, fr := range framings {
		wire, err := fr.appendFrame(nil, bytes.Repeat([]byte("a"), limit))
		if err != nil {
			t.Fatal(err)
		}
		if got, err := fr.readFrame(bufio.NewReader(bytes.NewReader(wire)), limit); err != nil || len(got) != limit {
			t.Errorf("%s: a frame of exactly the limit: %d bytes, %v", name, len(got), err)
		}
	}
}

// TestAppendFrameRefuses: what a framing cannot carry is an error, not
// a corrupt stream.
func TestAppendFrameRefuses(t *testing.T) {
	if _, err := (Framing{PrefixBytes: 1}).appendFrame(nil, make([]byte, 256)); !errors.Is(err, errTooLarge) {
		t.Errorf("256 bytes behind a 1-byte prefix: %v, want errTooLarge", err)
	}
	if _, err := (Framing{PrefixBytes: 1}).appendFrame(nil, make([]byte, 255)); err != nil {
		t.Errorf("255 bytes behind a 1-byte prefix: %v", err)
	}
	if _, err := (Framing{PrefixBytes: 2}).appendFrame(nil, make([]byte, 1<<16)); !errors.Is(err, errTooLarge) {
		t.Errorf("64 KiB behind a 2-byte prefix: %v, want errTooLarge", err)
	}
	if _, err := (Framing{}).appendFrame(nil, []byte("two\nlines")); err == nil {
		t.Error("a newline-delimited frame holding a newline was accepted")
	}
}

func TestNewRefusesPrefixSize(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("New accepted PrefixBytes 3")
		}
	}()
	New(nil, Options{Framing: Framing{PrefixBytes: 3}})
}

type counting struct {
	r io.Reader
	n int
}

func (c *counting) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}
