package grpc

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	ggrpc "google.golang.org/grpc"

	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/transports/internal/httpclient"
	"github.com/utcpd/utcpd/utcp"
)

// Type is the call_template_type this package implements.
const Type = "grpc"

// DefaultTimeout bounds a call (and discovery) whose template sets no
// timeout.
const DefaultTimeout = 30 * time.Second

// DefaultMaxMessageSize caps one message received or sent when the
// template sets no max_message_size: 16 MiB (grpc-go's own default for
// received messages is 4 MiB).
const DefaultMaxMessageSize = 16 << 20

// Template holds the grpc-specific fields of a call template. The base
// fields (name, call_template_type, auth, allowed_communication_protocols)
// live in utcp.CallTemplate.
type Template struct {
	// Host is the server's host name or IP address; with Port it names the
	// server unless Target is set.
	Host string `json:"host,omitempty"`
	// Port is the server's TCP port, 1 to 65535.
	Port int `json:"port,omitempty"`
	// Target is a gRPC target instead of Host and Port: "host:port",
	// "dns:///host:port", "unix:///path/to.sock" and the other schemes
	// grpc-go resolves.
	Target string `json:"target,omitempty"`
	// ServiceName is a fully-qualified service name ("pkg.Service"). In a
	// manual template it restricts discovery to that service; in a tool's
	// template, with MethodName, it names the method to call.
	ServiceName string `json:"service_name,omitempty"`
	// MethodName is a method of ServiceName. In a manual template it
	// restricts discovery to that one method; in a tool's template it is
	// the method called, whatever the tool's name.
	MethodName string `json:"method_name,omitempty"`
	// UseSSL connects with TLS (the system roots, or CAFile).
	UseSSL bool `json:"use_ssl,omitempty"`
	// CAFile is a PEM file of the certificate authorities trusted for the
	// server's certificate instead of the system roots. Needs UseSSL.
	CAFile string `json:"ca_file,omitempty"`
	// CertFile and KeyFile are a PEM client certificate and its key, for
	// servers that ask for one (mutual TLS). Need UseSSL.
	CertFile string `json:"cert_file,omitempty"`
	// KeyFile is the private key of CertFile.
	KeyFile string `json:"key_file,omitempty"`
	// ServerName overrides the name checked against the server's
	// certificate (and sent as SNI). Needs UseSSL.
	ServerName string `json:"server_name,omitempty"`
	// InsecureSkipVerify accepts any server certificate. DANGEROUS: anyone
	// on the path can impersonate the server and read the credentials
	// sent to it. For tests only. Needs UseSSL.
	InsecureSkipVerify bool `json:"insecure_skip_verify,omitempty"`
	// Metadata is sent with every call (and reflection request). Keys are
	// lower-cased; keys ending in "-bin" take base64 values, sent as the
	// decoded bytes.
	Metadata map[string]string `json:"metadata,omitempty"`
	// DescriptorSet is the path of a binary FileDescriptorSet (protoc
	// --descriptor_set_out --include_imports, buf build -o) describing
	// the services, used instead of server reflection.
	DescriptorSet string `json:"descriptor_set,omitempty"`
	// ProtoFiles are .proto files compiled at registration, instead of
	// server reflection; their imports are looked up in ImportPaths
	// (google/protobuf/*.proto are built in).
	ProtoFiles []string `json:"proto_files,omitempty"`
	// ImportPaths are the folders ProtoFiles and their imports are found
	// in; empty means the current directory.
	ImportPaths []string `json:"import_paths,omitempty"`
	// Timeout bounds one call, streams included, and discovery, in
	// milliseconds. Zero means DefaultTimeout.
	Timeout float64 `json:"timeout,omitempty"`
	// MaxMessageSize caps one message received or sent, in bytes. Zero
	// means DefaultMaxMessageSize.
	MaxMessageSize int `json:"max_message_size,omitempty"`
	// AllowInsecure permits a plaintext connection (no UseSSL) to a host
	// that is not loopback: calls, metadata and credentials then cross
	// the network in clear text.
	AllowInsecure bool `json:"allow_insecure,omitempty"`

	once     sync.Once
	tgt      string             // target()
	tgtOK    bool               // checkTarget passes
	key      string             // connection settings hash, see connKey
	mdPairs  []string           // Metadata as key, value pairs, decoded
	callOpts []ggrpc.CallOption // the message size caps and the codec
}

