package graphql

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/utcpd/utcpd/utcp"
)

// This file turns an introspected schema into tools: one per root field,
// with a JSON Schema of its arguments and result, and the document a call
// sends.

// IntrospectionQuery is the document discovery sends: the root types and
// every type with its fields, arguments, input fields, enum values and
// possible types, type references unwrapped seven levels deep.
const IntrospectionQuery = `query UtcpdIntrospection {
  __schema {
    queryType { name }
    mutationType { name }
    subscriptionType { name }
    types {
      kind name description
      fields(includeDeprecated: false) {
        name description
        args { name description type { ...TypeRef } defaultValue }
        type { ...TypeRef }
      }
      inputFields { name description type { ...TypeRef } defaultValue }
      enumValues(includeDeprecated: false) { name }
      possibleTypes { name }
    }
  }
}
fragment TypeRef on __Type {
  kind name
  ofType { kind name ofType { kind name ofType { kind name ofType { kind name
    ofType { kind name ofType { kind name ofType { kind name } } } } } } }
}`

// The __TypeKind values.
const (
	kindScalar      = "SCALAR"
	kindObject      = "OBJECT"
	kindInterface   = "INTERFACE"
	kindUnion       = "UNION"
	kindEnum        = "ENUM"
	kindInputObject = "INPUT_OBJECT"
	kindList        = "LIST"
	kindNonNull     = "NON_NULL"
)

type typeRef struct {
	Kind   string   `json:"kind"`
	Name   string   `json:"name"`
	OfType *typeRef `json:"ofType"`
}

type inputValue struct {
	Name         string  `json:"name"`
	Description  string  `json:"description"`
	Type         typeRef `json:"type"`
	DefaultValue *string `json:"defaultValue"`
}

type fieldDef struct {
	Name        string       `json:"name"`
	Description string       `json:"description"`
	Args        []inputValue `json:"args"`
	Type        typeRef      `json:"type"`
}

type fullType struct {
	Kind        string       `json:"kind"`
	Name        string       `json:"name"`
	Description string       `json:"description"`
	Fields      []fieldDef   `json:"fields"`
	InputFields []inputValue `json:"inputFields"`
	EnumValues  []struct {
		Name string `json:"name"`
	} `json:"enumValues"`
	PossibleTypes []struct {
		Name string `json:"name"`
	} `json:"possibleTypes"`
}

type named struct {
	Name string `json:"name"`
}

// introspection is the data of an answer to IntrospectionQuery.
type introspection struct {
	Schema *struct {
		QueryType        *named     `json:"queryType"`
		MutationType     *named     `json:"mutationType"`
		SubscriptionType *named     `json:"subscriptionType"`
		Types            []fullType `json:"types"`
	} `json:"__schema"`
}

// schema indexes an introspected schema by type name.
type schema struct {
	types map[string]*fullType
	depth int // selection depth
}

// operation is what a call of one tool sends.
type operation struct {
	field    string            // the root field, and the key of the result in data
	opType   string            // query, mutation or subscription
	document string            // the whole GraphQL document
	varTypes map[string]string // argument → GraphQL type
}

// baseName returns the named type inside lists and non-null wrappers.
func (r *typeRef) baseName() string {
	for r.OfType != nil && (r.Kind == kindList || r.Kind == kindNonNull) {
		r = r.OfType
	}
	return r.Name
}

// String prints r as GraphQL writes it: [Int!]!.
func (r *typeRef) String() string {
	switch r.Kind {
	case kindNonNull:
		if r.OfType != nil {
			return r.OfType.String() + "!"
		}
	case kindList:
		if r.OfType != nil {
			return "[" + r.OfType.String() + "]"
		}
	}
	return r.Name
}

// required reports whether an argument or input field must be given:
// non-null without a default.
func (v *inputValue) required() bool {
	return v.Type.Kind == kindNonNull && v.DefaultValue == nil
}

func (s *schema) kind(name string) string {
	if t := s.types[name]; t != nil {
		return t.Kind
	}
	return kindScalar // unknown: treat as a leaf
}

func (s *schema) isLeaf(name string) bool {
	k := s.kind(name)
	return k == kindScalar || k == kindEnum
}

// needsArgs reports whether a field has a required argument, which a
// generated selection cannot supply.
func needsArgs(f *fieldDef) bool {
	return slices.ContainsFunc(f.Args, func(a inputValue) bool { return a.required() })
}

