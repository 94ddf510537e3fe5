package webrtc

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/transports/internal/httpcall"
	"github.com/utcpd/utcpd/utcp"
)

// Type is the call_template_type this package implements.
const Type = "webrtc"

// Defaults of a webrtc call template.
const (
	// DefaultDataChannelName is the label of the data channel when the
	// template sets no data_channel_name (UTCP v0.1's default).
	DefaultDataChannelName = "tools"
	// DefaultConnectTimeout bounds connecting (signaling, ICE, DTLS, the
	// data channel opening) when the template sets no connect_timeout.
	DefaultConnectTimeout = 15 * time.Second
	// DefaultTimeout bounds a call (and discovery) when the template sets
	// no timeout.
	DefaultTimeout = 30 * time.Second
)

// Template holds the webrtc-specific fields of a call template. The base
// fields (name, call_template_type, auth, allowed_communication_protocols)
// live in utcp.CallTemplate; auth applies to the signaling requests.
type Template struct {
	// SignalingServer is the URL of the signaling endpoint: http(s)://
	// (one POST carries the offer, its answer the SDP answer) or ws(s)://
	// (offer, answer and trickled candidates as WebSocket messages).
	// Plain http:// and ws:// are allowed only to loopback hosts unless
	// AllowInsecure is set. Required.
	SignalingServer string `json:"signaling_server" jsonschema:"required"`
	// PeerID names the tool server's peer at the signaling server. It is
	// sent with the offer. Required.
	PeerID string `json:"peer_id" jsonschema:"required"`
	// DataChannelName is the label of the data channel utcpd opens;
	// empty means DefaultDataChannelName ("tools").
	DataChannelName string `json:"data_channel_name,omitempty"`
	// ICEServers are the STUN and TURN servers used to gather candidates.
	// Credentials may come from variables (${TURN_PASSWORD}).
	ICEServers []ICEServer `json:"ice_servers,omitempty"`
	// Headers are sent with the signaling request (the POST, or the
	// WebSocket handshake).
	Headers map[string]string `json:"headers,omitempty"`
	// Trickle sends ICE candidates as they are gathered instead of
	// waiting for gathering to complete. Nil means true for ws(s)://
	// signaling and false for http(s)://, which cannot trickle.
	Trickle *bool `json:"trickle,omitempty"`
	// ConnectTimeout bounds connecting, from the offer to the open data
	// channel, in milliseconds. Zero means DefaultConnectTimeout.
	ConnectTimeout float64 `json:"connect_timeout,omitempty"`
	// Timeout bounds one call, and discovery, in milliseconds, not
	// counting the connection it may have to open first. Zero means
	// DefaultTimeout.
	Timeout float64 `json:"timeout,omitempty"`
	// AllowInsecure permits plain http:// or ws:// signaling to hosts that
	// are not loopback. The data channel itself is always encrypted
	// (DTLS), but a signaling path in clear text lets an attacker swap
	// the answer's certificate fingerprint. A utcpd extension.
	AllowInsecure bool `json:"allow_insecure,omitempty"`
}

// ICEServer is one STUN or TURN server, as in the browser's RTCIceServer.
type ICEServer struct {
	// URLs are stun:, stuns:, turn: or turns: URIs. In JSON, "urls" may
	// be one string or a list (the browser's form); "url" is accepted too.
	URLs []string `json:"urls"`
	// Username authenticates to a TURN server.
	Username string `json:"username,omitempty"`
	// Credential is the TURN password.
	Credential string `json:"credential,omitempty"`
}

