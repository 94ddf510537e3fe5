package grpc

import (
	"encoding/json"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// maxSchemaDepth bounds how deeply nested messages are spelled out; deeper
// messages are described as plain objects.
const maxSchemaDepth = 12

// schemaBuilder derives JSON Schemas from message descriptors, describing
// the JSON that protojson reads (input) or writes (output) with utcpd's
// options: proto field names, 64-bit integers as strings on output (either
// form on input), enums by name, bytes as base64, well-known types in
// their JSON forms.
type schemaBuilder struct {
	output bool
	path   []protoreflect.FullName // messages being described, for the recursion guard
}

// messageSchema returns the schema of a message as JSON.
func messageSchema(md protoreflect.MessageDescriptor, output bool) json.RawMessage {
	b := &schemaBuilder{output: output}
	raw, _ := json.Marshal(b.message(md))
	return raw
}

// streamInputSchema is the arguments of a client-streaming or
// bidirectional method: {"messages": [<request>, ...]}.
func streamInputSchema(md protoreflect.MessageDescriptor) json.RawMessage {
	b := &schemaBuilder{}
	raw, _ := json.Marshal(map[string]any{
		"type": "object",
		"properties": map[string]any{
			"messages": map[string]any{
				"type":        "array",
				"description": "The request messages to stream, in order.",
				"items":       b.message(md),
			},
		},
		"required": []string{"messages"},
	})
	return raw
}

// valueInputSchema is the arguments of a method whose request is a
// well-known type with a JSON form that is not an object:
// {"value": <that form>}.
func valueInputSchema(md protoreflect.MessageDescriptor) json.RawMessage {
	b := &schemaBuilder{}
	raw, _ := json.Marshal(map[string]any{
		"type":       "object",
		"properties": map[string]any{"value": b.message(md)},
		"required":   []string{"value"},
	})
	return raw
}

// scalarJSON reports whether protojson writes a message as something
// other than a JSON object: the wrappers, Timestamp, Duration, FieldMask,
// Value and ListValue.
func scalarJSON(md protoreflect.MessageDescriptor) bool {
	name := string(md.FullName())
	if !strings.HasPrefix(name, "google.protobuf.") {
		return false
	}
	switch strings.TrimPrefix(name, "google.protobuf.") {
	case "Timestamp", "Duration", "FieldMask", "Value", "ListValue",
		"DoubleValue", "FloatValue", "Int64Value", "UInt64Value", "Int32Value", "UInt32Value", "BoolValue", "StringValue", "BytesValue":
		return true
	}
	return false
}

// listSchema is the result of a server-streaming or bidirectional call
// made with CallTool: the list of response messages.
func listSchema(md protoreflect.MessageDescriptor) json.RawMessage {
	b := &schemaBuilder{output: true}
	raw, _ := json.Marshal(map[string]any{"type": "array", "items": b.message(md)})
	return raw
}

func (b *schemaBuilder) int64Schema() map[string]any {
	if b.output {
		return map[string]any{"type": "string", "pattern": "^-?[0-9]+$"}
	}
	return map[string]any{"type": []string{"integer", "string"}, "pattern": "^-?[0-9]+$"}
}

// message returns the schema of a message, well-known types included.
func (b *schemaBuilder) message(md protoreflect.MessageDescriptor) map[string]any {
	if s := b.wellKnown(md); s != nil {
		return s
	}
	name := md.FullName()
	for _, p := range b.path {
		if p == name {
			return map[string]any{"type": "object", "description": "A " + string(name) + " (recursive; see above)."}
		}
	}
	if len(b.path) >= maxSchemaDepth {
		return map[string]any{"type": "object", "description": "A " + string(name) + "."}
	}
	b.path = append(b.path, name)
	defer func() { b.path = b.path[:len(b.path)-1] }()

	props := map[string]any{}
	var required []string
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		s := b.field(fd)
		if c := comment(fd); c != "" {
			s["description"] = c
		}
		props[string(fd.Name())] = s
		if fd.Cardinality() == protoreflect.Required {
			required = append(required, string(fd.Name()))
		}
	}
	out := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		out["required"] = required
	}
	if c := comment(md); c != "" {
		out["description"] = c
	}
	return out
}

