package manuals_test

import (
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/utcpd/utcpd/internal/schematest"
	"github.com/utcpd/utcpd/manuals"
	"github.com/utcpd/utcpd/utcp"
)

// oas3Doc exercises OpenAPI 3: server variables, path-level parameters,
// $ref parameters and schemas (one recursive), cookie parameters, JSON and
// form request bodies, operation-level security overrides (including the
// empty list), every supported scheme kind, and skipped operations.
const oas3Doc = `{
  "openapi": "3.0.3",
  "info": {"title": "Pet Store (v2)", "version": "2.1.0"},
  "servers": [{"url": "https://{region}.api.example.com/v1/", "variables": {"region": {"default": "eu"}}}],
  "security": [{"key": []}],
  "components": {
    "schemas": {
      "Pet": {"type": "object", "required": ["name"], "properties": {
        "id": {"type": "integer"}, "name": {"type": "string", "example": "Rex"}, "parent": {"$ref": "#/components/schemas/Pet"}}},
      "Error": {"type": "object", "properties": {"message": {"type": "string"}}}
    },
    "parameters": {"Limit": {"name": "limit", "in": "query", "description": "Page size", "schema": {"type": "integer", "maximum": 100}, "example": 10}},
    "securitySchemes": {
      "key": {"type": "apiKey", "name": "X-Key", "in": "header"},
      "bearer": {"type": "http", "scheme": "bearer"},
      "basic": {"type": "http", "scheme": "basic"},
      "oauth": {"type": "oauth2", "flows": {"clientCredentials": {"tokenUrl": "/oauth/token", "scopes": {"read": "", "write": ""}}}}
    }
  },
  "paths": {
    "/pets": {
      "parameters": [{"name": "X-Trace", "in": "header", "schema": {"type": "string"}}],
      "get": {"operationId": "listPets", "summary": "List pets", "tags": ["pets"],
        "parameters": [{"$ref": "#/components/parameters/Limit"}, {"name": "session", "in": "cookie", "schema": {"type": "string"}}],
        "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {"type": "array", "items": {"$ref": "#/components/schemas/Pet"}}}}},
                      "default": {"description": "err", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}}},
      "post": {"operationId": "createPet", "description": "Create a pet", "security": [{"oauth": ["write", "read"]}],
        "requestBody": {"required": true, "description": "The pet", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Pet"}, "examples": {"one": {"value": {"name": "Rex"}}}}}},
        "responses": {"201": {"description": "created", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Pet"}}}}}}
    },
    "/pets/{petId}": {
      "get": {"operationId": "getPet", "security": [],
        "parameters": [{"name": "petId", "in": "path", "required": true, "schema": {"type": "string"}}],
        "responses": {"404": {"description": "missing"}}},
      "delete": {"summary": "no operationId", "responses": {}},
      "head": {"operationId": "headPet", "responses": {}}
    },
    "/login": {"post": {"operationId": "login", "security": [{"basic": []}],
      "requestBody": {"content": {"application/x-www-form-urlencoded": {"schema": {"type": "object", "properties": {"user": {"type": "string"}}}}}},
      "responses": {"204": {"description": "ok"}}}},
    "/me": {"get": {"operationId": "me", "security": [{"bearer": []}], "responses": {"200": {"description": "ok", "content": {"text/plain": {"schema": {"type": "string"}}}}}}}
  }
}`

