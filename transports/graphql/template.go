package graphql

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/transports/internal/httpcall"
	"github.com/utcpd/utcpd/transports/internal/httpclient"
	"github.com/utcpd/utcpd/utcp"
)

// Type is the call_template_type this package implements.
const Type = "graphql"

// The operation_type values.
const (
	OpQuery        = "query"
	OpMutation     = "mutation"
	OpSubscription = "subscription"
)

// Defaults of the graphql call template.
const (
	// DefaultSelectionDepth is how many levels of nested objects a
	// generated selection set reaches when selection_depth is unset.
	DefaultSelectionDepth = 2
	// MaxSelectionDepth bounds selection_depth.
	MaxSelectionDepth = 10
	// DefaultTimeout bounds discovery and the WebSocket handshake of a
	// subscription (up to connection_ack) when the template sets no
	// timeout.
	DefaultTimeout = 30 * time.Second
)

// Template holds the graphql-specific fields of a call template. The base
// fields (name, call_template_type, auth, allowed_communication_protocols)
// live in utcp.CallTemplate.
type Template struct {
	// URL is the GraphQL endpoint, http:// or https://. Queries and
	// mutations are POSTed to it. Required.
	URL string `json:"url" jsonschema:"required"`
	// SubscriptionURL is the graphql-transport-ws endpoint for
	// subscriptions, ws:// or wss://. Empty means URL with its scheme
	// changed (http → ws, https → wss). A utcpd extension.
	SubscriptionURL string `json:"subscription_url,omitempty"`
	// OperationType is query (the default), mutation or subscription. It
	// is the operation a call makes when the template names a tool that
	// discovery did not see; discovered tools carry their own.
	OperationType string `json:"operation_type,omitempty"`
	// OperationName is sent as operationName with Query, and names the
	// single tool such a template describes.
	OperationName string `json:"operation_name,omitempty"`
	// Query is a whole GraphQL document used as it is: the template then
	// describes one tool, whose arguments are the document's variables.
	Query string `json:"query,omitempty"`
	// VariableTypes maps an argument to its GraphQL type ("String!",
	// "[ID!]"), overriding what introspection found, and types the
	// variables of documents utcpd writes for tools it did not discover
	// (default: inferred from the JSON value).
	VariableTypes map[string]string `json:"variable_types,omitempty"`
	// Headers are sent with every request and with the WebSocket
	// handshake.
	Headers map[string]string `json:"headers,omitempty"`
	// HeaderFields names arguments sent as request headers instead of
	// variables.
	HeaderFields []string `json:"header_fields,omitempty"`
	// SelectionDepth is how many levels of nested objects a generated
	// selection set reaches (1: the result's own scalar fields). Zero
	// means DefaultSelectionDepth. A utcpd extension.
	SelectionDepth int `json:"selection_depth,omitempty"`
	// Timeout, in milliseconds, bounds one query or mutation call, a
	// subscription read whole by CallTool, discovery, and the handshake
	// of a streamed subscription. Zero means the caller's deadline alone
	// for calls and DefaultTimeout for discovery and handshakes. A utcpd
	// extension.
	Timeout float64 `json:"timeout,omitempty"`
	// AllowInsecure permits plain http:// and ws:// to hosts that are not
	// loopback. A utcpd extension.
	AllowInsecure bool `json:"allow_insecure,omitempty"`
}

// typeRE matches a GraphQL type reference as written in a variable
// definition: a named type wrapped in any lists and non-null markers.
var typeRE = regexp.MustCompile(`^\s*\[*\s*[_A-Za-z][_0-9A-Za-z]*\s*!?\s*(\]\s*!?\s*)*$`)

// nameRE matches a GraphQL name.
var nameRE = regexp.MustCompile(`^[_A-Za-z][_0-9A-Za-z]*$`)

// Validate checks the template as written (before variable substitution).
// Errors name the field.
func (t *Template) Validate() error {
	if err := httpcall.ValidateTemplateURL(t.URL, "http", "https"); err != nil {
		return err
	}
	if t.SubscriptionURL != "" {
		if err := httpcall.ValidateTemplateURL(t.SubscriptionURL, "ws", "wss"); err != nil {
			return fmt.Errorf("field subscription_url: %v", strings.TrimPrefix(err.Error(), "field url: "))
		}
	}
	switch t.OperationType {
	case "", OpQuery, OpMutation, OpSubscription:
	default:
		return fmt.Errorf("field operation_type: %q is not one of query, mutation, subscription", t.OperationType)
	}
	if t.OperationName != "" && !nameRE.MatchString(t.OperationName) {
		return fmt.Errorf("field operation_name: %q is not a GraphQL name", t.OperationName)
	}
	if t.Query != "" && strings.TrimSpace(t.Query) == "" {
		return errors.New("field query is blank")
	}
	for _, k := range sortedKeys(t.VariableTypes) {
		if !nameRE.MatchString(k) {
			return fmt.Errorf("field variable_types: %q is not a GraphQL name", k)
		}
		if !typeRE.MatchString(t.VariableTypes[k]) || strings.Count(t.VariableTypes[k], "[") != strings.Count(t.VariableTypes[k], "]") {
			return fmt.Errorf("field variable_types: the type %q of %q is not a GraphQL type such as String! or [ID!]", t.VariableTypes[k], k)
		}
	}
	if err := httpcall.ValidateHeaders("headers", t.Headers); err != nil {
		return err
	}
	for _, k := range t.HeaderFields {
		if !httpclient.ValidHeaderName(k) {
			return fmt.Errorf("field header_fields: %q is not a valid header name", k)
		}
	}
	if t.SelectionDepth < 0 || t.SelectionDepth > MaxSelectionDepth {
		return fmt.Errorf("field selection_depth must be between 1 and %d", MaxSelectionDepth)
	}
	if t.Timeout < 0 {
		return errors.New("field timeout must not be negative")
	}
	return nil
}

func (t *Template) operationType() string {
	if t.OperationType == "" {
		return OpQuery
	}
	return t.OperationType
}

func (t *Template) selectionDepth() int {
	if t.SelectionDepth == 0 {
		return DefaultSelectionDepth
	}
	return t.SelectionDepth
}

func (t *Template) timeout() time.Duration {
	return time.Duration(t.Timeout * float64(time.Millisecond))
}

// subscriptionURL returns the graphql-transport-ws URL: SubscriptionURL,
// or URL with ws/wss for http/https.
func (t *Template) subscriptionURL() (*url.URL, error) {
	raw := t.SubscriptionURL
	if raw == "" {
		raw = t.URL
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, utcp.Errorf(utcp.CodeInvalidTemplate, "graphql: subscription url: %w", err)
	}
	switch strings.ToLower(u.Scheme) {
	case "http":
		u.Scheme = "ws"
	case "https":
		u.Scheme = "wss"
	}
	if err := httpclient.CheckURL(u, t.AllowInsecure); err != nil {
		return nil, err
	}
	if s := strings.ToLower(u.Scheme); s != "ws" && s != "wss" {
		return nil, utcp.NewError(utcp.CodeInvalidTemplate, "graphql: subscription url %q is not ws:// or wss://", utcp.RedactURL(u))
	}
	return u, nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// ParseTemplate decodes and validates a graphql call template (see
// transports.DecodeTemplate) and returns it with Spec set to a *Template.
// A template of another call_template_type is an invalid_template error.
func ParseTemplate(raw json.RawMessage) (utcp.CallTemplate, error) {
	tmpl, _, err := transports.DecodeTemplateOf[Template](raw, Type)
	return tmpl, err
}
