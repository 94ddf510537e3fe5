package manuals

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/utcpd/utcpd/utcp"
)

// OpenAPIOptions tune ConvertOpenAPI.
type OpenAPIOptions struct {
	// SpecURL is where the document was fetched from, if anywhere. It is
	// the fallback base URL (its scheme://host), the base for relative
	// server URLs and token URLs, and decides whether loopback servers
	// are acceptable (see ConvertOpenAPI).
	SpecURL string
	// BaseURL, when set, is the base of every tool URL, overriding the
	// document's servers. It is trusted as given.
	BaseURL string
	// AuthTools replaces the auth generated for an operation when it is
	// compatible with the operation's security scheme: the same auth_type
	// and, for api_key, the same var_name (case-insensitively) and
	// location. Nil keeps the generated placeholders.
	AuthTools *utcp.Auth
	// Warn, when set, receives one message per operation or parameter
	// that was skipped and why. Conversion never fails for such things.
	Warn func(msg string)
}

// IsOpenAPI reports whether doc looks like an OpenAPI (3.x) or Swagger
// (2.0) document: it has an "openapi", "swagger" or "paths" key.
func IsOpenAPI(doc map[string]any) bool {
	for _, k := range []string{"openapi", "swagger", "paths"} {
		if _, ok := doc[k]; ok {
			return true
		}
	}
	return false
}

// DecodeDocument decodes a JSON or YAML document whose top level is an
// object. JSON is tried first; YAML when the data is not JSON. The result
// holds only JSON-compatible values: map[string]any (YAML keys such as the
// unquoted response code 200 become strings), []any, string, bool, nil and
// json.Number for every number; YAML timestamps become RFC 3339 strings
// (a bare date stays YYYY-MM-DD). Errors are *utcp.Error with code
// invalid_manual.
func DecodeDocument(data []byte) (map[string]any, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil, utcp.NewError(utcp.CodeInvalidManual, "the document is empty")
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.UseNumber()
	jsonErr := dec.Decode(&v)
	if jsonErr == nil && dec.More() {
		jsonErr = errors.New("trailing data after the JSON value")
	}
	if jsonErr != nil {
		var y any
		if err := yaml.Unmarshal(trimmed, &y); err != nil {
			if trimmed[0] == '{' || trimmed[0] == '[' {
				return nil, utcp.Errorf(utcp.CodeInvalidManual, "the document is not valid JSON: %w", jsonErr)
			}
			return nil, utcp.Errorf(utcp.CodeInvalidManual, "the document is neither JSON nor YAML: %w", err)
		}
		v = oasFromYAML(y)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, utcp.NewError(utcp.CodeInvalidManual, "the document's top level is %s, not an object", oasKind(v))
	}
	return m, nil
}

// oasFromYAML turns a yaml.v3-decoded value into JSON-compatible values.
func oasFromYAML(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, vv := range x {
			out[k] = oasFromYAML(vv)
		}
		return out
	case map[any]any:
		out := make(map[string]any, len(x))
		for k, vv := range x {
			out[fmt.Sprint(k)] = oasFromYAML(vv)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, vv := range x {
			out[i] = oasFromYAML(vv)
		}
		return out
	case int:
		return json.Number(fmt.Sprint(x))
	case int64:
		return json.Number(fmt.Sprint(x))
	case uint64:
		return json.Number(fmt.Sprint(x))
	case *big.Int:
		return json.Number(x.String())
	case float64:
		b, err := json.Marshal(x)
		if err != nil { // NaN, ±Inf: keep the YAML spelling as text
			return fmt.Sprint(x)
		}
		return json.Number(b)
	case time.Time:
		if x.Hour() == 0 && x.Minute() == 0 && x.Second() == 0 && x.Nanosecond() == 0 && x.Location() == time.UTC {
			return x.Format(time.DateOnly)
		}
		return x.Format(time.RFC3339Nano)
	}
	return v
}

func oasKind(v any) string {
	switch v.(type) {
	case []any:
		return "an array"
	case string:
		return "a string"
	case nil:
		return "null"
	case bool:
		return "a boolean"
	}
	return "a number"
}

// ParseOpenAPI decodes data (JSON or YAML, see DecodeDocument) and converts
// it with ConvertOpenAPI. A document that IsOpenAPI rejects is an
// invalid_manual error.
func ParseOpenAPI(data []byte, opts OpenAPIOptions) (*utcp.Manual, error) {
	doc, err := DecodeDocument(data)
	if err != nil {
		return nil, err
	}
	if !IsOpenAPI(doc) {
		return nil, utcp.NewError(utcp.CodeInvalidManual, "the document is not an OpenAPI description (no openapi, swagger or paths key)")
	}
	return ConvertOpenAPI(doc, opts)
}