// oas3Tools is what oas3Doc converts to (fetched from
// https://docs.example.com/specs/openapi.json): tools ordered by path then
// method, scheme variables numbered in order of first use.
var oas3Tools = []string{
	`{"name":"login","description":"","inputs":{"properties":{"body":{"properties":{"user":{"type":"string"}},"type":"object"}},"type":"object"},"tags":[],"tool_call_template":{"auth":{"auth_type":"basic","username":"${USERNAME_1}","password":"${PASSWORD_1}"},"body_field":"body","call_template_type":"http","content_type":"application/x-www-form-urlencoded","http_method":"POST","name":"Pet_Store__v2_","url":"https://eu.api.example.com/v1/login"}}`,
	`{"name":"me","description":"","inputs":{"properties":{},"type":"object"},"outputs":{"type":"string"},"tags":["read_only"],"tool_call_template":{"auth":{"auth_type":"api_key","api_key":"Bearer ${API_KEY_2}","var_name":"Authorization","location":"header"},"call_template_type":"http","content_type":"application/json","http_method":"GET","name":"Pet_Store__v2_","url":"https://eu.api.example.com/v1/me"}}`,
	`{"name":"listPets","description":"List pets","inputs":{"properties":{"X-Trace":{"type":"string"},"limit":{"description":"Page size","examples":[10],"maximum":100,"type":"integer"},"session":{"type":"string"}},"type":"object"},"outputs":{"$defs":{"Pet":{"properties":{"id":{"type":"integer"},"name":{"examples":["Rex"],"type":"string"},"parent":{"$ref":"#/$defs/Pet"}},"required":["name"],"type":"object"}},"items":{"properties":{"id":{"type":"integer"},"name":{"examples":["Rex"],"type":"string"},"parent":{"$ref":"#/$defs/Pet"}},"required":["name"],"type":"object"},"type":"array"},"tags":["pets","read_only"],"tool_call_template":{"auth":{"auth_type":"api_key","api_key":"${API_KEY_3}","var_name":"X-Key","location":"header"},"call_template_type":"http","content_type":"application/json","cookie_fields":["session"],"header_fields":["X-Trace"],"http_method":"GET","name":"Pet_Store__v2_","url":"https://eu.api.example.com/v1/pets"}}`,
	`{"name":"createPet","description":"Create a pet","inputs":{"$defs":{"Pet":{"properties":{"id":{"type":"integer"},"name":{"examples":["Rex"],"type":"string"},"parent":{"$ref":"#/$defs/Pet"}},"required":["name"],"type":"object"}},"properties":{"X-Trace":{"type":"string"},"body":{"description":"The pet","examples":[{"name":"Rex"}],"properties":{"id":{"type":"integer"},"name":{"examples":["Rex"],"type":"string"},"parent":{"$ref":"#/$defs/Pet"}},"required":["name"],"type":"object"}},"required":["body"],"type":"object"},"outputs":{"$defs":{"Pet":{"properties":{"id":{"type":"integer"},"name":{"examples":["Rex"],"type":"string"},"parent":{"$ref":"#/$defs/Pet"}},"required":["name"],"type":"object"}},"properties":{"id":{"type":"integer"},"name":{"examples":["Rex"],"type":"string"},"parent":{"$ref":"#/$defs/Pet"}},"required":["name"],"type":"object"},"tags":[],"tool_call_template":{"auth":{"auth_type":"oauth2","token_url":"https://docs.example.com/oauth/token","client_id":"${CLIENT_ID_4}","client_secret":"${CLIENT_SECRET_4}","scope":"write read"},"body_field":"body","call_template_type":"http","content_type":"application/json","header_fields":["X-Trace"],"http_method":"POST","name":"Pet_Store__v2_","url":"https://eu.api.example.com/v1/pets"}}`,
	`{"name":"getPet","description":"","inputs":{"properties":{"petId":{"type":"string"}},"required":["petId"],"type":"object"},"tags":["read_only"],"tool_call_template":{"call_template_type":"http","content_type":"application/json","http_method":"GET","name":"Pet_Store__v2_","url":"https://eu.api.example.com/v1/pets/{petId}"}}`,
	`{"name":"delete_pets_petId","description":"no operationId","inputs":{"properties":{},"type":"object"},"tags":["destructive"],"tool_call_template":{"auth":{"auth_type":"api_key","api_key":"${API_KEY_3}","var_name":"X-Key","location":"header"},"call_template_type":"http","content_type":"application/json","http_method":"DELETE","name":"Pet_Store__v2_","url":"https://eu.api.example.com/v1/pets/{petId}"}}`,
}

