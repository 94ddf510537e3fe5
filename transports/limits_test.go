package transports

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/utcpd/utcpd/utcp"
)

func TestCountTools(t *testing.T) {
	tests := []struct {
		in   string
		want int
	}{
		{`{"utcp_version":"1.0","tools":[]}`, 0},
		{`{"tools":[{"name":"a"}]}`, 1},
		{` {"tools" : [ {"name":"a","inputs":{"x":[1,2,3]}} , {"name":"b,c]"} ,"s"]}`, 3},
		{`{"name":"tools","x":[1,2,3],"tools":[{"a":[{},{}]},{}]}`, 2},
		{`{"meta":{"tools":[1,2,3]},"tools":[1]}`, 1},
		{`{"tool\u0073":[1,2]}`, 2},
		{`{"tools":[1],"tools":[2,3]}`, 3},
		{`{"s":"a\"b","tools":["x\"]",2]}`, 2},
		{`[{"tools":[1,2]}]`, 0},
		{`tools: [a, b]`, 0},
	}
	for _, tc := range tests {
		if got := countTools([]byte(tc.in), 100); got != tc.want {
			t.Errorf("countTools(%s) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

func bigManual(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"utcp_version":"1.0.1","tools":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"name":"t%d","inputs":{"type":"object"}}`, i)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

func TestParseManualLimits(t *testing.T) {
	data := bigManual(30)
	ctx := WithDiscoveryLimits(context.Background(), DiscoveryLimits{MaxTools: 30, MaxBytes: int64(len(data))})
	m, _, err := ParseManual(ctx, data)
	if err != nil || len(m.Tools) != 30 {
		t.Fatalf("at the limits: %v, %v", m, err)
	}
	_, _, err = ParseManual(WithDiscoveryLimits(context.Background(), DiscoveryLimits{MaxTools: 29}), data)
	if utcp.CodeOf(err) != utcp.CodeDiscoveryFailed || !strings.Contains(err.Error(), "more than 29 tools") || !IsLimit(err) {
		t.Fatalf("over max tools: %v", err)
	}
	_, _, err = ParseManual(WithDiscoveryLimits(context.Background(), DiscoveryLimits{MaxBytes: int64(len(data)) - 1}), data)
	if utcp.CodeOf(err) != utcp.CodePayloadTooLarge || !strings.Contains(err.Error(), "max_manual_bytes") || !IsLimit(err) {
		t.Fatalf("over max bytes: %v", err)
	}
	// YAML is counted after decoding.
	yaml := []byte("utcp_version: 1.0.1\ntools:\n  - name: a\n  - name: b\n")
	if _, _, err := ParseManual(WithDiscoveryLimits(context.Background(), DiscoveryLimits{MaxTools: 1}), yaml); !IsLimit(err) {
		t.Fatalf("yaml over max tools: %v", err)
	}
	// No limits on the context: as manuals.ParseManual.
	if m, _, err := ParseManual(context.Background(), data); err != nil || len(m.Tools) != 30 {
		t.Fatalf("no limits: %v", err)
	}
}

func TestManualReadCap(t *testing.T) {
	ctx := WithDiscoveryLimits(context.Background(), DiscoveryLimits{MaxBytes: 10})
	if got := ManualReadCap(ctx, 100); got != 10 {
		t.Fatalf("cap %d", got)
	}
	if got := ManualReadCap(ctx, 5); got != 5 {
		t.Fatalf("cap %d", got)
	}
	if got := ManualReadCap(context.Background(), 0); got != DefaultMaxResponseBytes {
		t.Fatalf("cap %d", got)
	}
	_, err := ReadManual(ctx, strings.NewReader(strings.Repeat("x", 11)), 100)
	if !IsLimit(err) || utcp.CodeOf(err) != utcp.CodePayloadTooLarge {
		t.Fatalf("ReadManual over the limit: %v", err)
	}
	_, err = ReadManual(ctx, strings.NewReader(strings.Repeat("x", 11)), 5)
	if IsLimit(err) || utcp.CodeOf(err) != utcp.CodePayloadTooLarge {
		t.Fatalf("ReadManual over the transport's own cap: %v", err)
	}
}

func TestReadAllLimit(t *testing.T) {
	for _, c := range []struct {
		n, max int64
		ok     bool
	}{{0, 10, true}, {10, 10, true}, {11, 10, false}, {1 << 20, 1 << 10, false}} {
		b, err := ReadAllLimit(bytes.NewReader(make([]byte, c.n)), c.max)
		if c.ok {
			if err != nil || int64(len(b)) != c.n {
				t.Errorf("ReadAllLimit(%d, %d) = %d bytes, %v", c.n, c.max, len(b), err)
			}
			continue
		}
		if !errors.Is(err, ErrTooLarge) || utcp.CodeOf(err) != utcp.CodePayloadTooLarge {
			t.Errorf("ReadAllLimit(%d, %d): err = %v, want payload_too_large", c.n, c.max, err)
		}
	}
}
