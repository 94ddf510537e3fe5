package utcpmanual

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/utcpd/utcpd/utcp"
)

// TestStreamedManualIsTheWholeEncoding: the manual written from per-tool
// pieces is byte for byte the single encoding of the whole tool list it
// replaced, with the same version digest, ETag and length, for bases that
// need JSON escaping and tools whose schemas hold the url marker's bytes.
func TestStreamedManualIsTheWholeEncoding(t *testing.T) {
	avg := 64
	list := []manualTool{
		{Name: "a.one", Description: "x < y & z > \"q\" \u2028 é", Tags: []string{"t"}, Inputs: json.RawMessage(`{"type":"object"}`),
			Outputs: json.RawMessage(`{"type":"object"}`), AverageResponseSize: &avg,
			ToolCallTemplate: callTemplate{Type: "http", URL: "/utcp/call/a.one", Method: "POST", ContentType: "application/json", BodyField: "body", Headers: jsonHeaders}},
		{Name: "b.two", Tags: []string{}, Inputs: json.RawMessage(`{"type":"object","properties":{"tool_call_template":{"const":"\"tool_call_template\":{\"call_template_type\":\"http\",\"url\":\""}}}`),
			Outputs: json.RawMessage(`{}`),
			ToolCallTemplate: callTemplate{Type: "http", URL: "/utcp/call/b.two", Method: "POST", ContentType: "application/json", BodyField: "body", Headers: jsonHeaders,
				Auth: &apiKeyAuth{Type: "api_key", APIKey: "Bearer ${UTCPD_API_KEY}", VarName: "Authorization", Location: "header"}}},
	}
	h := &Handler{log: slog.New(slog.DiscardHandler)}
	for _, tools := range [][]manualTool{nil, list} {
		h.pieces = h.encodePieces(tools, make([]*utcp.Tool, len(tools)))
		h.toolsGen = 1
		for _, base := range []string{"http://127.0.0.1:8787", "https://tools.example.com/a&b/<x>", `http://h/"q"\`} {
			// The encoding the streamed manual replaced.
			withBase := make([]manualTool, len(tools))
			for i, mt := range tools {
				withBase[i] = mt
				withBase[i].ToolCallTemplate.URL = base + mt.ToolCallTemplate.URL
			}
			var tb bytes.Buffer
			enc := json.NewEncoder(&tb)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(withBase); err != nil {
				t.Fatal(err)
			}
			toolsJSON := bytes.TrimSpace(tb.Bytes())
			if tools == nil {
				toolsJSON = []byte("[]")
			}
			d := sha256.Sum256(toolsJSON)
			want := `{"utcp_version":"` + utcp.Version + `","manual_version":"1.0.0+` + hex.EncodeToString(d[:6]) + `","tools":` + string(toolsJSON) + "}\n"
			sum := sha256.Sum256([]byte(want))

			m := h.render(base, 1, nil)
			var got bytes.Buffer
			m.writeTo(&got)
			if got.String() != want {
				t.Fatalf("base %q:\n got %s\nwant %s", base, got.String(), want)
			}
			if m.length != len(want) || m.etag != `"`+hex.EncodeToString(sum[:16])+`"` {
				t.Errorf("base %q: length %d etag %s, want %d and the whole body's digest", base, m.length, m.etag, len(want))
			}
		}
	}
}
