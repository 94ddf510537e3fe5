package text

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/utcpd/utcpd/internal/jsonx"
	"github.com/utcpd/utcpd/manuals"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/utcp"
)

// Info describes the text transport to a transports.Registry.
var Info = transports.Info{
	Type:          Type,
	ParseTemplate: ParseTemplate,
	New: func(opts transports.Options) (transports.Transport, error) {
		return New(opts), nil
	},
	Template: new(Template),
}

func init() { transports.MustRegister(Info) }

// SpecURL is the spec URL an OpenAPI document in a text template is
// converted with, as in python-utcp.
const SpecURL = "text://content"

// Transport serves text templates. It holds no state besides its closed
// flag and is safe for concurrent use.
type Transport struct {
	log    *slog.Logger
	closed atomic.Bool
}

// Interface guard.
var _ transports.Transport = (*Transport)(nil)

// New returns a text Transport. The text transport takes no
// configuration; Options.Config is ignored.
func New(opts transports.Options) *Transport {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Transport{log: log}
}

// errClosed refuses calls after Close.
var errClosed = utcp.NewError(utcp.CodeUnavailable, "text: transport closed")

// RegisterManual reads the manual in the template's content: an OpenAPI
// document (converted) or a UTCP manual. Failures are discovery_failed
// errors that name the problem.
func (t *Transport) RegisterManual(ctx context.Context, tmpl *utcp.CallTemplate) (*utcp.Manual, error) {
	spec, _, err := transports.SpecOf[Template](tmpl, Type, ParseTemplate)
	if err != nil {
		return nil, err
	}
	if t.closed.Load() {
		return nil, errClosed
	}
	if err := transports.PrecheckManual(ctx, []byte(spec.Content)); err != nil {
		return nil, err
	}
	m, err := parseDocument([]byte(spec.Content), manuals.OpenAPIOptions{
		SpecURL:   SpecURL,
		BaseURL:   spec.BaseURL,
		AuthTools: spec.AuthTools,
	}, t.log.With("manual", tmpl.Name))
	if err != nil {
		return nil, &utcp.Error{Code: utcp.CodeDiscoveryFailed, Message: fmt.Sprintf("text: manual %s: content: %v", tmpl.Name, err), Err: err}
	}
	return m, nil
}

// CallTool returns the tool template's content: decoded JSON when it
// parses, else the text. The arguments are ignored.
func (t *Transport) CallTool(ctx context.Context, call *utcp.Call) (*utcp.Result, error) {
	spec, _, err := transports.SpecOf[Template](call.Template, Type, ParseTemplate)
	if err != nil {
		return nil, err
	}
	if t.closed.Load() {
		return nil, errClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("text: tool %s: %w", call.Tool, err)
	}
	return &utcp.Result{Value: decodeContent([]byte(spec.Content))}, nil
}

// Release does nothing: the text transport keeps no per-manual state.
func (t *Transport) Release(ctx context.Context, tmpl *utcp.CallTemplate) error {
	return nil
}

// Close marks the transport closed. It is idempotent.
func (t *Transport) Close() error {
	t.closed.Store(true)
	return nil
}

// parseDocument reads a manual document: data decoded as JSON, else
// YAML; an OpenAPI description (an openapi, swagger or paths key) is
// converted with manuals.ConvertOpenAPI and opts, anything else is parsed
// as a UTCP manual with manuals.ParseManual. Warnings of either go to
// log. Errors are the manuals package's *utcp.Error values
// (invalid_manual).
func parseDocument(data []byte, opts manuals.OpenAPIOptions, log *slog.Logger) (*utcp.Manual, error) {
	doc, err := manuals.DecodeDocument(data)
	if err != nil {
		return nil, err
	}
	if manuals.IsOpenAPI(doc) {
		if opts.Warn == nil {
			opts.Warn = func(msg string) { log.Warn("openapi conversion", "warning", msg) }
		}
		return manuals.ConvertOpenAPI(doc, opts)
	}
	m, warns, err := manuals.ParseManual(data)
	if err != nil {
		return nil, err
	}
	for _, w := range warns {
		log.Warn("manual", "warning", w.String())
	}
	return m, nil
}

// decodeContent returns data decoded as one JSON value (numbers as
// json.Number) when it is valid JSON, else data as a string.
func decodeContent(data []byte) any {
	if v, ok := jsonx.DecodeValue(data); ok {
		return v
	}
	return string(data)
}