// selection returns the selection set for a field of type name, depth
// levels of objects deep, or "" for a leaf type.
func (s *schema) selection(name string, depth int) string {
	t := s.types[name]
	if t == nil || s.isLeaf(name) {
		return ""
	}
	var parts []string
	switch t.Kind {
	case kindObject, kindInterface:
		if t.Kind == kindInterface {
			parts = append(parts, "__typename")
		}
		parts = append(parts, s.fieldSelections(t.Fields, depth)...)
	case kindUnion:
		parts = append(parts, "__typename")
		parts = append(parts, s.unionFragments(t)...)
	}
	if len(parts) == 0 {
		parts = []string{"__typename"}
	}
	return "{ " + strings.Join(parts, " ") + " }"
}

// fieldSelections selects the leaf fields of an object, and its object
// fields while depth allows; fields that need arguments are skipped.
func (s *schema) fieldSelections(fields []fieldDef, depth int) []string {
	var out []string
	for i := range fields {
		f := &fields[i]
		if needsArgs(f) || strings.HasPrefix(f.Name, "__") {
			continue
		}
		base := f.Type.baseName()
		if s.isLeaf(base) {
			out = append(out, f.Name)
			continue
		}
		if depth > 1 {
			if sub := s.selection(base, depth-1); sub != "" {
				out = append(out, f.Name+" "+sub)
			}
		}
	}
	return out
}

// unionFragments selects, for each member of a union, its leaf fields
// whose name has the same type in every member that has it (fields that
// differ would make the selection invalid).
func (s *schema) unionFragments(t *fullType) []string {
	typeOf := map[string]string{}
	conflict := map[string]bool{}
	for _, pt := range t.PossibleTypes {
		m := s.types[pt.Name]
		if m == nil {
			continue
		}
		for _, f := range m.Fields {
			ts := f.Type.String()
			if prev, ok := typeOf[f.Name]; ok && prev != ts {
				conflict[f.Name] = true
			}
			typeOf[f.Name] = ts
		}
	}
	var out []string
	for _, pt := range t.PossibleTypes {
		m := s.types[pt.Name]
		if m == nil {
			continue
		}
		var leaves []string
		for i := range m.Fields {
			f := &m.Fields[i]
			if !conflict[f.Name] && !needsArgs(f) && !strings.HasPrefix(f.Name, "__") && s.isLeaf(f.Type.baseName()) {
				leaves = append(leaves, f.Name)
			}
		}
		if len(leaves) > 0 {
			out = append(out, "... on "+pt.Name+" { "+strings.Join(leaves, " ")+" }")
		}
	}
	return out
}

// scalarSchema maps a GraphQL scalar to JSON Schema.
func scalarSchema(name string) map[string]any {
	switch name {
	case "Int":
		return map[string]any{"type": "integer"}
	case "Float":
		return map[string]any{"type": "number"}
	case "String", "ID":
		return map[string]any{"type": "string"}
	case "Boolean":
		return map[string]any{"type": "boolean"}
	}
	return map[string]any{"description": "GraphQL scalar " + name}
}

// maxInputDepth bounds the nesting of input object schemas (input types
// may be recursive).
const maxInputDepth = 8

// inputSchema is the JSON Schema of an argument or input field type.
func (s *schema) inputSchema(r *typeRef, depth int) map[string]any {
	switch r.Kind {
	case kindNonNull:
		if r.OfType != nil {
			return s.inputSchema(r.OfType, depth)
		}
	case kindList:
		if r.OfType != nil {
			return map[string]any{"type": "array", "items": s.inputSchema(r.OfType, depth)}
		}
	}
	t := s.types[r.Name]
	if t == nil {
		return scalarSchema(r.Name)
	}
	switch t.Kind {
	case kindEnum:
		vals := make([]any, 0, len(t.EnumValues))
		for _, v := range t.EnumValues {
			vals = append(vals, v.Name)
		}
		return withDescription(map[string]any{"type": "string", "enum": vals}, t.Description)
	case kindInputObject:
		if depth >= maxInputDepth {
			return withDescription(map[string]any{"type": "object"}, t.Description)
		}
		return withDescription(s.objectSchema(t.InputFields, depth+1), t.Description)
	}
	if builtinScalar(t.Name) {
		return scalarSchema(t.Name)
	}
	return withDescription(scalarSchema(t.Name), t.Description)
}

// builtinScalar reports whether name is one of GraphQL's own scalars,
// whose descriptions say nothing about a tool.
func builtinScalar(name string) bool {
	switch name {
	case "Int", "Float", "String", "ID", "Boolean":
		return true
	}
	return false
}