// swagger2Doc exercises Swagger 2.0 in YAML: host/basePath/schemes, body
// and formData parameters, inline parameter schemas, definitions $refs,
// integer response codes, apiKey-in-query, oauth2 application and basic.
const swagger2Doc = `
swagger: "2.0"
info: {title: Petstore, version: 1.0.5}
host: petstore.example.com
basePath: /v2
schemes: [http, https]
securityDefinitions:
  api_key: {type: apiKey, name: api_key, in: query}
  petstore_auth: {type: oauth2, flow: application, tokenUrl: "https://auth.example.com/token", scopes: {"write:pets": ""}}
  basic: {type: basic}
definitions:
  Pet:
    type: object
    properties:
      id: {type: integer, format: int64}
      tags: {type: array, items: {$ref: "#/definitions/Tag"}}
  Tag: {type: object, properties: {name: {type: string}}}
paths:
  /pet:
    post:
      operationId: addPet
      consumes: [application/json]
      parameters:
        - {in: body, name: pet, required: true, description: Pet object, schema: {$ref: "#/definitions/Pet"}}
      responses:
        200: {description: ok, schema: {$ref: "#/definitions/Pet"}}
      security: [{petstore_auth: ["write:pets"]}]
  /pet/{petId}:
    get:
      operationId: getPetById
      summary: Find pet by ID
      parameters:
        - {name: petId, in: path, required: true, type: integer, format: int64}
        - {name: fields, in: query, type: array, items: {type: string}, enum: [a, b]}
      responses:
        default: {description: ok, schema: {$ref: "#/definitions/Pet"}}
      security: [{api_key: []}]
    post:
      operationId: updatePetWithForm
      consumes: [application/x-www-form-urlencoded]
      parameters:
        - {name: petId, in: path, required: true, type: integer}
        - {name: name, in: formData, type: string, required: true}
        - {name: status, in: formData, type: string}
      responses: {405: {description: bad}}
      security: [{basic: []}]
`

var swagger2Tools = []string{
	`{"name":"addPet","description":"","inputs":{"properties":{"body":{"description":"Pet object","properties":{"id":{"format":"int64","type":"integer"},"tags":{"items":{"properties":{"name":{"type":"string"}},"type":"object"},"type":"array"}},"type":"object"}},"required":["body"],"type":"object"},"outputs":{"properties":{"id":{"format":"int64","type":"integer"},"tags":{"items":{"properties":{"name":{"type":"string"}},"type":"object"},"type":"array"}},"type":"object"},"tags":[],"tool_call_template":{"auth":{"auth_type":"oauth2","token_url":"https://auth.example.com/token","client_id":"${CLIENT_ID_1}","client_secret":"${CLIENT_SECRET_1}","scope":"write:pets"},"body_field":"body","call_template_type":"http","content_type":"application/json","http_method":"POST","name":"Petstore","url":"https://petstore.example.com/v2/pet"}}`,
	`{"name":"getPetById","description":"Find pet by ID","inputs":{"properties":{"fields":{"enum":["a","b"],"items":{"type":"string"},"type":"array"},"petId":{"format":"int64","type":"integer"}},"required":["petId"],"type":"object"},"outputs":{"properties":{"id":{"format":"int64","type":"integer"},"tags":{"items":{"properties":{"name":{"type":"string"}},"type":"object"},"type":"array"}},"type":"object"},"tags":["read_only"],"tool_call_template":{"auth":{"auth_type":"api_key","api_key":"${API_KEY_2}","var_name":"api_key","location":"query"},"call_template_type":"http","content_type":"application/json","http_method":"GET","name":"Petstore","url":"https://petstore.example.com/v2/pet/{petId}"}}`,
	`{"name":"updatePetWithForm","description":"","inputs":{"properties":{"body":{"properties":{"name":{"type":"string"},"status":{"type":"string"}},"required":["name"],"type":"object"},"petId":{"type":"integer"}},"required":["petId","body"],"type":"object"},"tags":[],"tool_call_template":{"auth":{"auth_type":"basic","username":"${USERNAME_3}","password":"${PASSWORD_3}"},"body_field":"body","call_template_type":"http","content_type":"application/x-www-form-urlencoded","http_method":"POST","name":"Petstore","url":"https://petstore.example.com/v2/pet/{petId}"}}`,
}

