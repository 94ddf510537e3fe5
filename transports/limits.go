package transports

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"

	"github.com/utcpd/utcpd/manuals"
	"github.com/utcpd/utcpd/utcp"
)

// Default discovery limits (the gateway settings max_tools_per_manual and
// max_manual_bytes).
const (
	DefaultMaxToolsPerManual       = 20_000
	DefaultMaxManualBytes    int64 = 16 << 20
)

// PrefixedNames is implemented by a transport that names the tools it
// discovers "<prefix>.<tool>" itself, the prefix taken from the admin's
// manual template (mcp: the server name). The gateway keeps the first
// '.' of such names and replaces the others; of every other transport's
// discovered names it replaces every '.', so that no part of a qualified
// name can be read as another manual's "manual.tool".
type PrefixedNames interface {
	PrefixedToolNames() bool
}

// DiscoveryLimits bound what one manual discovery may bring in. The
// gateway puts them on the context of every RegisterManual
// (WithDiscoveryLimits); a transport reads the manual through
// ReadManual/ReadManualResponse and ParseManual, which apply them, and
// checks the tools it builds itself (mcp, graphql, grpc) with CheckTools.
// A zero field means no limit beyond the transport's own caps.
type DiscoveryLimits struct {
	// MaxTools is the most tools one manual may list.
	MaxTools int
	// MaxBytes is the largest manual (or OpenAPI document, or command
	// output) read for a discovery.
	MaxBytes int64
}

type limitsKey struct{}

// WithDiscoveryLimits returns ctx carrying l.
func WithDiscoveryLimits(ctx context.Context, l DiscoveryLimits) context.Context {
	return context.WithValue(ctx, limitsKey{}, l)
}

// DiscoveryLimitsFrom returns the limits ctx carries (zero when none).
func DiscoveryLimitsFrom(ctx context.Context) DiscoveryLimits {
	l, _ := ctx.Value(limitsKey{}).(DiscoveryLimits)
	return l
}

// ManualReadCap returns the byte cap of a discovery read: own (the
// transport's cap; <= 0 means DefaultMaxResponseBytes), or the context's
// MaxBytes when that is smaller.
func ManualReadCap(ctx context.Context, own int64) int64 {
	if own <= 0 {
		own = DefaultMaxResponseBytes
	}
	if l := DiscoveryLimitsFrom(ctx); l.MaxBytes > 0 && l.MaxBytes < own {
		return l.MaxBytes
	}
	return own
}

// ManualTooLarge is the payload_too_large error of a manual over the
// max_manual_bytes limit. It wraps ErrTooLarge.
func ManualTooLarge(limit int64) error {
	return utcp.Errorf(utcp.CodePayloadTooLarge, "manual larger than %d bytes (the gateway limit max_manual_bytes): %w", limit, ErrTooLarge).
		WithDetail("limit_bytes", limit).WithDetail("limit", "max_manual_bytes")
}

// TooManyTools is the discovery_failed error of a manual that lists more
// than limit tools.
func TooManyTools(limit int) error {
	return utcp.NewError(utcp.CodeDiscoveryFailed, "manual lists more than %d tools (the gateway limit max_tools_per_manual)", limit).
		WithDetail("limit_tools", limit).WithDetail("limit", "max_tools_per_manual")
}

// ReadManual reads a manual from r under ManualReadCap(ctx, own). Past
// the context's limit it stops and returns ManualTooLarge; past own, the
// usual TooLarge.
func ReadManual(ctx context.Context, r io.Reader, own int64) ([]byte, error) {
	limit := ManualReadCap(ctx, own)
	b, err := ReadAllLimit(r, limit)
	if err != nil {
		return b, AsManualTooLarge(ctx, err, limit)
	}
	return b, nil
}

// ReadManualResponse is ReadManual of resp.Body, which it closes; a
// Content-Length over the cap fails at once, without reading.
func ReadManualResponse(ctx context.Context, resp *http.Response, own int64) ([]byte, error) {
	limit := ManualReadCap(ctx, own)
	if resp.ContentLength > limit {
		resp.Body.Close()
		return nil, AsManualTooLarge(ctx, TooLarge(limit), limit)
	}
	defer resp.Body.Close()
	return ReadManual(ctx, resp.Body, own)
}

// CheckManualSize refuses data over the context's MaxBytes (for manuals
// that arrive already read: inline content, a message).
func CheckManualSize(ctx context.Context, data []byte) error {
	if l := DiscoveryLimitsFrom(ctx); l.MaxBytes > 0 && int64(len(data)) > l.MaxBytes {
		return ManualTooLarge(l.MaxBytes)
	}
	return nil
}

// CheckTools refuses n tools over the context's MaxTools.
func CheckTools(ctx context.Context, n int) error {
	if l := DiscoveryLimitsFrom(ctx); l.MaxTools > 0 && n > l.MaxTools {
		return TooManyTools(l.MaxTools)
	}
	return nil
}

// AsManualTooLarge turns err, a payload_too_large error of a discovery
// read capped at limit, into ManualTooLarge when limit is the context's
// MaxBytes; any other err is returned as it is.
func AsManualTooLarge(ctx context.Context, err error, limit int64) error {
	if err != nil && isTooLarge(err) && limit > 0 && limit == DiscoveryLimitsFrom(ctx).MaxBytes {
		return ManualTooLarge(limit)
	}
	return err
}