// objectSchema is the object schema of arguments or input fields.
func (s *schema) objectSchema(vals []inputValue, depth int) map[string]any {
	vals = sortedValues(vals)
	props := map[string]any{}
	required := []any{}
	for i := range vals {
		v := &vals[i]
		props[v.Name] = withDescription(s.inputSchema(&v.Type, depth), v.Description)
		if v.required() {
			required = append(required, v.Name)
		}
	}
	return map[string]any{"type": "object", "properties": props, "required": required}
}

// outputSchema is the JSON Schema of a result of type r as the generated
// selection (depth levels deep) returns it.
func (s *schema) outputSchema(r *typeRef, depth int) map[string]any {
	switch r.Kind {
	case kindNonNull:
		if r.OfType != nil {
			return s.outputSchema(r.OfType, depth)
		}
	case kindList:
		if r.OfType != nil {
			return map[string]any{"type": "array", "items": s.outputSchema(r.OfType, depth)}
		}
	}
	t := s.types[r.Name]
	if t == nil || s.isLeaf(r.Name) {
		if t != nil && t.Kind == kindEnum {
			return s.inputSchema(r, 0)
		}
		return scalarSchema(r.Name)
	}
	props := map[string]any{}
	if t.Kind == kindUnion || t.Kind == kindInterface {
		props["__typename"] = map[string]any{"type": "string"}
	}
	if t.Kind == kindObject || t.Kind == kindInterface {
		for i := range t.Fields {
			f := &t.Fields[i]
			if needsArgs(f) || strings.HasPrefix(f.Name, "__") {
				continue
			}
			base := f.Type.baseName()
			if s.isLeaf(base) || depth > 1 {
				props[f.Name] = withDescription(s.outputSchema(&f.Type, depth-1), f.Description)
			}
		}
	}
	return withDescription(map[string]any{"type": "object", "properties": props}, t.Description)
}