// UnmarshalJSON accepts "urls" (a string or a list of strings) and the
// older single "url".
func (s *ICEServer) UnmarshalJSON(b []byte) error {
	var w struct {
		URLs       json.RawMessage `json:"urls"`
		URL        string          `json:"url"`
		Username   string          `json:"username"`
		Credential string          `json:"credential"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return fmt.Errorf("field ice_servers: %w", err)
	}
	*s = ICEServer{Username: w.Username, Credential: w.Credential}
	if u := bytes.TrimSpace(w.URLs); len(u) > 0 && !bytes.Equal(u, []byte("null")) {
		var one string
		if json.Unmarshal(u, &one) == nil {
			s.URLs = []string{one}
		} else if err := json.Unmarshal(u, &s.URLs); err != nil {
			return errors.New("field ice_servers: urls must be a string or a list of strings")
		}
	}
	if w.URL != "" {
		s.URLs = append(s.URLs, w.URL)
	}
	return nil
}

// iceSchemes are the URI schemes of ICE servers.
var iceSchemes = []string{"stun", "stuns", "turn", "turns"}

// Validate checks the template as written (before variable substitution).
// Errors name the field.
func (t *Template) Validate() error {
	if strings.TrimSpace(t.SignalingServer) == "" {
		return errors.New("field signaling_server is required")
	}
	if !strings.Contains(t.SignalingServer, "$") {
		if _, err := t.signalingURL(); err != nil {
			return err
		}
	}
	if strings.TrimSpace(t.PeerID) == "" {
		return errors.New("field peer_id is required")
	}
	if len(t.DataChannelName) > 65535 {
		return errors.New("field data_channel_name is longer than 65535 bytes")
	}
	for i, s := range t.ICEServers {
		if len(s.URLs) == 0 {
			return fmt.Errorf("field ice_servers[%d]: urls is required", i)
		}
		for _, u := range s.URLs {
			if strings.Contains(u, "$") {
				continue // checked once the variable is substituted
			}
			scheme, _, ok := strings.Cut(u, ":")
			if !ok || !slices.Contains(iceSchemes, strings.ToLower(scheme)) {
				return fmt.Errorf("field ice_servers[%d]: %q is not a stun:, stuns:, turn: or turns: URI", i, u)
			}
		}
	}
	if err := httpcall.ValidateHeaders("headers", t.Headers); err != nil {
		return err
	}
	if t.ConnectTimeout < 0 {
		return errors.New("field connect_timeout must not be negative")
	}
	if t.Timeout < 0 {
		return errors.New("field timeout must not be negative")
	}
	if t.Trickle != nil && *t.Trickle && !strings.Contains(t.SignalingServer, "$") && !t.websocketSignaling() {
		return errors.New("field trickle: http(s):// signaling exchanges one offer and one answer, so it cannot trickle candidates (use a ws(s):// signaling_server)")
	}
	return nil
}

// signalingURL parses signaling_server and checks its scheme.
func (t *Template) signalingURL() (*url.URL, error) {
	u, err := url.Parse(t.SignalingServer)
	if err != nil {
		return nil, fmt.Errorf("field signaling_server: %w", err)
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https", "ws", "wss":
	default:
		return nil, fmt.Errorf("field signaling_server: %q is not an absolute http(s):// or ws(s):// URL", t.SignalingServer)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("field signaling_server: %q has no host", t.SignalingServer)
	}
	return u, nil
}

// websocketSignaling reports whether signaling runs over a WebSocket.
func (t *Template) websocketSignaling() bool {
	s := strings.ToLower(t.SignalingServer)
	return strings.HasPrefix(s, "ws://") || strings.HasPrefix(s, "wss://")
}

func (t *Template) trickle() bool {
	if t.Trickle != nil {
		return *t.Trickle && t.websocketSignaling()
	}
	return t.websocketSignaling()
}

func (t *Template) channelName() string {
	if t.DataChannelName == "" {
		return DefaultDataChannelName
	}
	return t.DataChannelName
}

func (t *Template) connectTimeout() time.Duration {
	if t.ConnectTimeout > 0 {
		return time.Duration(t.ConnectTimeout * float64(time.Millisecond))
	}
	return DefaultConnectTimeout
}

func (t *Template) timeout() time.Duration {
	if t.Timeout > 0 {
		return time.Duration(t.Timeout * float64(time.Millisecond))
	}
	return DefaultTimeout
}

// redacted renders signaling_server for messages and logs.
func (t *Template) redacted() string {
	u, err := url.Parse(t.SignalingServer)
	if err != nil {
		return "(invalid URL)"
	}
	return utcp.RedactURL(u)
}

// connKey identifies a shareable peer connection: the manual and
// everything that shapes the connection (signaling URL, peer, channel,
// ICE servers, headers, auth, trickle, allow_insecure).
func connKey(manual string, spec *Template, auth *utcp.Auth) string {
	b, _ := json.Marshal(struct {
		URL      string
		Peer     string
		Channel  string
		ICE      []ICEServer
		Headers  map[string]string
		Auth     *utcp.Auth
		Trickle  bool
		Insecure bool
	}{spec.SignalingServer, spec.PeerID, spec.channelName(), spec.ICEServers, canonicalHeaders(spec.Headers), auth, spec.trickle(), spec.AllowInsecure})
	sum := sha256.Sum256(b)
	return manual + "\x00" + hex.EncodeToString(sum[:])
}

func canonicalHeaders(h map[string]string) map[string]string {
	if len(h) == 0 {
		return nil
	}
	out := make(map[string]string, len(h))
	for k, v := range h {
		out[http.CanonicalHeaderKey(k)] = v
	}
	return out
}

// ParseTemplate decodes and validates a webrtc call template (see
// transports.DecodeTemplate) and returns it with Spec set to a *Template.
// A template of another call_template_type is an invalid_template error.
func ParseTemplate(raw json.RawMessage) (utcp.CallTemplate, error) {
	tmpl, _, err := transports.DecodeTemplateOf[Template](raw, Type)
	return tmpl, err
}