// PrecheckManual applies the context's limits to a manual's bytes before
// they are decoded: over MaxBytes is ManualTooLarge, and a JSON object
// whose "tools" arrays hold more than MaxTools elements is TooManyTools.
func PrecheckManual(ctx context.Context, data []byte) error {
	if err := CheckManualSize(ctx, data); err != nil {
		return err
	}
	if l := DiscoveryLimitsFrom(ctx); l.MaxTools > 0 && countTools(data, l.MaxTools) > l.MaxTools {
		return TooManyTools(l.MaxTools)
	}
	return nil
}

// ParseManual is manuals.ParseManual under the context's limits: data
// over MaxBytes is ManualTooLarge, and a JSON manual whose "tools" array
// has more than MaxTools elements is TooManyTools, found by a scan of
// the bytes before anything is decoded (so a huge tool list costs no
// decoding). A YAML manual is counted after decoding.
func ParseManual(ctx context.Context, data []byte) (*utcp.Manual, []manuals.Warning, error) {
	if err := PrecheckManual(ctx, data); err != nil {
		return nil, nil, err
	}
	m, warns, err := manuals.ParseManual(data)
	if err != nil {
		return nil, nil, err
	}
	if err := CheckTools(ctx, len(m.Tools)); err != nil {
		return nil, nil, err
	}
	return m, warns, nil
}

// countTools counts the elements of the "tools" arrays of the top-level
// JSON object data (every such key, should it repeat), stopping once the
// count exceeds max. It is a byte scanner that allocates nothing for
// keys without escapes; data that is not a JSON object counts 0 (the
// decoder reports what is wrong with it).
func countTools(data []byte, max int) int {
	i := 0
	for i < len(data) && isJSONSpace(data[i]) {
		i++
	}
	if i >= len(data) || data[i] != '{' {
		return 0
	}
	depth := 0
	count := 0
	inTools := false // inside a top-level "tools" array
	elem := false    // the current tools array has an element
	var key []byte   // the last string seen at depth 1: the key of a '[' opened there
	for ; i < len(data); i++ {
		switch c := data[i]; c {
		case '"':
			start := i
			for i++; i < len(data) && data[i] != '"'; i++ {
				if data[i] == '\\' {
					i++
				}
			}
			if depth == 1 {
				key = data[start:min(i+1, len(data))]
			}
			if inTools && depth == 2 {
				elem = true
			}
		case '{', '[':
			if inTools && depth == 2 {
				elem = true
			}
			depth++
			if c == '[' && depth == 2 && isToolsKey(key) {
				inTools, elem = true, false
			}
		case '}', ']':
			if inTools && depth == 2 {
				if elem {
					count++
				}
				inTools = false
			}
			depth--
			if depth == 0 {
				return count
			}
		case ',':
			if inTools && depth == 2 {
				count++
				elem = false
				if count > max {
					return count
				}
			}
		default:
			if inTools && depth == 2 && !isJSONSpace(c) {
				elem = true
			}
		}
	}
	return count
}

func isToolsKey(key []byte) bool {
	if bytes.Equal(key, []byte(`"tools"`)) {
		return true
	}
	if bytes.IndexByte(key, '\\') < 0 {
		return false
	}
	var s string
	return json.Unmarshal(key, &s) == nil && s == "tools"
}

func isJSONSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

func isTooLarge(err error) bool {
	return utcp.CodeOf(err) == utcp.CodePayloadTooLarge
}

// IsLimit reports whether err is one of the discovery limit errors
// (ManualTooLarge, TooManyTools), which discovery paths return as they
// are rather than as "not a manual".
func IsLimit(err error) bool {
	var ue *utcp.Error
	if !errors.As(err, &ue) {
		return false
	}
	l, _ := ue.Details["limit"].(string)
	return l == "max_tools_per_manual" || l == "max_manual_bytes"
}

// DefaultMaxEventBytes caps one server-sent event (its data lines joined)
// and one line of a line-delimited stream when a transport is not
// configured otherwise: 16 MiB.
const DefaultMaxEventBytes int64 = 16 << 20

// DefaultMaxResponseBytes is the response body cap used when a transport is
// not configured otherwise: 64 MiB.
const DefaultMaxResponseBytes int64 = 64 << 20

// ReadAllLimit reads r to its end, but never holds more than max+1 bytes:
// past max bytes it stops and returns a *utcp.Error of code
// payload_too_large that wraps ErrTooLarge. max <= 0 means
// DefaultMaxResponseBytes. Errors of r are returned as they are, with the
// bytes read so far.
func ReadAllLimit(r io.Reader, max int64) ([]byte, error) {
	if max <= 0 {
		max = DefaultMaxResponseBytes
	}
	if max == math.MaxInt64 {
		max--
	}
	b, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return b, err
	}
	if int64(len(b)) > max {
		return nil, TooLarge(max)
	}
	return b, nil
}

// TooLarge returns the payload_too_large error for a body over max bytes.
// It wraps ErrTooLarge.
func TooLarge(max int64) error {
	return utcp.Errorf(utcp.CodePayloadTooLarge, "response larger than %d bytes: %w", max, ErrTooLarge).
		WithDetail("limit_bytes", max)
}
