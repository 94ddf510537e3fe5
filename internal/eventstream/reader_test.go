package eventstream

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/utcpd/utcpd/transports"
)

// readEvents reads every event of r.
func readEvents(r *Reader) ([]Event, error) {
	var out []Event
	for {
		ev, err := r.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			return out, err
		}
		out = append(out, ev)
	}
}

func TestSSEReader(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want []Event
	}{
		{"basic", "data: a\n\n", []Event{{Data: "a"}}},
		{"multi-line", "data: a\ndata: b\n\n", []Event{{Data: "a\nb"}}},
		{"all line ends", "data: a\r\ndata: b\rdata: c\n\r\n", []Event{{Data: "a\nb\nc"}}},
		{"comment and unknown field", ":x\nfoo:bar\ndata:a\n\n", []Event{{Data: "a"}}},
		{"event and id", "event: e\nid: 1\ndata: a\n\ndata: b\n\n", []Event{{Type: "e", ID: "1", Data: "a"}, {ID: "1", Data: "b"}}},
		{"id reset", "id: 1\ndata: a\n\nid\ndata: b\n\n", []Event{{ID: "1", Data: "a"}, {Data: "b"}}},
		{"no data, no event", "event: x\n\n\n\ndata: y\n\n", []Event{{Data: "y"}}},
		{"empty data is an event", "data\n\n", []Event{{Data: ""}}},
		{"trailing event without blank line", "data: a\n\ndata: b", []Event{{Data: "a"}, {Data: "b"}}},
		{"trailing event ended by one newline", "data: b\n", []Event{{Data: "b"}}},
		{"BOM only at the start", "\xEF\xBB\xBFdata: a\n\n\xEF\xBB\xBFdata: b\n\n", []Event{{Data: "a"}}},
		{"colon in value", "data: a: b\n\n", []Event{{Data: "a: b"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, mode := range []string{"whole", "one byte"} {
				var src io.Reader = strings.NewReader(c.in)
				if mode == "one byte" {
					src = iotest.OneByteReader(src)
				}
				got, err := readEvents(NewReader(src, 0))
				if err != nil {
					t.Fatalf("%s: %v", mode, err)
				}
				if diff := cmp.Diff(c.want, got); diff != "" {
					t.Errorf("%s (-want +got):\n%s", mode, diff)
				}
			}
		})
	}
}

func TestSSEReaderRetry(t *testing.T) {
	r := NewReader(strings.NewReader("retry: 1500\n\nretry: x\nretry: -1\ndata: a\n\n"), 0)
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	if r.Retry() != 1500*time.Millisecond {
		t.Errorf("Retry = %v, want 1.5s (invalid values are ignored)", r.Retry())
	}
}

func TestSSEReaderErrors(t *testing.T) {
	t.Run("a broken stream drops the partial event", func(t *testing.T) {
		src := io.MultiReader(strings.NewReader("data: a\n\ndata: partial"), iotest.ErrReader(io.ErrUnexpectedEOF))
		got, err := readEvents(NewReader(src, 0))
		if !errors.Is(err, io.ErrUnexpectedEOF) || len(got) != 1 {
			t.Errorf("got %v, %v; want one event, then io.ErrUnexpectedEOF", got, err)
		}
	})
	t.Run("event cap", func(t *testing.T) {
		r := NewReader(strings.NewReader("data: 12345\ndata: 1234\n\ndata: 12345\ndata: 12345\n\n"), 10)
		if ev, err := r.Next(); err != nil || ev.Data != "12345\n1234" {
			t.Fatalf("an event of exactly the cap: %q, %v", ev.Data, err)
		}
		_, err := r.Next()
		if !errors.Is(err, transports.ErrTooLarge) {
			t.Fatalf("err = %v, want transports.ErrTooLarge", err)
		}
		if _, err2 := r.Next(); !errors.Is(err2, transports.ErrTooLarge) {
			t.Errorf("the error is not sticky: %v", err2)
		}
	})
	t.Run("line cap without a line end", func(t *testing.T) {
		endless := io.MultiReader(strings.NewReader("data: "), strings.NewReader(strings.Repeat("x", 1<<20)))
		if _, err := NewReader(endless, 64<<10).Next(); !errors.Is(err, transports.ErrTooLarge) {
			t.Errorf("err = %v, want transports.ErrTooLarge", err)
		}
	})
	t.Run("Reset keeps the last event id and drops the partial event", func(t *testing.T) {
		r := NewReader(io.MultiReader(strings.NewReader("id: 7\ndata: a\n\ndata: par"), iotest.ErrReader(io.ErrUnexpectedEOF)), 0)
		if _, err := readEvents(r); err == nil {
			t.Fatal("want the drop")
		}
		r.Reset(strings.NewReader("tial\n\ndata: b\n\n"))
		got, err := readEvents(r)
		if err != nil {
			t.Fatal(err)
		}
		// "tial" is a line of its own (an unknown field): the partial event
		// was dropped, the id kept.
		want := []Event{{ID: "7", Data: "b"}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
}

// FuzzSSEReader checks that any input parses without panics, that reading
// it byte by byte gives the same events as reading it whole, and that no
// event exceeds the cap.
func FuzzSSEReader(f *testing.F) {
	for _, seed := range []string{
		"data: a\n\n", "event: e\r\nid: 1\r\ndata: {\"x\":1}\r\n\r\n", ":c\rdata:x\r\r", "\xEF\xBB\xBFdata\n\ndata: y",
		"retry: 10\nid: \x00\ndata: z\n\n", "data: " + strings.Repeat("w", 100) + "\n\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		const max = 64
		whole, err1 := readEvents(NewReader(strings.NewReader(string(data)), max))
		bytewise, err2 := readEvents(NewReader(iotest.OneByteReader(strings.NewReader(string(data))), max))
		if (err1 == nil) != (err2 == nil) {
			t.Fatalf("errors differ: %v vs %v", err1, err2)
		}
		if err1 == nil && !cmp.Equal(whole, bytewise) {
			t.Fatalf("events differ:\n%v\n%v", whole, bytewise)
		}
		for _, ev := range whole {
			if len(ev.Data) > max {
				t.Fatalf("event of %d bytes over the cap %d", len(ev.Data), max)
			}
		}
	})
}
