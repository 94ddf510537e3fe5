package all_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/utcp"
)

// FuzzParseTemplate feeds arbitrary bytes to the registry's template
// parser: it must never panic, and every failure must be a utcp error
// with a code.
func FuzzParseTemplate(f *testing.F) {
	for _, seed := range []string{
		`{"call_template_type":"http","url":"https://example.com/utcp","http_method":"POST","headers":{"A":"b"},"auth":{"auth_type":"api_key","api_key":"${K}","location":"query"}}`,
		`{"call_template_type":"cli","commands":[{"command":"echo UTCP_ARG_x_UTCP_END","append_to_final_output":true}],"inherit_env_vars":[]}`,
		`{"call_template_type":"text","content":"{\"tools\":[]}"}`,
		`{"call_template_type":"file","file_path":"/tmp/x.json"}`,
		`{"call_template_type":"http"}`,
		`{"call_template_type":42}`,
		`[]`,
		`{"call_template_type":"http","url":"http://127.0.0.1/{a}","auth":{"auth_type":"oauth2","token_url":"x","client_id":"y","grant_type":"nope"}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tmpl, err := transports.Default.ParseTemplate(json.RawMessage(data))
		if err != nil {
			var ue *utcp.Error
			if !errors.As(err, &ue) || ue.Code == "" {
				t.Fatalf("error without a code: %v", err)
			}
			return
		}
		if tmpl.Spec == nil || tmpl.Type == "" {
			t.Fatalf("parsed template without Spec or Type: %+v", tmpl)
		}
	})
}