// sortedValues returns arguments or input fields in name order, so that
// documents and schemas do not depend on the order a server lists them
// in (graphql-go's varies).
func sortedValues(vals []inputValue) []inputValue {
	out := slices.Clone(vals)
	slices.SortFunc(out, func(a, b inputValue) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func withDescription(m map[string]any, d string) map[string]any {
	if d != "" {
		if _, ok := m["description"]; !ok {
			m["description"] = d
		}
	}
	return m
}

// buildDocument writes the document that calls root field f as an
// operation of opType named after the tool, declaring every argument as a
// variable (typed by varTypes) and selecting sel.
func buildDocument(opType, opName, field string, args []string, varTypes map[string]string, sel string) string {
	var b strings.Builder
	b.WriteString(opType)
	b.WriteByte(' ')
	b.WriteString(opName)
	if len(args) > 0 {
		b.WriteByte('(')
		for i, a := range args {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "$%s: %s", a, varTypes[a])
		}
		b.WriteByte(')')
	}
	b.WriteString(" { ")
	b.WriteString(field)
	if len(args) > 0 {
		b.WriteByte('(')
		for i, a := range args {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%s: $%s", a, a)
		}
		b.WriteByte(')')
	}
	if sel != "" {
		b.WriteByte(' ')
		b.WriteString(sel)
	}
	b.WriteString(" }")
	return b.String()
}

// tools turns the root fields of the introspected schema into tools and
// the operations that call them. Query fields come first, then mutation
// and subscription fields; a name already taken is prefixed with the
// operation type ("mutation_save").
func (s *schema) tools(root map[string]string, spec *Template) ([]utcp.Tool, map[string]*operation) {
	ops := map[string]*operation{}
	var tools []utcp.Tool
	for _, opType := range []string{OpQuery, OpMutation, OpSubscription} {
		rt := s.types[root[opType]]
		if root[opType] == "" || rt == nil {
			continue
		}
		for i := range rt.Fields {
			f := &rt.Fields[i]
			if strings.HasPrefix(f.Name, "__") {
				continue
			}
			name := f.Name
			if _, taken := ops[name]; taken {
				name = opType + "_" + f.Name
			}
			if _, taken := ops[name]; taken {
				continue
			}
			args := make([]string, 0, len(f.Args))
			varTypes := map[string]string{}
			for _, a := range sortedValues(f.Args) {
				args = append(args, a.Name)
				varTypes[a.Name] = a.Type.String()
				if override := spec.VariableTypes[a.Name]; override != "" {
					varTypes[a.Name] = strings.TrimSpace(override)
				}
			}
			sel := s.selection(f.Type.baseName(), s.depth)
			op := &operation{field: f.Name, opType: opType, varTypes: varTypes,
				document: buildDocument(opType, name, f.Name, args, varTypes, sel)}
			ops[name] = op
			inputs, _ := json.Marshal(s.objectSchema(f.Args, 0))
			outputs, _ := json.Marshal(s.outputSchema(&f.Type, s.depth))
			desc := f.Description
			if desc == "" {
				desc = fmt.Sprintf("GraphQL %s field %s.%s", opType, rt.Name, f.Name)
			}
			tools = append(tools, utcp.Tool{
				Name:        name,
				Description: desc,
				Inputs:      inputs,
				Outputs:     outputs,
				Tags:        []string{"graphql", opType},
			})
		}
	}
	return tools, ops
}

// opHeaderRE reads the head of an operation: its type, name and variable
// definitions.
var opHeaderRE = regexp.MustCompile(`(?m)^\s*(query|mutation|subscription)\b\s*([_A-Za-z][_0-9A-Za-z]*)?\s*(\(([^)]*)\))?`)

// varDefRE reads one variable definition: $name: Type.
var varDefRE = regexp.MustCompile(`\$([_A-Za-z][_0-9A-Za-z]*)\s*:\s*([\[\]_0-9A-Za-z!\s]+)`)

// commentRE matches a GraphQL comment.
var commentRE = regexp.MustCompile(`#[^\n\r]*`)

// parseOperation reads the operation type, name and variable types of the
// operation of an explicit document that a request runs: the one named
// opName, or else the first, each found at the start of a line ("{ ... }"
// is a query). It does not validate the document: the server does.
func parseOperation(doc, opName string) (opType, name string, vars []string, varTypes map[string]string) {
	src := commentRE.ReplaceAllString(doc, "")
	varTypes = map[string]string{}
	if strings.HasPrefix(strings.TrimSpace(src), "{") {
		return OpQuery, "", nil, varTypes
	}
	var m []string
	for _, cand := range opHeaderRE.FindAllStringSubmatch(src, -1) {
		if m == nil || opName != "" && cand[2] == opName {
			m = cand
		}
		if opName == "" || cand[2] == opName {
			break
		}
	}
	if m == nil {
		return OpQuery, "", nil, varTypes
	}
	opType, name = m[1], m[2]
	for _, v := range varDefRE.FindAllStringSubmatch(m[4], -1) {
		vars = append(vars, v[1])
		varTypes[v[1]] = strings.Join(strings.Fields(v[2]), "")
	}
	return opType, name, vars, varTypes
}

// queryTool is the one tool a template with an explicit query describes:
// named by operation_name, the document's operation name, or the manual;
// its inputs are the document's variables (types from variable_types
// first).
func queryTool(manual string, spec *Template) (utcp.Tool, *operation) {
	opType, docName, vars, varTypes := parseOperation(spec.Query, spec.OperationName)
	for k, v := range spec.VariableTypes {
		if _, ok := varTypes[k]; !ok {
			vars = append(vars, k)
		}
		varTypes[k] = strings.TrimSpace(v)
	}
	name := spec.OperationName
	if name == "" {
		name = docName
	}
	if name == "" {
		name = manual
	}
	if name == "" {
		name = opType
	}
	props := map[string]any{}
	required := []any{}
	for _, v := range vars {
		props[v] = typeStringSchema(varTypes[v])
		if strings.HasSuffix(varTypes[v], "!") {
			required = append(required, v)
		}
	}
	inputs, _ := json.Marshal(map[string]any{"type": "object", "properties": props, "required": required})
	op := &operation{opType: opType, document: spec.Query, varTypes: varTypes}
	return utcp.Tool{
		Name:        name,
		Description: fmt.Sprintf("GraphQL %s %s (the call template's own document)", opType, name),
		Inputs:      inputs,
		Outputs:     json.RawMessage(`{}`),
		Tags:        []string{"graphql", opType},
	}, op
}

// typeStringSchema is the JSON Schema of a type written as a string
// ("[Int!]!"); named types other than the built-in scalars accept any
// value.
func typeStringSchema(ts string) map[string]any {
	ts = strings.TrimSuffix(strings.TrimSpace(ts), "!")
	if strings.HasPrefix(ts, "[") && strings.HasSuffix(ts, "]") {
		return map[string]any{"type": "array", "items": typeStringSchema(ts[1 : len(ts)-1])}
	}
	return scalarSchema(ts)
}