// field returns the schema of one field, lists and maps included.
func (b *schemaBuilder) field(fd protoreflect.FieldDescriptor) map[string]any {
	switch {
	case fd.IsMap():
		return map[string]any{"type": "object", "additionalProperties": b.single(fd.MapValue())}
	case fd.IsList():
		return map[string]any{"type": "array", "items": b.single(fd)}
	}
	return b.single(fd)
}

// single returns the schema of one value of a field's kind.
func (b *schemaBuilder) single(fd protoreflect.FieldDescriptor) map[string]any {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return map[string]any{"type": "boolean"}
	case protoreflect.StringKind:
		return map[string]any{"type": "string"}
	case protoreflect.BytesKind:
		return map[string]any{"type": "string", "contentEncoding": "base64"}
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return map[string]any{"type": "integer", "minimum": int64(-1 << 31), "maximum": int64(1<<31 - 1)}
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return map[string]any{"type": "integer", "minimum": 0, "maximum": int64(1<<32 - 1)}
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return b.int64Schema()
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		return map[string]any{"type": "number"}
	case protoreflect.EnumKind:
		ed := fd.Enum()
		if ed.FullName() == "google.protobuf.NullValue" {
			return map[string]any{"type": "null"}
		}
		vals := ed.Values()
		names := make([]string, vals.Len())
		for i := range vals.Len() {
			names[i] = string(vals.Get(i).Name())
		}
		return map[string]any{"type": "string", "enum": names}
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return b.message(fd.Message())
	}
	return map[string]any{}
}

// wellKnown returns the schema of a google.protobuf type that protojson
// renders specially, or nil.
func (b *schemaBuilder) wellKnown(md protoreflect.MessageDescriptor) map[string]any {
	name := string(md.FullName())
	if !strings.HasPrefix(name, "google.protobuf.") {
		return nil
	}
	switch strings.TrimPrefix(name, "google.protobuf.") {
	case "Struct":
		return map[string]any{"type": "object"}
	case "Value":
		return map[string]any{}
	case "ListValue":
		return map[string]any{"type": "array"}
	case "Timestamp":
		return map[string]any{"type": "string", "format": "date-time"}
	case "Duration":
		return map[string]any{"type": "string", "pattern": `^-?[0-9]+(\.[0-9]+)?s$`, "description": "A duration in seconds with an s suffix, e.g. \"1.5s\"."}
	case "FieldMask":
		return map[string]any{"type": "string", "description": "Comma-separated field paths in lowerCamelCase."}
	case "Empty":
		return map[string]any{"type": "object", "properties": map[string]any{}}
	case "Any":
		return map[string]any{"type": "object", "properties": map[string]any{"@type": map[string]any{"type": "string"}}, "required": []string{"@type"}}
	case "DoubleValue", "FloatValue":
		return map[string]any{"type": "number"}
	case "Int32Value":
		return map[string]any{"type": "integer", "minimum": int64(-1 << 31), "maximum": int64(1<<31 - 1)}
	case "UInt32Value":
		return map[string]any{"type": "integer", "minimum": 0, "maximum": int64(1<<32 - 1)}
	case "Int64Value", "UInt64Value":
		return b.int64Schema()
	case "BoolValue":
		return map[string]any{"type": "boolean"}
	case "StringValue":
		return map[string]any{"type": "string"}
	case "BytesValue":
		return map[string]any{"type": "string", "contentEncoding": "base64"}
	}
	return nil
}

// comment returns the leading (else trailing) comment of a descriptor from
// the source info, trimmed; empty when the descriptors carry none (server
// reflection usually does not).
func comment(d protoreflect.Descriptor) string {
	loc := d.ParentFile().SourceLocations().ByDescriptor(d)
	c := loc.LeadingComments
	if strings.TrimSpace(c) == "" {
		c = loc.TrailingComments
	}
	lines := strings.Split(strings.TrimSpace(c), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSpace(l)
	}
	return strings.TrimSpace(strings.Join(lines, " "))
}
