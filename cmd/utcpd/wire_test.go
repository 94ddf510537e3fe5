package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestLoadConfigKnowsTransportFields: the commands that load a config
// themselves (call, tools, config validate) know every transport's own
// fields, so valid fields of grpc, tcp, graphql and webrtc templates are
// not reported as unknown, and a real typo still is.
func TestLoadConfigKnowsTransportFields(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "utcpd.json")
	cfg := `{"manual_call_templates": [
	  {"name": "rpc", "call_template_type": "grpc", "host": "127.0.0.1", "port": 50051,
	   "proto_files": ["demo.proto"], "import_paths": ["proto"], "metadata": {"x-a": "b"}, "timeout": 5000},
	  {"name": "sock", "call_template_type": "tcp", "host": "127.0.0.1", "port": 9000, "envelope": true},
	  {"name": "gql", "call_template_type": "graphql", "url": "http://127.0.0.1:8085/graphql", "selection_depth": 3},
	  {"name": "p2p", "call_template_type": "webrtc", "signaling_server": "http://127.0.0.1:8090/offer", "peer_id": "demo", "data_channel_name": "tools"}
	]}`
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	var warn bytes.Buffer
	if _, err := loadConfig(path, true, &warn); err != nil {
		t.Fatalf("strict load of valid transport fields: %v\n%s", err, warn.String())
	}
	if warn.Len() != 0 {
		t.Errorf("unexpected warnings:\n%s", warn.String())
	}

	typo := `{"manual_call_templates": [{"name": "rpc", "call_template_type": "grpc", "host": "127.0.0.1", "port": 50051, "proto_filez": ["demo.proto"]}]}`
	if err := os.WriteFile(path, []byte(typo), 0o600); err != nil {
		t.Fatal(err)
	}
	warn.Reset()
	if _, err := loadConfig(path, false, &warn); err != nil {
		t.Fatalf("lenient load: %v", err)
	}
	if !bytes.Contains(warn.Bytes(), []byte("proto_filez")) || !bytes.Contains(warn.Bytes(), []byte("proto_files")) {
		t.Errorf("a typo should warn with the closest field; got:\n%s", warn.String())
	}
}