// ConvertOpenAPI turns an OpenAPI 3.x or Swagger 2.0 document (decoded to
// JSON-compatible values, see DecodeDocument) into a UTCP manual whose tools
// each carry an http tool_call_template. It follows python-utcp's
// OpenApiConverter, with the differences noted here.
//
// One tool per GET, POST, PUT, DELETE and PATCH operation (HEAD, OPTIONS
// and TRACE operations, which the http call template cannot send, are
// skipped with a warning). Tools are ordered by path, then method
// (get, put, post, delete, patch). name is the operationId; an operation
// without one, or whose operationId an earlier operation has, is named
// from its method and path — the lower-case method and the path's
// segments joined by "_", braces dropped and other characters outside
// [A-Za-z0-9_] made "_" (GET /pets/{petId} is get_pets_petId) — with
// "_2", "_3", ... appended while the name is taken (by any operationId,
// or a name given before it in this order), so names are unique and
// stable; one warning says how many were named. description the summary (else the
// description), tags the operation's tags followed by "read_only" for a
// GET operation and "destructive" for a DELETE one (each once): the tags
// the MCP front lists as the readOnlyHint and destructiveHint annotations.
//
// Inputs: path-level and operation-level parameters (the latter winning)
// become properties of an object schema; path parameters are required, as
// are parameters marked required. Header parameters are also listed in
// header_fields, cookie parameters in cookie_fields (sent in the Cookie
// header). A JSON request body (OAS3
// requestBody, OAS2 body parameter) becomes the property "body", required
// when the body is, and the template gets body_field "body"; a non-JSON
// body (OAS3 media type, OAS2 consumes) keeps its media type as
// content_type; OAS2 formData
// parameters become the properties of an object "body" sent as
// application/x-www-form-urlencoded. Examples (example, examples) are
// collected into the JSON Schema "examples" keyword, without duplicates.
//
// Outputs: the schema of the first of the 200, 201, 202, 203, 2XX and
// default responses that has one (application/json preferred, else the
// first media type with a schema; OAS2 response.schema).
//
// $ref: local references ("#/...") are resolved inline, recursively, so
// that the tool's schemas stay self-contained. A reference that closes a
// cycle (a schema containing itself through a property or an item)
// becomes {"$ref": "#/$defs/<name>"}, and the root schema (inputs or
// outputs) gets that definition in its $defs, resolved the same way, so
// recursive schemas stay finite and exact; name is the reference's last
// segment, made unique. A reference that is external, dangling, past the
// expansion budget (about 50,000 copied values per operation), or that
// refers to itself without descending into a property or item (A: allOf
// [A]) is replaced by the schema {"$comment": "unresolved $ref <ref>"},
// which accepts anything.
//
// Schemas: every inputs and outputs schema is JSON Schema 2020-12, using
// only the 2020-12 vocabularies' keywords. The rules below touch only what
// 2020-12 lacks, so they apply whatever the document's version: OpenAPI
// 3.1 schemas, 2020-12 already, pass unchanged but for OpenAPI's own
// keywords (a 3.1 document that still says nullable gets 3.0's meaning),
// while OpenAPI 3.0 and Swagger 2.0 schemas are translated:
//   - nullable: true (and Swagger's x-nullable: true) adds "null" to the
//     type (a type union) and to enum when there is one; on a schema with
//     allOf, anyOf, oneOf, not, const, if or a recursive $ref, which could
//     reject null by themselves, the schema becomes anyOf [schema,
//     {"type": "null"}] with its annotations (title, description, default,
//     examples, ...) kept outside; a schema with neither type nor such
//     keywords already accepts null. nullable: false is dropped.
//   - boolean exclusiveMinimum/exclusiveMaximum: true moves the minimum
//     (maximum) into exclusiveMinimum (exclusiveMaximum); false is dropped.
//   - example joins examples (a list, duplicates dropped); an examples map
//     of Example Objects gives its values.
//   - discriminator, xml, externalDocs, x- extensions, $id, $schema,
//     $anchor, $dynamicRef, $dynamicAnchor, $vocabulary, definitions and
//     $defs of the document (their references are resolved), and every
//     other keyword outside 2020-12 are dropped, as is a keyword whose
//     value has the wrong form (required: true, a negative minLength, an
//     empty allOf or enum, an unknown type name, a pattern Go's regexp
//     cannot compile, which would make the gateway skip the whole schema).
//   - Swagger 2.0: type file becomes type string with format binary;
//     collectionFormat and allowEmptyValue are serialisation hints, not
//     schema keywords, and are dropped.
//   - Older JSON Schema forms: a tuple items list becomes prefixItems
//     (with additionalItems becoming items), draft 7 dependencies become
//     dependentRequired (lists) and dependentSchemas (schemas).
//
// Base URL, in priority order: opts.BaseURL; the first server (OAS3
// servers[0].url with its variables' defaults, relative URLs resolved
// against SpecURL; OAS2 scheme://host+basePath); scheme://host of SpecURL;
// "/". A server URL whose host is loopback or unspecified (localhost,
// 127.0.0.0/8, ::1, 0.0.0.0, ::) is an error when SpecURL is an http(s) or
// ws(s) URL to a host that is not loopback: a remote document must not
// point utcpd at local services. Tool URLs are the base joined with the
// path, keeping {param} placeholders.
//
// Auth: from the operation's security (an empty list means none), else the
// document's, using the first requirement whose scheme is understood:
// apiKey → api_key "${API_KEY_n}" under the scheme's name and location;
// http basic (OAS2 basic) → basic "${USERNAME_n}" / "${PASSWORD_n}"; http
// bearer → api_key "Bearer ${API_KEY_n}" in the Authorization header;
// oauth2 → oauth2 with the flow's tokenUrl (clientCredentials/application
// preferred, then authorizationCode/accessCode/password; relative URLs
// resolved against SpecURL), "${CLIENT_ID_n}", "${CLIENT_SECRET_n}" and the
// required scopes joined by spaces. n numbers the security schemes from 1
// in order of first use, so every operation using a scheme shares its
// variables. opts.AuthTools replaces a compatible generated auth.
//
// The manual's utcp_version is utcp.Version and its manual_version the
// document's info.version (else "1.0.0"). Errors are *utcp.Error with code
// invalid_manual.
func ConvertOpenAPI(doc map[string]any, opts OpenAPIOptions) (*utcp.Manual, error) {
	if doc == nil {
		return nil, utcp.NewError(utcp.CodeInvalidManual, "openapi: no document")
	}
	c := &oasConverter{doc: doc, opts: opts, budget: oasExpansionBudget, schemeNum: map[string]int{}, defs: &oasDefs{}}
	c.oas2 = doc["swagger"] != nil && doc["openapi"] == nil
	base, err := c.baseURL()
	if err != nil {
		return nil, err
	}
	c.base = base
	info, _ := doc["info"].(map[string]any)
	c.templateName = oasTemplateName(oasString(info, "title"))

	paths, _ := doc["paths"].(map[string]any)
	manual := &utcp.Manual{UTCPVersion: utcp.Version, ManualVersion: "1.0.0", Tools: []utcp.Tool{}}
	if v := oasString(info, "version"); v != "" {
		manual.ManualVersion = v
	}
	// Every operation becomes a tool, named by its operationId; the
	// operations without one (or whose operationId an earlier operation
	// took) are named from their method and path (oasOperationName) once
	// every operationId has claimed its name.
	type operation struct {
		path, method, id string
		item, op         map[string]any
	}
	var ops []operation
	taken := map[string]bool{}
	for _, path := range oasSortedKeys(paths) {
		item, _ := c.deref(paths[path]).(map[string]any)
		if item == nil {
			continue
		}
		for _, method := range []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"} {
			op, _ := item[method].(map[string]any)
			if op == nil {
				continue
			}
			id := oasString(op, "operationId")
			switch method {
			case "options", "head", "trace":
				where := strings.ToUpper(method) + " " + path
				if id != "" {
					where += " (" + id + ")"
				}
				c.warn("%s: skipped: method %s is not supported by the http call template", where, strings.ToUpper(method))
				continue
			}
			if id != "" && !taken[id] {
				taken[id] = true
			} else if id != "" {
				c.warn("%s %s: operationId %q is used by an earlier operation; named from its method and path", strings.ToUpper(method), path, id)
				id = ""
			}
			ops = append(ops, operation{path: path, method: method, id: id, item: item, op: op})
		}
	}
	var named []string
	for i := range ops {
		o := &ops[i]
		if o.id != "" {
			continue
		}
		base := oasOperationName(o.method, o.path)
		o.id = base
		for n := 2; taken[o.id]; n++ {
			o.id = fmt.Sprintf("%s_%d", base, n)
		}
		taken[o.id] = true
		named = append(named, o.id)
	}
	if len(named) > 0 {
		examples := named[:min(len(named), 3)]
		more := ""
		if len(named) > len(examples) {
			more = ", ..."
		}
		c.warn("%d of %d operations have no operationId (or a repeated one): named from their method and path (%s%s)",
			len(named), len(ops), strings.Join(examples, ", "), more)
	}
	for _, o := range ops {
		tool, err := c.tool(o.path, o.method, o.id, o.item, o.op)
		if err != nil {
			return nil, err
		}
		manual.Tools = append(manual.Tools, tool)
	}
	return manual, nil
}

