package openapi

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// fragmentDoc is a small OpenAPI 3.0 description using what GitHub's
// does and JSON Schema does not: nullable (with a type, with allOf and no
// type), boolean exclusiveMinimum, example, discriminator, xml,
// externalDocs, x- extensions and a recursive $ref.
const fragmentDoc = `{
  "openapi": "3.0.3",
  "info": {"title": "Fragment", "version": "1.0.0"},
  "servers": [{"url": "https://api.example.com"}],
  "components": {"schemas": {
    "Node": {"type": "object", "x-internal": true, "properties": {
      "name": {"type": "string", "example": "root", "xml": {"attribute": true}},
      "parent": {"nullable": true, "allOf": [{"$ref": "#/components/schemas/Node"}]},
      "children": {"type": "array", "items": {"$ref": "#/components/schemas/Node"}}}},
    "Pet": {"oneOf": [{"$ref": "#/components/schemas/Node"}], "discriminator": {"propertyName": "name"},
            "externalDocs": {"url": "https://docs.example.com/pet"}}
  }},
  "paths": {
    "/nodes/{id}": {
      "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "integer", "minimum": 0, "exclusiveMinimum": true}}],
      "get": {"operationId": "getNode", "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Node"}}}}}},
      "delete": {"operationId": "deleteNode", "responses": {"204": {"description": "gone"}}},
      "put": {"operationId": "putNode", "requestBody": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Pet"}}}},
        "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {"type": "object", "nullable": true,
          "properties": {"updated": {"type": "string", "format": "date-time", "nullable": true}}}}}}}}
    }
  }
}`

// TestFragmentListedSchemas registers fragmentDoc and checks every schema
// the fronts list (see listed), and the MCP annotations of the HTTP
// methods: GET read-only, DELETE destructive, PUT neither.
func TestFragmentListedSchemas(t *testing.T) {
	s := newStack(t, "frag", []byte(fragmentDoc))
	if n := s.listed(t); n != 3 {
		t.Errorf("%d tools, want 3", n)
	}

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "openapi-e2e", Version: "1"}, nil)
	session, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: s.base + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close()
	type hints struct{ ReadOnly, Destructive bool }
	got := map[string]hints{}
	for tool, err := range session.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		var h hints
		if a := tool.Annotations; a != nil {
			h = hints{ReadOnly: a.ReadOnlyHint, Destructive: a.DestructiveHint != nil && *a.DestructiveHint}
		}
		got[tool.Name] = h
	}
	want := map[string]hints{
		"frag.getNode":    {ReadOnly: true},
		"frag.deleteNode": {Destructive: true},
		"frag.putNode":    {},
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			delete(got, name) // codemode.run
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("annotations (-want +got):\n%s", diff)
	}
}