// reservedMetadata are set by gRPC itself; a template may not set them.
var reservedMetadata = []string{"content-type", "te", "user-agent", "host", "connection", "grpc-timeout", "authority"}

// Validate checks the template as written. Errors name the field.
func (t *Template) Validate() error {
	switch {
	case t.Target != "" && (t.Host != "" || t.Port != 0):
		return errors.New("field target excludes host and port: set one or the other")
	case t.Target == "" && t.Host == "":
		return errors.New("field host (with port) or target is required")
	case t.Target == "" && (t.Port <= 0 || t.Port > 65535):
		return fmt.Errorf("field port is required with host and must be 1..65535 (got %d)", t.Port)
	}
	if t.MethodName != "" && t.ServiceName == "" {
		return errors.New("field method_name needs service_name")
	}
	if !t.UseSSL {
		for field, set := range map[string]bool{"ca_file": t.CAFile != "", "cert_file": t.CertFile != "", "key_file": t.KeyFile != "",
			"server_name": t.ServerName != "", "insecure_skip_verify": t.InsecureSkipVerify} {
			if set {
				return fmt.Errorf("field %s needs use_ssl true", field)
			}
		}
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		return errors.New("fields cert_file and key_file go together")
	}
	if t.DescriptorSet != "" && len(t.ProtoFiles) > 0 {
		return errors.New("fields descriptor_set and proto_files exclude each other")
	}
	if len(t.ImportPaths) > 0 && len(t.ProtoFiles) == 0 {
		return errors.New("field import_paths needs proto_files")
	}
	for k, v := range t.Metadata {
		if err := checkMetadata(k, v); err != nil {
			return fmt.Errorf("field metadata: %w", err)
		}
	}
	if t.Timeout < 0 {
		return errors.New("field timeout must not be negative")
	}
	if t.MaxMessageSize < 0 {
		return errors.New("field max_message_size must not be negative")
	}
	return nil
}

// checkMetadata checks one metadata entry: a valid, non-reserved key and
// a value that can be sent.
func checkMetadata(k, v string) error {
	key := strings.ToLower(k)
	if key == "" {
		return errors.New("empty key")
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Errorf("key %q: only letters, digits, '-', '_' and '.' are allowed", k)
		}
	}
	if strings.HasPrefix(key, "grpc-") {
		return fmt.Errorf("key %q: the grpc- prefix is reserved", k)
	}
	for _, r := range reservedMetadata {
		if key == r {
			return fmt.Errorf("key %q is set by gRPC itself", k)
		}
	}
	if strings.HasSuffix(key, "-bin") {
		if _, err := decodeBin(v); err != nil {
			return fmt.Errorf("key %q: a -bin value must be base64: %w", k, err)
		}
		return nil
	}
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e {
			return fmt.Errorf("key %q: the value must be printable ASCII (use a -bin key for binary values)", k)
		}
	}
	return nil
}

func decodeBin(v string) ([]byte, error) {
	if b, err := base64.StdEncoding.DecodeString(v); err == nil {
		return b, nil
	}
	return base64.RawStdEncoding.DecodeString(v)
}

// prepare computes the cached connection key and metadata once.
func (t *Template) prepare() {
	t.once.Do(func() {
		t.tgt = t.buildTarget()
		t.tgtOK = t.targetAllowed()
		b, _ := json.Marshal(struct {
			Target                    string
			SSL, Skip                 bool
			CA, Cert, Key, ServerName string
		}{t.tgt, t.UseSSL, t.InsecureSkipVerify, t.CAFile, t.CertFile, t.KeyFile, t.ServerName})
		sum := sha256.Sum256(b)
		t.key = hex.EncodeToString(sum[:12])
		keys := make([]string, 0, len(t.Metadata))
		for k := range t.Metadata {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			v := t.Metadata[k]
			lk := strings.ToLower(k)
			if strings.HasSuffix(lk, "-bin") {
				b, _ := decodeBin(v)
				v = string(b)
			}
			t.mdPairs = append(t.mdPairs, lk, v)
		}
		t.callOpts = []ggrpc.CallOption{ggrpc.MaxCallRecvMsgSize(t.maxMessage()), ggrpc.MaxCallSendMsgSize(t.maxMessage()), ggrpc.ForceCodecV2(codec{})}
	})
}