// oasOperationName names an operation without an operationId from its
// method and path: the lower-case method, then each non-empty path
// segment, joined by "_", with the braces of {param} dropped and every
// character outside [A-Za-z0-9_] a "_" (runs of "_" collapsed, none at
// the ends): GET /pets/{petId} is get_pets_petId, POST / is post.
func oasOperationName(method, path string) string {
	var b strings.Builder
	b.WriteString(strings.ToLower(method))
	for _, seg := range strings.Split(path, "/") {
		seg = strings.NewReplacer("{", "", "}", "").Replace(seg)
		var w strings.Builder
		for _, r := range seg {
			if r < 128 && (r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
				w.WriteRune(r)
			} else {
				w.WriteByte('_')
			}
		}
		part := strings.Trim(w.String(), "_")
		for strings.Contains(part, "__") {
			part = strings.ReplaceAll(part, "__", "_")
		}
		if part != "" {
			b.WriteByte('_')
			b.WriteString(part)
		}
	}
	return b.String()
}

// oasExpansionBudget bounds the values copied while resolving $refs for one
// operation, so a document whose references fan out cannot blow up: about
// a megabyte of schema per tool at most.
const oasExpansionBudget = 50_000

type oasConverter struct {
	doc          map[string]any
	opts         OpenAPIOptions
	oas2         bool
	base         string
	templateName string
	budget       int
	schemeNum    map[string]int
	defs         *oasDefs // the root being resolved (see finish)
}

func (c *oasConverter) warn(format string, args ...any) {
	if c.opts.Warn != nil {
		c.opts.Warn("openapi: " + fmt.Sprintf(format, args...))
	}
}