// asJSON round-trips v through JSON for comparison.
func asJSON(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func wantTools(t *testing.T, tools []string) any {
	t.Helper()
	var out []any
	for _, s := range tools {
		var v any
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			t.Fatalf("bad expectation %s: %v", s, err)
		}
		out = append(out, v)
	}
	return out
}

func TestConvertOpenAPI3(t *testing.T) {
	var warnings []string
	m, err := manuals.ParseOpenAPI([]byte(oas3Doc), manuals.OpenAPIOptions{
		SpecURL: "https://docs.example.com/specs/openapi.json",
		Warn:    func(s string) { warnings = append(warnings, s) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if m.UTCPVersion != utcp.Version || m.ManualVersion != "2.1.0" {
		t.Errorf("versions %q %q", m.UTCPVersion, m.ManualVersion)
	}
	if diff := cmp.Diff(wantTools(t, oas3Tools), asJSON(t, m.Tools)); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
	for _, w := range []string{"1 of 6 operations have no operationId (or a repeated one): named from their method and path (delete_pets_petId)", "HEAD /pets/{petId} (headPet): skipped"} {
		found := false
		for _, got := range warnings {
			found = found || strings.Contains(got, w)
		}
		if !found {
			t.Errorf("no warning containing %q in %q", w, warnings)
		}
	}
	// The templates are well-formed call templates: base fields decoded, Raw kept.
	for _, tool := range m.Tools {
		ct := tool.ToolCallTemplate
		if ct == nil || ct.Type != "http" || len(ct.Raw) == 0 || ct.Name != "Pet_Store__v2_" {
			t.Errorf("%s: template %+v", tool.Name, ct)
		}
	}
}

func TestConvertSwagger2(t *testing.T) {
	m, err := manuals.ParseOpenAPI([]byte(swagger2Doc), manuals.OpenAPIOptions{SpecURL: "https://petstore.example.com/v2/swagger.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	if m.ManualVersion != "1.0.5" {
		t.Errorf("manual_version %q", m.ManualVersion)
	}
	if diff := cmp.Diff(wantTools(t, swagger2Tools), asJSON(t, m.Tools)); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
}

func TestConvertOpenAPIBaseURL(t *testing.T) {
	doc := func(server string) map[string]any {
		d := map[string]any{"openapi": "3.0.0", "paths": map[string]any{"/x": map[string]any{"get": map[string]any{"operationId": "x"}}}}
		if server != "" {
			d["servers"] = []any{map[string]any{"url": server}}
		}
		return d
	}
	cases := []struct {
		name, server, spec, base, want string
		refused                        bool
	}{
		{name: "explicit base wins", server: "https://a.example.com", spec: "https://s.example.com/o.json", base: "https://override.example.com/api/", want: "https://override.example.com/api/x"},
		{name: "explicit base may be local", server: "", spec: "https://s.example.com/o.json", base: "http://127.0.0.1:9/", want: "http://127.0.0.1:9/x"},
		{name: "first server", server: "https://a.example.com/v1/", spec: "https://s.example.com/o.json", want: "https://a.example.com/v1/x"},
		{name: "relative server against the spec", server: "/api", spec: "https://s.example.com/docs/o.json", want: "https://s.example.com/api/x"},
		{name: "relative server without a spec", server: "/api", want: "/api/x"},
		{name: "spec origin", spec: "https://s.example.com/docs/o.json", want: "https://s.example.com/x"},
		{name: "nothing", want: "/x"},
		{name: "local server from a remote spec", server: "http://localhost:8080", spec: "https://s.example.com/o.json", refused: true},
		{name: "loopback IP from a remote spec", server: "http://127.0.0.1/", spec: "https://s.example.com/o.json", refused: true},
		{name: "unspecified address from a remote spec", server: "http://0.0.0.0:80", spec: "http://s.example.com/o.json", refused: true},
		{name: "local server from a local spec", server: "http://localhost:8080", spec: "http://127.0.0.1:8080/o.json", want: "http://localhost:8080/x"},
		{name: "local server from inline content", server: "http://localhost:8080", spec: "text://content", want: "http://localhost:8080/x"},
		{name: "local server without a spec URL", server: "http://[::1]:1", want: "http://[::1]:1/x"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := manuals.ConvertOpenAPI(doc(c.server), manuals.OpenAPIOptions{SpecURL: c.spec, BaseURL: c.base})
			if c.refused {
				if utcp.CodeOf(err) != utcp.CodeInvalidManual {
					t.Fatalf("err = %v, want invalid_manual", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var tmpl struct {
				URL string `json:"url"`
			}
			json.Unmarshal(m.Tools[0].ToolCallTemplate.Raw, &tmpl)
			if tmpl.URL != c.want {
				t.Errorf("url %q, want %q", tmpl.URL, c.want)
			}
		})
	}
}

func TestConvertSwagger2BaseURL(t *testing.T) {
	doc := map[string]any{"swagger": "2.0", "basePath": "/v3", "paths": map[string]any{"/x": map[string]any{"get": map[string]any{"operationId": "x"}}}}
	m, err := manuals.ConvertOpenAPI(doc, manuals.OpenAPIOptions{SpecURL: "https://api.example.com/swagger.json"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(m.Tools[0].ToolCallTemplate.Raw), `"https://api.example.com/v3/x"`) {
		t.Errorf("template %s", m.Tools[0].ToolCallTemplate.Raw)
	}
	doc["host"] = "localhost:8000"
	if _, err := manuals.ConvertOpenAPI(doc, manuals.OpenAPIOptions{SpecURL: "https://api.example.com/swagger.json"}); utcp.CodeOf(err) != utcp.CodeInvalidManual {
		t.Errorf("a remote Swagger document naming localhost: err = %v, want invalid_manual", err)
	}
}

func TestConvertOpenAPIAuthTools(t *testing.T) {
	doc := map[string]any{
		"openapi": "3.0.0",
		"components": map[string]any{"securitySchemes": map[string]any{
			"hdr":   map[string]any{"type": "apiKey", "name": "X-API-KEY", "in": "header"},
			"query": map[string]any{"type": "apiKey", "name": "X-API-KEY", "in": "query"},
			"basic": map[string]any{"type": "http", "scheme": "basic"},
		}},
		"paths": map[string]any{
			"/a": map[string]any{"get": map[string]any{"operationId": "a", "security": []any{map[string]any{"hdr": []any{}}}}},
			"/b": map[string]any{"get": map[string]any{"operationId": "b", "security": []any{map[string]any{"query": []any{}}}}},
			"/c": map[string]any{"get": map[string]any{"operationId": "c", "security": []any{map[string]any{"basic": []any{}}}}},
			"/d": map[string]any{"get": map[string]any{"operationId": "d"}},
		},
	}
	tools := &utcp.Auth{Type: "api_key", APIKey: "${MINE}", VarName: "x-api-key"}
	m, err := manuals.ConvertOpenAPI(doc, manuals.OpenAPIOptions{SpecURL: "https://x.example.com/o.json", AuthTools: tools})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]any{}
	for _, tool := range m.Tools {
		got[tool.Name] = asJSON(t, tool.ToolCallTemplate.Auth)
	}
	want := map[string]any{
		"a": map[string]any{"auth_type": "api_key", "api_key": "${MINE}", "var_name": "x-api-key"},
		"b": map[string]any{"auth_type": "api_key", "api_key": "${API_KEY_2}", "var_name": "X-API-KEY", "location": "query"},
		"c": map[string]any{"auth_type": "basic", "username": "${USERNAME_3}", "password": "${PASSWORD_3}"},
		"d": nil,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("auth (-want +got):\n%s", diff)
	}
}

func TestConvertOpenAPIRefs(t *testing.T) {
	doc := map[string]any{
		"openapi": "3.1.0",
		"components": map[string]any{"schemas": map[string]any{
			"A":        map[string]any{"type": "object", "properties": map[string]any{"b": map[string]any{"$ref": "#/components/schemas/B"}}},
			"B":        map[string]any{"type": "array", "items": map[string]any{"$ref": "#/components/schemas/A"}},
			"a/b~c":    map[string]any{"type": "string"},
			"Siblings": map[string]any{"type": "string", "description": "base"},
		}},
		"paths": map[string]any{"/x": map[string]any{"post": map[string]any{
			"operationId": "x",
			"requestBody": map[string]any{"content": map[string]any{"application/json": map[string]any{"schema": map[string]any{
				"type": "object",
				"properties": map[string]any{
					"cycle":    map[string]any{"$ref": "#/components/schemas/A"},
					"escaped":  map[string]any{"$ref": "#/components/schemas/a~1b~0c"},
					"external": map[string]any{"$ref": "other.yaml#/Thing"},
					"dangling": map[string]any{"$ref": "#/components/schemas/Nope"},
					"sibling":  map[string]any{"$ref": "#/components/schemas/Siblings", "description": "override"},
				},
			}}}},
		}}},
	}
	m, err := manuals.ConvertOpenAPI(doc, manuals.OpenAPIOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var inputs map[string]any
	json.Unmarshal(m.Tools[0].Inputs, &inputs)
	body := inputs["properties"].(map[string]any)["body"].(map[string]any)["properties"]
	// The cycle A → B → A closes on a reference into the root's $defs,
	// which holds A once.
	cycle := map[string]any{"type": "object", "properties": map[string]any{"b": map[string]any{"type": "array",
		"items": map[string]any{"$ref": "#/$defs/A"}}}}
	if diff := cmp.Diff(map[string]any{"A": cycle}, inputs["$defs"]); diff != "" {
		t.Errorf("inputs $defs (-want +got):\n%s", diff)
	}
	want := map[string]any{
		"cycle":    cycle,
		"escaped":  map[string]any{"type": "string"},
		"external": map[string]any{"$comment": "unresolved $ref other.yaml#/Thing"},
		"dangling": map[string]any{"$comment": "unresolved $ref #/components/schemas/Nope"},
		"sibling":  map[string]any{"type": "string", "description": "override"},
	}
	if diff := cmp.Diff(want, body); diff != "" {
		t.Errorf("resolved body schema (-want +got):\n%s", diff)
	}
}

func TestConvertOpenAPIExpansionIsBounded(t *testing.T) {
	// Each level refers to the next twice: 2^40 nodes if expanded naively.
	schemas := map[string]any{}
	const levels = 40
	for i := range levels {
		next := map[string]any{"type": "string"}
		if i+1 < levels {
			next = map[string]any{"$ref": "#/components/schemas/L" + string(rune('A'+i+1))}
		}
		schemas["L"+string(rune('A'+i))] = map[string]any{"type": "object", "properties": map[string]any{"l": next, "r": next}}
	}
	doc := map[string]any{"openapi": "3.0.0", "components": map[string]any{"schemas": schemas},
		"paths": map[string]any{"/x": map[string]any{"get": map[string]any{"operationId": "x",
			"responses": map[string]any{"200": map[string]any{"content": map[string]any{"application/json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/LA"}}}}}}}}}
	m, err := manuals.ConvertOpenAPI(doc, manuals.OpenAPIOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(m.Tools[0].Outputs); n > 4<<20 {
		t.Errorf("outputs schema is %d bytes", n)
	}
	if !strings.Contains(string(m.Tools[0].Outputs), "unresolved $ref") {
		t.Errorf("the expansion was not cut off")
	}
}

func TestConvertOpenAPIDuplicateOperationID(t *testing.T) {
	doc := map[string]any{"openapi": "3.0.0", "paths": map[string]any{
		"/a": map[string]any{"get": map[string]any{"operationId": "same"}},
		"/b": map[string]any{"get": map[string]any{"operationId": "same"}},
	}}
	var warned bool
	m, err := manuals.ConvertOpenAPI(doc, manuals.OpenAPIOptions{BaseURL: "https://x", Warn: func(s string) { warned = warned || strings.Contains(s, "same") }})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Tools) != 2 || m.Tools[0].Name != "same" || !strings.Contains(string(m.Tools[0].ToolCallTemplate.Raw), "https://x/a") ||
		m.Tools[1].Name != "get_b" || !strings.Contains(string(m.Tools[1].ToolCallTemplate.Raw), "https://x/b") || !warned {
		t.Errorf("tools %v, warned %v", m.Tools, warned)
	}
}

// TestConvertOpenAPINames: operations without an operationId are named
// from their method and path; a name that is taken (by an operationId,
// wherever it is, or by an earlier generated name) gets _2, _3, ...; the
// names do not depend on the order of the document's keys.
func TestConvertOpenAPINames(t *testing.T) {
	doc := `{"openapi": "3.1.0", "paths": {
  "/pets/{petId}": {"get": {}, "put": {}},
  "/pets/petId": {"get": {}},
  "/": {"post": {}},
  "/a-b/c.d/{x_y}/": {"patch": {}},
  "/z": {"get": {"operationId": "get_pets_petId"}},
  "/ünï/{ç}": {"delete": {}}
}}`
	var warnings []string
	m, err := manuals.ParseOpenAPI([]byte(doc), manuals.OpenAPIOptions{BaseURL: "https://x", Warn: func(s string) { warnings = append(warnings, s) }})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tl := range m.Tools {
		got = append(got, tl.Name)
	}
	want := []string{"post", "patch_a_b_c_d_x_y", "get_pets_petId_2", "get_pets_petId_3", "put_pets_petId", "get_pets_petId", "delete_n"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "6 of 7 operations have no operationId") {
		t.Errorf("warnings: %q", warnings)
	}
}

func TestDecodeDocument(t *testing.T) {
	got, err := manuals.DecodeDocument([]byte("a:\n  200: {x: 1}\n  d: 2024-01-02\n  t: 2024-01-02T03:04:05Z\n  f: 1.5\n  big: 18446744073709551615\n  l: [true, null]\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"a": map[string]any{
		"200": map[string]any{"x": json.Number("1")}, "d": "2024-01-02", "t": "2024-01-02T03:04:05Z",
		"f": json.Number("1.5"), "big": json.Number("18446744073709551615"), "l": []any{true, nil},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("YAML (-want +got):\n%s", diff)
	}
	got, err = manuals.DecodeDocument([]byte(` {"n": 1.0, "s": "x"} `))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]any{"n": json.Number("1.0"), "s": "x"}, got); diff != "" {
		t.Errorf("JSON (-want +got):\n%s", diff)
	}
	for _, bad := range []string{"", "  ", "[1, 2]", "just a string", `{"unterminated": `, "a: [b"} {
		if _, err := manuals.DecodeDocument([]byte(bad)); utcp.CodeOf(err) != utcp.CodeInvalidManual {
			t.Errorf("DecodeDocument(%q): err = %v, want invalid_manual", bad, err)
		}
	}
	// The decoder's own error is the cause, kept in the chain.
	_, err = manuals.DecodeDocument([]byte(`{"unterminated": `))
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("malformed JSON: the chain lacks the decoder's io.ErrUnexpectedEOF: %v", err)
	}
}

func TestParseOpenAPIRejectsOtherDocuments(t *testing.T) {
	_, err := manuals.ParseOpenAPI([]byte(`{"utcp_version": "1.1.0", "tools": []}`), manuals.OpenAPIOptions{})
	var ue *utcp.Error
	if !errors.As(err, &ue) || ue.Code != utcp.CodeInvalidManual {
		t.Errorf("err = %v, want invalid_manual", err)
	}
	if manuals.IsOpenAPI(map[string]any{"tools": []any{}}) || !manuals.IsOpenAPI(map[string]any{"swagger": "2.0"}) {
		t.Errorf("IsOpenAPI misclassifies")
	}
	if _, err := manuals.ConvertOpenAPI(nil, manuals.OpenAPIOptions{}); err == nil {
		t.Errorf("ConvertOpenAPI(nil) succeeded")
	}
}

// FuzzParseOpenAPI: arbitrary documents must convert or fail cleanly,
// never panic or hang, and every schema of a converted tool is valid
// JSON Schema 2020-12 (schematest.Check).
func FuzzParseOpenAPI(f *testing.F) {
	for _, seed := range []string{
		`{"openapi":"3.0.0","info":{"title":"t"},"servers":[{"url":"https://api.example.com"}],"paths":{"/a/{id}":{"get":{"operationId":"getA","parameters":[{"name":"id","in":"path","required":true,"schema":{"type":"string"}}],"responses":{"200":{"content":{"application/json":{"schema":{"$ref":"#/components/schemas/A"}}}}}}}},"components":{"schemas":{"A":{"type":"object","properties":{"self":{"$ref":"#/components/schemas/A"}}}}}}`,
		`{"swagger":"2.0","host":"x.example.com","basePath":"/v1","paths":{"/p":{"post":{"operationId":"p","parameters":[{"in":"body","name":"b","schema":{"type":"object"}}]}}},"securityDefinitions":{"k":{"type":"apiKey","name":"X-K","in":"header"}},"security":[{"k":[]}]}`,
		"openapi: 3.1.0\npaths: {}\n",
		`{"openapi":"3.0.0","paths":{"/a":{"delete":{"operationId":"d","parameters":[{"name":"n","in":"query","schema":{"type":"integer","minimum":1,"exclusiveMinimum":true,"nullable":true}}],"responses":{"200":{"content":{"application/json":{"schema":{"nullable":true,"allOf":[{"$ref":"#/components/schemas/T"}],"discriminator":{"propertyName":"k"},"example":{"k":1}}}}}}}}},"components":{"schemas":{"T":{"type":"object","x-x":1,"properties":{"t":{"$ref":"#/components/schemas/T"},"s":{"allOf":[{"$ref":"#/components/schemas/T"}]}}}}}}`,
		`{"swagger":"2.0","paths":{"/f":{"post":{"operationId":"f","parameters":[{"name":"f","in":"formData","type":"file","x-nullable":true},{"name":"l","in":"query","type":"array","collectionFormat":"multi","items":{"type":"string","pattern":"(?=a)"}}]}}}}`,
		`{"paths":{"/x":{"get":{"operationId":"x","parameters":[{"$ref":"#/nope"}]}}}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := manuals.ParseOpenAPI(data, manuals.OpenAPIOptions{SpecURL: "https://spec.example.com/openapi.json"})
		if err == nil && m == nil {
			t.Fatalf("nil manual without error")
		}
		if err != nil {
			return
		}
		for _, tool := range m.Tools {
			for _, raw := range []json.RawMessage{tool.Inputs, tool.Outputs} {
				if len(raw) == 0 {
					continue
				}
				if err := schematest.Check(raw); err != nil {
					t.Fatalf("%s: %s: %v", tool.Name, raw, err)
				}
			}
		}
	})
}
