package file

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/utcpd/utcpd/internal/jsonx"
	"github.com/utcpd/utcpd/manuals"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/utcp"
)

// Info describes the file transport to a transports.Registry.
var Info = transports.Info{
	Type:          Type,
	ParseTemplate: ParseTemplate,
	New:           transports.Constructor(New),
	Template:      new(Template),
}

func init() { transports.MustRegister(Info) }

// DefaultMaxFileBytes is the largest file the transport reads when
// Config.MaxFileBytes is 0.
const DefaultMaxFileBytes = 16 << 20

// Config is the file section of the daemon configuration
// (transports.Options.Config).
type Config struct {
	// MaxFileBytes is the largest file read, for discovery or a call; 0
	// means DefaultMaxFileBytes.
	MaxFileBytes int64 `json:"max_file_bytes,omitempty"`
}

// Transport serves file templates. It holds no state besides its
// configuration and closed flag, and is safe for concurrent use.
type Transport struct {
	log     *slog.Logger
	maxSize int64
	closed  atomic.Bool
}

// Interface guard.
var _ transports.Transport = (*Transport)(nil)

// New returns a file Transport. Options.Config, when set, is a Config.
func New(opts transports.Options) (*Transport, error) {
	var cfg Config
	log, err := transports.DecodeConfig(opts, "file", &cfg)
	if err != nil {
		return nil, utcp.Errorf(utcp.CodeInvalidConfig, "file: transport configuration: %w", err)
	}
	if cfg.MaxFileBytes < 0 {
		return nil, utcp.NewError(utcp.CodeInvalidConfig, "file: max_file_bytes must not be negative")
	}
	if cfg.MaxFileBytes == 0 {
		cfg.MaxFileBytes = DefaultMaxFileBytes
	}
	return &Transport{log: log, maxSize: cfg.MaxFileBytes}, nil
}

// errClosed refuses calls after Close.
var errClosed = utcp.NewError(utcp.CodeUnavailable, "file: transport closed")

// RegisterManual reads the manual in the template's file: an OpenAPI
// document (converted) or a UTCP manual. Failures are discovery_failed
// errors that name the file and the problem.
func (t *Transport) RegisterManual(ctx context.Context, tmpl *utcp.CallTemplate) (*utcp.Manual, error) {
	spec, _, err := transports.SpecOf[Template](tmpl, Type, ParseTemplate)
	if err != nil {
		return nil, err
	}
	if t.closed.Load() {
		return nil, errClosed
	}
	fail := func(err error) error {
		return &utcp.Error{Code: utcp.CodeDiscoveryFailed, Message: fmt.Sprintf("file: manual %s: %s: %v", tmpl.Name, spec.FilePath, err), Err: err}
	}
	data, err := t.read(ctx, spec.FilePath)
	if err != nil {
		return nil, fail(err)
	}
	abs, err := filepath.Abs(spec.FilePath)
	if err != nil {
		return nil, fail(err)
	}
	log := t.log.With("manual", tmpl.Name, "file", abs)
	if err := transports.PrecheckManual(ctx, data); err != nil {
		return nil, err
	}
	doc, err := manuals.DecodeDocument(data)
	if err != nil {
		return nil, fail(err)
	}
	var m *utcp.Manual
	if manuals.IsOpenAPI(doc) {
		m, err = manuals.ConvertOpenAPI(doc, manuals.OpenAPIOptions{
			SpecURL:   (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}).String(),
			AuthTools: spec.AuthTools,
			Warn:      func(msg string) { log.Warn("openapi conversion", "warning", msg) },
		})
	} else {
		var warns []manuals.Warning
		m, warns, err = manuals.ParseManual(data)
		for _, w := range warns {
			log.Warn("manual", "warning", w.String())
		}
	}
	if err != nil {
		return nil, fail(err)
	}
	return m, nil
}

// CallTool reads the tool template's file and returns its contents:
// decoded JSON when they parse, else the text. The arguments are ignored.
// A file that cannot be read is a *utcp.TransportError; one over the size
// cap is payload_too_large.
func (t *Transport) CallTool(ctx context.Context, call *utcp.Call) (*utcp.Result, error) {
	spec, _, err := transports.SpecOf[Template](call.Template, Type, ParseTemplate)
	if err != nil {
		return nil, err
	}
	if t.closed.Load() {
		return nil, errClosed
	}
	data, err := t.read(ctx, spec.FilePath)
	if err != nil {
		var ue *utcp.Error
		if errors.As(err, &ue) || ctx.Err() != nil {
			return nil, fmt.Errorf("file: tool %s: %w", call.Tool, err)
		}
		return nil, &utcp.TransportError{Err: fmt.Errorf("file: tool %s: %w", call.Tool, err)}
	}
	return &utcp.Result{Value: decodeContent(data)}, nil
}

// Release does nothing: the file transport keeps no per-manual state.
func (t *Transport) Release(ctx context.Context, tmpl *utcp.CallTemplate) error {
	return nil
}

// Close marks the transport closed. It is idempotent.
func (t *Transport) Close() error {
	t.closed.Store(true)
	return nil
}

// read reads path up to the size cap.
func (t *Transport) read(ctx context.Context, path string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, t.maxSize+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > t.maxSize {
		return nil, &utcp.Error{Code: utcp.CodePayloadTooLarge, Message: fmt.Sprintf("the file is larger than the cap of %d bytes (max_file_bytes)", t.maxSize), Err: transports.ErrTooLarge}
	}
	return data, nil
}

// decodeContent returns data decoded as one JSON value (numbers as
// json.Number) when it is valid JSON, else data as a string.
func decodeContent(data []byte) any {
	if v, ok := jsonx.DecodeValue(data); ok {
		return v
	}
	return string(data)
}