func oasString(m map[string]any, key string) string {
	s, _ := m[key].(string)
	return s
}

func oasSortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

var oasTitleReplacer = regexp.MustCompile(`[ \-.,!?'"\\/()\[\]{}#@$%^&*+=~` + "`" + `|;:<>]`)

// oasTemplateName derives the call template name from info.title.
func oasTemplateName(title string) string {
	if title == "" {
		return "openapi"
	}
	return oasTitleReplacer.ReplaceAllString(title, "_")
}

// --- base URL ---

func (c *oasConverter) baseURL() (string, error) {
	if c.opts.BaseURL != "" {
		return strings.TrimRight(c.opts.BaseURL, "/"), nil
	}
	spec, _ := url.Parse(c.opts.SpecURL)
	if spec != nil && (spec.Scheme == "" || spec.Host == "") {
		spec = nil
	}
	var server string
	if c.oas2 {
		host := oasString(c.doc, "host")
		basePath := oasString(c.doc, "basePath")
		if host != "" {
			scheme := "https"
			if schemes, _ := c.doc["schemes"].([]any); len(schemes) > 0 {
				scheme, _ = schemes[0].(string)
				for _, s := range schemes {
					if s == "https" {
						scheme = "https"
					}
				}
			} else if spec != nil {
				scheme = spec.Scheme
			}
			server = scheme + "://" + host + basePath
		} else if spec != nil && basePath != "" {
			server = spec.Scheme + "://" + spec.Host + basePath
		}
	} else if servers, _ := c.doc["servers"].([]any); len(servers) > 0 {
		s0, _ := c.resolve(servers[0]).(map[string]any)
		server = oasString(s0, "url")
		vars, _ := s0["variables"].(map[string]any)
		for name, v := range vars {
			vm, _ := v.(map[string]any)
			if def, ok := vm["default"]; ok {
				server = strings.ReplaceAll(server, "{"+name+"}", fmt.Sprint(def))
			}
		}
	}
	if server != "" {
		u, err := url.Parse(server)
		if err != nil {
			return "", utcp.Errorf(utcp.CodeInvalidManual, "openapi: server URL %q: %w", server, err)
		}
		if !u.IsAbs() {
			if spec == nil {
				return strings.TrimRight(server, "/"), nil
			}
			u = spec.ResolveReference(u)
		}
		if spec != nil && oasNetworkScheme(spec.Scheme) && !oasLocalHost(spec.Hostname()) && oasLocalHost(u.Hostname()) {
			return "", utcp.NewError(utcp.CodeInvalidManual,
				"openapi: the document fetched from %s names the local server %s; refusing to point tools at a local address (set base_url explicitly to allow it)",
				spec.Host, u.Host).WithDetail("server", u.Host)
		}
		return strings.TrimRight(u.String(), "/"), nil
	}
	if spec != nil {
		return spec.Scheme + "://" + spec.Host, nil
	}
	return "/", nil
}

func oasNetworkScheme(s string) bool {
	switch strings.ToLower(s) {
	case "http", "https", "ws", "wss":
		return true
	}
	return false
}

// oasLocalHost reports whether host is a literal loopback or unspecified
// address (what a local service listens on).
func oasLocalHost(host string) bool {
	h := strings.TrimSuffix(strings.ToLower(host), ".")
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && (ip.IsLoopback() || ip.IsUnspecified())
}

func oasJoinURL(base, path string) string {
	return strings.TrimRight(base, "/") + "/" + strings.TrimLeft(path, "/")
}

// --- $ref ---

// resolve returns v with every local $ref resolved (see ConvertOpenAPI).
func (c *oasConverter) resolve(v any) any { return c.expand(v, nil, 0) }

// oasFrame is a reference being resolved, with the number of instance
// levels (see oasDescends) entered before it.
type oasFrame struct {
	ref   string
	depth int
}

// oasDescends are the keywords whose subschemas apply to a part of the
// instance (a property, an item) rather than to the instance itself.
var oasDescends = map[string]bool{
	"properties": true, "patternProperties": true, "additionalProperties": true, "propertyNames": true,
	"items": true, "prefixItems": true, "additionalItems": true, "contains": true,
	"unevaluatedItems": true, "unevaluatedProperties": true,
}