// connKey identifies the connections calls of this template may share.
func (t *Template) connKey() string {
	t.prepare()
	return t.key
}

// pairs returns the template's metadata as key, value pairs, keys lower
// case, -bin values decoded. The caller must not modify it.
func (t *Template) pairs() []string {
	t.prepare()
	return t.mdPairs
}

// callOptions returns the per-call options of the template (the message
// size caps, the codec). The caller must not modify it.
func (t *Template) callOptions() []ggrpc.CallOption {
	t.prepare()
	return t.callOpts
}

// target returns the gRPC target: Target, or host:port.
func (t *Template) target() string {
	t.prepare()
	return t.tgt
}

func (t *Template) buildTarget() string {
	if t.Target != "" {
		return t.Target
	}
	return net.JoinHostPort(t.Host, strconv.Itoa(t.Port))
}

func (t *Template) timeout() time.Duration {
	if t.Timeout > 0 {
		return time.Duration(t.Timeout * float64(time.Millisecond))
	}
	return DefaultTimeout
}

func (t *Template) maxMessage() int {
	if t.MaxMessageSize > 0 {
		return t.MaxMessageSize
	}
	return DefaultMaxMessageSize
}

// targetHost returns the host a target reaches, and whether the target is
// a local socket (unix, unix-abstract).
func targetHost(target string) (host string, local bool) {
	rest, local := targetAddr(target)
	if local {
		return "", true
	}
	if h, _, err := net.SplitHostPort(rest); err == nil {
		return h, false
	}
	return strings.Trim(rest, "[]"), false
}

// targetAddr returns the address part ("host:port" or host) of a target,
// and whether the target is a local socket (unix, unix-abstract).
func targetAddr(target string) (addr string, local bool) {
	rest := target
	if scheme, after, ok := strings.Cut(target, ":"); ok && !strings.Contains(scheme, "/") && !strings.Contains(scheme, "[") {
		switch strings.ToLower(scheme) {
		case "unix", "unix-abstract":
			return "", true
		case "dns", "passthrough", "ipv4", "ipv6", "xds", "google-c2p":
			rest = after
			if strings.HasPrefix(rest, "//") { // dns://authority/host:port
				rest = rest[2:]
				if i := strings.IndexByte(rest, '/'); i >= 0 {
					rest = rest[i+1:]
				}
			}
			if i := strings.IndexByte(rest, ','); i >= 0 { // ipv4:a:p,b:p — check the first
				rest = rest[:i]
			}
		}
	}
	return rest, false
}

// checkTarget refuses plaintext to a host that is not loopback unless
// allow_insecure.
func checkTarget(t *Template) error {
	if t.prepare(); t.tgtOK {
		return nil
	}
	return utcp.NewError(utcp.CodeInvalidTemplate, "grpc: %s is not loopback: plaintext gRPC (use_ssl false) reaches only localhost, 127.0.0.0/8, ::1 and unix sockets unless the template sets \"allow_insecure\": true; set \"use_ssl\": true for TLS", t.tgt).WithDetail("target", t.tgt)
}

// targetAllowed is checkTarget's verdict, computed once.
func (t *Template) targetAllowed() bool {
	if t.UseSSL || t.AllowInsecure {
		return true
	}
	host, local := targetHost(t.tgt)
	return local || httpclient.IsLoopbackHost(host)
}

// ParseTemplate decodes and validates a grpc call template (see
// transports.DecodeTemplate) and returns it with Spec set to a *Template.
// A template of another call_template_type is an invalid_template error.
func ParseTemplate(raw json.RawMessage) (utcp.CallTemplate, error) {
	tmpl, _, err := transports.DecodeTemplateOf[Template](raw, Type)
	if err != nil {
		return tmpl, err
	}
	if tmpl.Auth != nil && tmpl.Auth.Type == utcp.AuthAPIKey && tmpl.Auth.Location != "" && tmpl.Auth.Location != "header" {
		return tmpl, utcp.Errorf(utcp.CodeInvalidTemplate, "grpc: auth: api_key location %q is not possible over gRPC: the key is sent as metadata (location header): %w", tmpl.Auth.Location, transports.ErrInvalidTemplate)
	}
	return tmpl, nil
}
