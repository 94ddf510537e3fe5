package manuals

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/utcpd/utcpd/utcp"
)

func TestNormalizeTemplate(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		want     string
		warnings []string // "kind path"
	}{
		{
			name: "v1.1 unchanged",
			in:   `{"name":"w","call_template_type":"http","url":"https://x","http_method":"GET"}`,
			want: `{"name":"w","call_template_type":"http","url":"https://x","http_method":"GET"}`,
		},
		{
			name:     "provider_type",
			in:       `{"name":"openlibrary","provider_type":"http","http_method":"GET","url":"https://openlibrary.org/static/openapi.json","metadata":{"a":1}}`,
			want:     `{"name":"openlibrary","call_template_type":"http","http_method":"GET","url":"https://openlibrary.org/static/openapi.json"}`,
			warnings: []string{"legacy provider_type"},
		},
		{
			name: "metadata of a v1.1 template is not legacy",
			in:   `{"name":"w","call_template_type":"http","url":"https://x","metadata":{"a":1}}`,
			want: `{"name":"w","call_template_type":"http","url":"https://x","metadata":{"a":1}}`,
		},
		{
			name:     "type",
			in:       `{"type":"sse","url":"https://x"}`,
			want:     `{"call_template_type":"sse","url":"https://x"}`,
			warnings: []string{"legacy type"},
		},
		{
			name:     "transport",
			in:       `{"transport":"websocket","url":"wss://x"}`,
			want:     `{"call_template_type":"websocket","url":"wss://x"}`,
			warnings: []string{"legacy transport"},
		},
		{
			name:     "provider_type preferred over type",
			in:       `{"type":"x","provider_type":"http","url":"u"}`,
			want:     `{"type":"x","call_template_type":"http","url":"u"}`,
			warnings: []string{"legacy provider_type"},
		},
		{
			name: "non-string type is not a discriminator",
			in:   `{"type":{"a":1},"url":"u"}`,
			want: `{"type":{"a":1},"url":"u"}`,
		},
		{
			name: "type next to call_template_type is left alone",
			in:   `{"call_template_type":"http","type":"x","transport":"y","url":"u"}`,
			want: `{"call_template_type":"http","type":"x","transport":"y","url":"u"}`,
		},
		{
			name:     "provider_type next to call_template_type is dropped",
			in:       `{"call_template_type":"http","provider_type":"sse","url":"u"}`,
			want:     `{"call_template_type":"http","url":"u"}`,
			warnings: []string{"ignored provider_type"},
		},
		{
			name:     "provider_type equal to call_template_type",
			in:       `{"call_template_type":"http","provider_type":"http","url":"u"}`,
			want:     `{"call_template_type":"http","url":"u"}`,
			warnings: []string{"legacy provider_type"},
		},
		{
			name:     "http_stream",
			in:       `{"provider_type":"http_stream","url":"https://x","timeout":60000}`,
			want:     `{"call_template_type":"streamable_http","url":"https://x","timeout":60000}`,
			warnings: []string{"legacy provider_type", "legacy provider_type"},
		},
		{
			name:     "http_stream in call_template_type",
			in:       `{"call_template_type":"http_stream","url":"https://x"}`,
			want:     `{"call_template_type":"streamable_http","url":"https://x"}`,
			warnings: []string{"legacy call_template_type"},
		},
		{
			name:     "method",
			in:       `{"provider_type":"http","method":"POST","url":"https://x"}`,
			want:     `{"call_template_type":"http","http_method":"POST","url":"https://x"}`,
			warnings: []string{"legacy provider_type", "legacy method"},
		},
		{
			name:     "method next to http_method",
			in:       `{"call_template_type":"http","method":"POST","http_method":"GET","url":"u"}`,
			want:     `{"call_template_type":"http","http_method":"GET","url":"u"}`,
			warnings: []string{"ignored method"},
		},
		{
			name: "method of another type is kept",
			in:   `{"call_template_type":"grpc","method":"Add"}`,
			want: `{"call_template_type":"grpc","method":"Add"}`,
		},
		{
			name:     "cli command_name",
			in:       `{"name":"my_cli","provider_type":"cli","command_name":"my-command --utcp-info","working_dir":"/data","env_vars":{"K":"$KEY"}}`,
			want:     `{"name":"my_cli","call_template_type":"cli","commands":[{"command":"my-command --utcp-info"}],"working_dir":"/data","env_vars":{"K":"$KEY"}}`,
			warnings: []string{"legacy provider_type", "legacy command_name"},
		},
		{
			name:     "cli command_name next to commands",
			in:       `{"call_template_type":"cli","command_name":"a","commands":[{"command":"b"}]}`,
			want:     `{"call_template_type":"cli","commands":[{"command":"b"}]}`,
			warnings: []string{"ignored command_name"},
		},
		{
			name:     "cwd",
			in:       `{"call_template_type":"cli","commands":[{"command":"ls"}],"cwd":"/tmp"}`,
			want:     `{"call_template_type":"cli","commands":[{"command":"ls"}],"working_dir":"/tmp"}`,
			warnings: []string{"legacy cwd"},
		},
		{
			name:     "text with file_path is file",
			in:       `{"name":"newsapi","provider_type":"text","file_path":"./newsapi_manual.json"}`,
			want:     `{"name":"newsapi","call_template_type":"file","file_path":"./newsapi_manual.json"}`,
			warnings: []string{"legacy provider_type", "legacy provider_type"},
		},
		{
			name: "text with content stays text",
			in:   `{"call_template_type":"text","content":"{}"}`,
			want: `{"call_template_type":"text","content":"{}"}`,
		},
		{
			name: "nested fields are never renamed",
			in:   `{"call_template_type":"mcp","config":{"mcpServers":{"s":{"command":"x","cwd":"/a","transport":"stdio"}}}}`,
			want: `{"call_template_type":"mcp","config":{"mcpServers":{"s":{"command":"x","cwd":"/a","transport":"stdio"}}}}`,
		},
		{
			name:     "values are kept byte for byte",
			in:       `{"provider_type":"http","url":"https://x/?a=<b>&c","n":1.50,"big":12345678901234567890}`,
			want:     `{"call_template_type":"http","url":"https://x/?a=<b>&c","n":1.50,"big":12345678901234567890}`,
			warnings: []string{"legacy provider_type"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ws, err := NormalizeTemplate(json.RawMessage(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			assertJSON(t, got, tc.want)
			if diff := cmp.Diff(tc.warnings, warningPaths(ws)); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
			// Idempotent: a second pass changes nothing.
			again, ws2, err := NormalizeTemplate(got)
			if err != nil || !bytes.Equal(again, got) || len(ws2) != 0 {
				t.Errorf("second pass: %s, %v, %v", again, ws2, err)
			}
		})
	}
}

func TestNormalizeTemplateKeepsUnchangedInput(t *testing.T) {
	in := json.RawMessage("{\n  \"call_template_type\": \"http\",\n  \"url\": \"https://x\"\n}")
	got, _, err := NormalizeTemplate(in)
	if err != nil {
		t.Fatal(err)
	}
	if &got[0] != &in[0] {
		t.Error("unchanged template was copied")
	}
}

func TestNormalizeTemplateKeepsKeyOrder(t *testing.T) {
	got, _, err := NormalizeTemplate(json.RawMessage(`{"z":1,"provider_type":"http","a":2,"url":"u"}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"z":1,"call_template_type":"http","a":2,"url":"u"}`; string(got) != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

func TestNormalizeTemplateErrors(t *testing.T) {
	for _, in := range []string{``, `[]`, `"x"`, `{"a":`, `{"a":1} {}`, `null`} {
		_, _, err := NormalizeTemplate(json.RawMessage(in))
		if codeOf(err) != utcp.CodeInvalidTemplate {
			t.Errorf("%q: got %v, want invalid_template", in, err)
		}
	}
}