// expand copies v with its local $refs resolved. stack holds the
// references being resolved around v, depth the instance levels entered
// so far (both for cycles, see expandRef).
func (c *oasConverter) expand(v any, stack []oasFrame, depth int) any {
	c.budget--
	switch x := v.(type) {
	case map[string]any:
		if ref, ok := x["$ref"].(string); ok {
			return c.expandRef(ref, x, stack, depth)
		}
		out := make(map[string]any, len(x))
		for k, vv := range x {
			d := depth
			if oasDescends[k] {
				d++
			}
			out[k] = c.expand(vv, stack, d)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, vv := range x {
			out[i] = c.expand(vv, stack, depth)
		}
		return out
	}
	return v
}

func (c *oasConverter) expandRef(ref string, node map[string]any, stack []oasFrame, depth int) any {
	unresolved := func(why string) any {
		c.warn("$ref %s left unresolved: %s", ref, why)
		return map[string]any{"$comment": "unresolved $ref " + ref}
	}
	if !strings.HasPrefix(ref, "#") {
		return unresolved("only local references (#/...) are supported")
	}
	siblings := func(out map[string]any) map[string]any {
		for k, v := range node {
			if k != "$ref" {
				out[k] = c.expand(v, stack, depth)
			}
		}
		return out
	}
	if i := slices.IndexFunc(stack, func(f oasFrame) bool { return f.ref == ref }); i >= 0 {
		if depth == stack[i].depth {
			// The schema would apply itself to the same instance
			// forever (A: allOf [A]): nothing to validate.
			c.warn("$ref %s left unresolved: it refers to itself without descending into a property or item", ref)
			return siblings(map[string]any{"$comment": "unresolved $ref " + ref + " (refers to itself)"})
		}
		// A recursive schema: a reference into the root's $defs, where
		// finish puts the target once (see oasDefs).
		return siblings(map[string]any{"$ref": oasDefsPrefix + c.defs.name(ref)})
	}
	if c.budget <= 0 {
		return unresolved("expansion budget exhausted")
	}
	target, ok := c.pointer(ref)
	if !ok {
		return unresolved("no such target")
	}
	resolved := c.expand(target, append(stack, oasFrame{ref, depth}), depth)
	// Keywords next to $ref (allowed in OAS 3.1) refine the target.
	if m, ok := resolved.(map[string]any); ok && len(node) > 1 {
		merged := make(map[string]any, len(m)+len(node))
		for k, v := range m {
			merged[k] = v
		}
		return siblings(merged)
	}
	return resolved
}

// oasDefsPrefix starts every $ref of a converted schema.
const oasDefsPrefix = "#/$defs/"

// oasDefs collects the recursive references met while one root schema
// (a tool's inputs or its outputs) is resolved: each gets a name in the
// root's $defs, and the reference that closes a cycle becomes
// {"$ref": "#/$defs/<name>"}.
type oasDefs struct {
	names map[string]string // document reference → name
	refs  []string          // in order of first use
	taken map[string]bool
}

var oasDefNameReplacer = regexp.MustCompile(`[^A-Za-z0-9._-]`)

// name returns ref's name in $defs, choosing one on first use: the last
// segment of the pointer, sanitised, made unique with _2, _3, ...
func (d *oasDefs) name(ref string) string {
	if n, ok := d.names[ref]; ok {
		return n
	}
	if d.names == nil {
		d.names, d.taken = map[string]string{}, map[string]bool{}
	}
	base := ref[strings.LastIndex(ref, "/")+1:]
	base = strings.ReplaceAll(strings.ReplaceAll(base, "~1", "/"), "~0", "~")
	if u, err := url.PathUnescape(base); err == nil {
		base = u
	}
	base = oasDefNameReplacer.ReplaceAllString(base, "_")
	if base == "" {
		base = "schema"
	}
	n := base
	for i := 2; d.taken[n]; i++ {
		n = fmt.Sprintf("%s_%d", base, i)
	}
	d.names[ref], d.taken[n] = n, true
	d.refs = append(d.refs, ref)
	return n
}

// finish turns root, built from resolved parts while defs collected
// their recursive references, into JSON Schema 2020-12 (jsonSchema) and
// gives it the $defs those references point at: each target resolved
// once more with itself on the stack, so that the cycle closes on its
// own $ref, and converted the same way.
func (c *oasConverter) finish(root map[string]any, defs *oasDefs) map[string]any {
	out := c.schemaMap(root)
	if len(defs.refs) == 0 {
		return out
	}
	saved := c.defs
	c.defs = defs
	all := map[string]any{}
	for i := 0; i < len(defs.refs); i++ { // grows while targets meet new cycles
		ref := defs.refs[i]
		target, _ := c.pointer(ref)
		all[defs.names[ref]] = c.jsonSchema(c.expand(target, []oasFrame{{ref, 0}}, 0))
	}
	c.defs = saved
	// Keep the definitions the schema reaches (a reference met in a part
	// of the document that the schema does not use registered one too).
	kept := map[string]any{}
	var reach func(v any)
	reach = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if ref, ok := x["$ref"].(string); ok {
				name := strings.TrimPrefix(ref, oasDefsPrefix)
				if def, ok := all[name]; ok && kept[name] == nil {
					kept[name] = def
					reach(def)
				}
			}
			for _, vv := range x {
				reach(vv)
			}
		case []any:
			for _, vv := range x {
				reach(vv)
			}
		}
	}
	reach(out)
	if len(kept) > 0 {
		out["$defs"] = kept
	}
	return out
}

// deref follows v's own local $ref chain (not those nested inside it) and
// returns the target as it stands in the document. It is for containers
// (path items) whose parts are resolved one by one.
func (c *oasConverter) deref(v any) any {
	for range 32 {
		m, ok := v.(map[string]any)
		if !ok {
			return v
		}
		ref, ok := m["$ref"].(string)
		if !ok || !strings.HasPrefix(ref, "#") {
			return v
		}
		if v, ok = c.pointer(ref); !ok {
			return nil
		}
	}
	return nil
}

// pointer follows a local JSON pointer "#/a/b" in the document.
func (c *oasConverter) pointer(ref string) (any, bool) {
	frag := strings.TrimPrefix(ref, "#")
	if f, err := url.PathUnescape(frag); err == nil {
		frag = f
	}
	if frag == "" {
		return c.doc, true
	}
	if !strings.HasPrefix(frag, "/") {
		return nil, false
	}
	var cur any = c.doc
	for _, tok := range strings.Split(frag[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch x := cur.(type) {
		case map[string]any:
			v, ok := x[tok]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			var i int
			if _, err := fmt.Sscanf(tok, "%d", &i); err != nil || i < 0 || i >= len(x) {
				return nil, false
			}
			cur = x[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// --- operations ---

func (c *oasConverter) tool(path, method, id string, item, op map[string]any) (utcp.Tool, error) {
	c.budget = oasExpansionBudget
	c.defs = &oasDefs{}
	where := fmt.Sprintf("%s %s (%s)", strings.ToUpper(method), path, id)

	// Merge path-level and operation-level parameters by (in, name).
	type pkey struct{ in, name string }
	var order []pkey
	params := map[pkey]map[string]any{}
	for _, list := range []any{item["parameters"], op["parameters"]} {
		arr, _ := list.([]any)
		for _, p := range arr {
			pm, _ := c.resolve(p).(map[string]any)
			name, in := oasString(pm, "name"), oasString(pm, "in")
			if name == "" || in == "" {
				continue
			}
			k := pkey{in, name}
			if _, ok := params[k]; !ok {
				order = append(order, k)
			}
			params[k] = pm
		}
	}

	props := map[string]any{}
	var required, headerFields, cookieFields []string
	addRequired := func(name string) {
		if !slices.Contains(required, name) {
			required = append(required, name)
		}
	}
	contentType := "application/json"
	hasBody := false
	var formProps map[string]any
	var formRequired []string

	for _, k := range order {
		p := params[k]
		switch k.in {
		case "path", "query", "header":
			if k.name == "body" && (op["requestBody"] != nil) {
				c.warn("%s: parameter %q hidden by the request body property of the same name", where, k.name)
			}
			props[k.name] = c.paramSchema(p)
			if k.in == "path" || p["required"] == true {
				addRequired(k.name)
			}
			if k.in == "header" {
				headerFields = append(headerFields, k.name)
			}
		case "body": // OAS2
			s := c.schemaOf(p["schema"])
			oasAddDescription(s, p)
			oasAddExamples(s, p["example"], nil)
			props["body"] = s
			hasBody = true
			if p["required"] == true {
				addRequired("body")
			}
			if mt := c.oas2Consumes(op); mt != "" && !oasIsJSON(mt) {
				contentType = mt
			}
		case "formData": // OAS2
			if formProps == nil {
				formProps = map[string]any{}
			}
			formProps[k.name] = c.paramSchema(p)
			if p["required"] == true {
				formRequired = append(formRequired, k.name)
			}
		case "cookie":
			props[k.name] = c.paramSchema(p)
			if p["required"] == true {
				addRequired(k.name)
			}
			cookieFields = append(cookieFields, k.name)
		default:
			c.warn("%s: parameter %q skipped: unknown location %q", where, k.name, k.in)
		}
	}
	if formProps != nil && !hasBody {
		s := map[string]any{"type": "object", "properties": formProps}
		if len(formRequired) > 0 {
			s["required"] = formRequired
			addRequired("body")
		}
		props["body"] = s
		hasBody = true
		contentType = "application/x-www-form-urlencoded"
	}
	if rb, _ := c.resolve(op["requestBody"]).(map[string]any); rb != nil { // OAS3
		content, _ := rb["content"].(map[string]any)
		if mt, media := oasPickMedia(content); media != nil {
			s := c.schemaOf(media["schema"])
			oasAddDescription(s, rb)
			oasAddExamples(s, media["example"], media["examples"])
			props["body"] = s
			hasBody = true
			if rb["required"] == true {
				addRequired("body")
			}
			if !oasIsJSON(mt) && !strings.Contains(mt, "*") {
				contentType = mt
			}
		}
	}

	inputs := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		inputs["required"] = required
	}
	inputDefs := c.defs
	c.defs = &oasDefs{}
	tool := utcp.Tool{
		Name:        id,
		Description: oasString(op, "summary"),
		Tags:        []string{},
	}
	if tool.Description == "" {
		tool.Description = oasString(op, "description")
	}
	if tags, _ := op["tags"].([]any); len(tags) > 0 {
		for _, t := range tags {
			if s, ok := t.(string); ok {
				tool.Tags = append(tool.Tags, s)
			}
		}
	}
	switch method {
	case "get":
		tool.Tags = oasAddTag(tool.Tags, "read_only")
	case "delete":
		tool.Tags = oasAddTag(tool.Tags, "destructive")
	}
	var err error
	if tool.Inputs, err = json.Marshal(c.finish(inputs, inputDefs)); err != nil {
		return tool, utcp.Errorf(utcp.CodeInvalidManual, "openapi: %s: inputs: %w", where, err)
	}
	if out := c.outputs(op); out != nil {
		outputDefs := c.defs
		c.defs = &oasDefs{}
		if tool.Outputs, err = json.Marshal(c.finish(out, outputDefs)); err != nil {
			return tool, utcp.Errorf(utcp.CodeInvalidManual, "openapi: %s: outputs: %w", where, err)
		}
	}

	tmpl := map[string]any{
		"name":               c.templateName,
		"call_template_type": "http",
		"url":                oasJoinURL(c.base, path),
		"http_method":        strings.ToUpper(method),
		"content_type":       contentType,
	}
	if hasBody {
		tmpl["body_field"] = "body"
	}
	if len(headerFields) > 0 {
		tmpl["header_fields"] = headerFields
	}
	if len(cookieFields) > 0 {
		tmpl["cookie_fields"] = cookieFields
	}
	if auth := c.auth(op, where); auth != nil {
		tmpl["auth"] = auth
	}
	raw, err := json.Marshal(tmpl)
	if err != nil {
		return tool, utcp.Errorf(utcp.CodeInvalidManual, "openapi: %s: call template: %w", where, err)
	}
	var ct utcp.CallTemplate
	if err := json.Unmarshal(raw, &ct); err != nil {
		return tool, utcp.Errorf(utcp.CodeInvalidManual, "openapi: %s: call template: %w", where, err)
	}
	tool.ToolCallTemplate = &ct
	return tool, nil
}

// oasAddTag appends tag to tags unless it is there.
func oasAddTag(tags []string, tag string) []string {
	if slices.Contains(tags, tag) {
		return tags
	}
	return append(tags, tag)
}

// oas2Consumes returns the media type an OAS2 operation's body is sent as:
// the first JSON type of its consumes (else the document's), else the
// first listed, else "".
func (c *oasConverter) oas2Consumes(op map[string]any) string {
	list, _ := op["consumes"].([]any)
	if len(list) == 0 {
		list, _ = c.doc["consumes"].([]any)
	}
	first := ""
	for _, v := range list {
		s, _ := v.(string)
		if oasIsJSON(s) {
			return s
		}
		if first == "" {
			first = s
		}
	}
	return first
}

// schemaOf returns an already resolved schema value as a map ({} when
// absent or not an object). Resolved values are fresh copies, so callers
// may change them.
func (c *oasConverter) schemaOf(v any) map[string]any {
	if m, ok := v.(map[string]any); ok {
		return m
	}
	return map[string]any{}
}

// oas2SchemaKeys are the schema keywords an OAS2 non-body parameter carries
// inline.
var oas2SchemaKeys = []string{"type", "format", "items", "enum", "default", "minimum", "maximum",
	"exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength", "pattern", "minItems", "maxItems", "uniqueItems", "multipleOf",
	"x-nullable"}

// paramSchema builds the property schema of a (resolved) parameter.
func (c *oasConverter) paramSchema(p map[string]any) map[string]any {
	var s map[string]any
	switch {
	case p["schema"] != nil:
		s = c.schemaOf(p["schema"])
	case p["content"] != nil:
		content, _ := p["content"].(map[string]any)
		if _, media := oasPickMedia(content); media != nil {
			s = c.schemaOf(media["schema"])
			oasAddExamples(s, media["example"], media["examples"])
		}
	}
	if s == nil {
		s = map[string]any{}
		for _, k := range oas2SchemaKeys {
			if v, ok := p[k]; ok {
				s[k] = v
			}
		}
	}
	oasAddDescription(s, p)
	oasAddExamples(s, p["example"], p["examples"])
	return s
}

func oasAddDescription(s, from map[string]any) {
	if d := oasString(from, "description"); d != "" {
		if _, ok := s["description"]; !ok {
			s["description"] = d
		}
	}
}

// oasAddExamples merges example values into s["examples"], folding in the
// schema's own "example" and dropping duplicates (by canonical JSON).
func oasAddExamples(s map[string]any, example any, examples any) {
	var vals []any
	if ex, ok := s["examples"].([]any); ok {
		vals = append(vals, ex...)
	}
	if ex, ok := s["example"]; ok {
		vals = append(vals, ex)
		delete(s, "example")
	}
	if example != nil {
		vals = append(vals, example)
	}
	switch ex := examples.(type) {
	case map[string]any: // OAS3: name → Example Object {value}
		for _, name := range oasSortedKeys(ex) {
			if em, ok := ex[name].(map[string]any); ok {
				if v, ok := em["value"]; ok {
					vals = append(vals, v)
				}
			}
		}
	case []any:
		vals = append(vals, ex...)
	}
	if len(vals) == 0 {
		return
	}
	seen := map[string]bool{}
	out := []any{}
	for _, v := range vals {
		b, err := json.Marshal(v) // map keys are sorted: canonical enough
		if err != nil || seen[string(b)] {
			continue
		}
		seen[string(b)] = true
		out = append(out, v)
	}
	s["examples"] = out
}

func oasIsJSON(mediaType string) bool {
	mt := strings.ToLower(strings.TrimSpace(strings.Split(mediaType, ";")[0]))
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

// oasPickMedia picks application/json, else another JSON type, else the
// first media type (sorted) with a schema.
func oasPickMedia(content map[string]any) (string, map[string]any) {
	keys := oasSortedKeys(content)
	for _, pass := range []func(string) bool{
		func(k string) bool { return strings.EqualFold(strings.Split(k, ";")[0], "application/json") },
		oasIsJSON,
		func(string) bool { return true },
	} {
		for _, k := range keys {
			m, _ := content[k].(map[string]any)
			if m != nil && m["schema"] != nil && pass(k) {
				return k, m
			}
		}
	}
	return "", nil
}

func (c *oasConverter) outputs(op map[string]any) map[string]any {
	responses, _ := op["responses"].(map[string]any)
	for _, code := range []string{"200", "201", "202", "203", "2XX", "2xx", "default"} {
		r, _ := c.resolve(responses[code]).(map[string]any)
		if r == nil {
			continue
		}
		if r["schema"] != nil { // OAS2
			return c.schemaOf(r["schema"])
		}
		content, _ := r["content"].(map[string]any)
		if _, media := oasPickMedia(content); media != nil {
			return c.schemaOf(media["schema"])
		}
	}
	return nil
}

// --- auth ---

func (c *oasConverter) auth(op map[string]any, where string) *utcp.Auth {
	sec, ok := op["security"]
	if !ok {
		sec = c.doc["security"]
	}
	reqs, _ := sec.([]any)
	var schemes map[string]any
	if c.oas2 {
		schemes, _ = c.doc["securityDefinitions"].(map[string]any)
	} else {
		comps, _ := c.doc["components"].(map[string]any)
		schemes, _ = comps["securitySchemes"].(map[string]any)
	}
	for _, r := range reqs {
		rm, _ := r.(map[string]any)
		for _, name := range oasSortedKeys(rm) {
			scheme, _ := c.resolve(schemes[name]).(map[string]any)
			if scheme == nil {
				c.warn("%s: security scheme %q is not defined", where, name)
				continue
			}
			var scopes []string
			if list, ok := rm[name].([]any); ok {
				for _, s := range list {
					if str, ok := s.(string); ok {
						scopes = append(scopes, str)
					}
				}
			}
			a := c.schemeAuth(name, scheme, scopes)
			if a == nil {
				c.warn("%s: security scheme %q (type %v) is not supported", where, name, scheme["type"])
				continue
			}
			if c.opts.AuthTools != nil && oasAuthCompatible(a, c.opts.AuthTools) {
				cp := *c.opts.AuthTools
				return &cp
			}
			return a
		}
	}
	return nil
}

func (c *oasConverter) number(scheme string) int {
	n, ok := c.schemeNum[scheme]
	if !ok {
		n = len(c.schemeNum) + 1
		c.schemeNum[scheme] = n
	}
	return n
}

func (c *oasConverter) schemeAuth(name string, s map[string]any, scopes []string) *utcp.Auth {
	typ := strings.ToLower(oasString(s, "type"))
	switch {
	case typ == "apikey":
		loc := strings.ToLower(oasString(s, "in"))
		switch loc {
		case "header", "query", "cookie":
		default:
			return nil
		}
		return &utcp.Auth{Type: utcp.AuthAPIKey, APIKey: fmt.Sprintf("${API_KEY_%d}", c.number(name)), VarName: oasString(s, "name"), Location: loc}
	case typ == "basic" || typ == "http" && strings.EqualFold(oasString(s, "scheme"), "basic"):
		n := c.number(name)
		return &utcp.Auth{Type: utcp.AuthBasic, Username: fmt.Sprintf("${USERNAME_%d}", n), Password: fmt.Sprintf("${PASSWORD_%d}", n)}
	case typ == "http" && strings.EqualFold(oasString(s, "scheme"), "bearer"):
		return &utcp.Auth{Type: utcp.AuthAPIKey, APIKey: fmt.Sprintf("Bearer ${API_KEY_%d}", c.number(name)), VarName: "Authorization", Location: "header"}
	case typ == "oauth2":
		tokenURL := ""
		if c.oas2 {
			switch oasString(s, "flow") {
			case "application", "accessCode", "password":
				tokenURL = oasString(s, "tokenUrl")
			}
		} else {
			flows, _ := s["flows"].(map[string]any)
			for _, f := range []string{"clientCredentials", "authorizationCode", "password"} {
				fm, _ := flows[f].(map[string]any)
				if tokenURL = oasString(fm, "tokenUrl"); tokenURL != "" {
					break
				}
			}
		}
		if tokenURL == "" {
			return nil
		}
		if spec, err := url.Parse(c.opts.SpecURL); err == nil && spec.IsAbs() {
			if u, err := url.Parse(tokenURL); err == nil && !u.IsAbs() {
				tokenURL = spec.ResolveReference(u).String()
			}
		}
		n := c.number(name)
		return &utcp.Auth{Type: utcp.AuthOAuth2, TokenURL: tokenURL,
			ClientID: fmt.Sprintf("${CLIENT_ID_%d}", n), ClientSecret: fmt.Sprintf("${CLIENT_SECRET_%d}", n),
			Scope: strings.Join(scopes, " ")}
	}
	return nil
}

// oasAuthCompatible reports whether the configured auth_tools can stand in
// for the auth generated from a security scheme.
func oasAuthCompatible(generated, configured *utcp.Auth) bool {
	if generated.Type != configured.Type {
		return false
	}
	if generated.Type != utcp.AuthAPIKey {
		return true
	}
	loc := func(a *utcp.Auth) string {
		if a.Location == "" {
			return "header"
		}
		return strings.ToLower(a.Location)
	}
	name := func(a *utcp.Auth) string {
		if a.VarName == "" {
			return "X-Api-Key"
		}
		return a.VarName
	}
	return strings.EqualFold(name(generated), name(configured)) && loc(generated) == loc(configured)
}
