package grpc

import (
	"encoding/json"
	"math"
	"path/filepath"
	"testing"

	"github.com/bufbuild/protocompile"
	"github.com/google/go-cmp/cmp"
	"github.com/utcpd/utcpd/internal/jsonx"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"
)

// testMessages compiles testdata's test.proto and returns its message
// descriptors by name.
func testMessages(t testing.TB) map[string]protoreflect.MessageDescriptor {
	t.Helper()
	c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{ImportPaths: []string{filepath.Join("testdata", "protos")}})}
	files, err := c.Compile(t.Context(), "utcpd/test/v1/test.proto")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]protoreflect.MessageDescriptor{}
	msgs := files[0].Messages()
	for i := range msgs.Len() {
		out[string(msgs.Get(i).Name())] = msgs.Get(i)
	}
	return out
}

var (
	slowIn  = protojson.UnmarshalOptions{Resolver: protoregistry.GlobalTypes}
	slowOut = protojson.MarshalOptions{UseProtoNames: true, EmitDefaultValues: true}
)

// checkFastIn: when fill takes args, protojson reads the same message
// from the arguments' JSON.
func checkFastIn(t *testing.T, md protoreflect.MessageDescriptor, args map[string]any) (took bool) {
	t.Helper()
	fast := dynamicpb.NewMessage(md)
	if !fill(fast, args) {
		return false
	}
	b, err := json.Marshal(args)
	if err != nil {
		t.Fatalf("fill took arguments that are not JSON: %v", args)
	}
	slow := dynamicpb.NewMessage(md)
	if err := slowIn.Unmarshal(b, slow); err != nil {
		t.Fatalf("fill took %s, which protojson refuses: %v", b, err)
	}
	if !proto.Equal(fast, slow) {
		t.Fatalf("fill and protojson differ on %s:\nfast %v\nslow %v", b, fast, slow)
	}
	return true
}

// checkFastOut: when value renders m, it gives what protojson writes.
func checkFastOut(t *testing.T, m protoreflect.Message) (took bool) {
	t.Helper()
	fast, ok := value(m)
	if !ok {
		return false
	}
	b, err := slowOut.Marshal(m.Interface())
	if err != nil {
		t.Fatalf("value rendered a message protojson refuses (%v): %v", err, fast)
	}
	slow, _ := jsonx.DecodeValue(b)
	if diff := cmp.Diff(slow, any(fast)); diff != "" {
		t.Fatalf("value and protojson differ (-protojson +value):\n%s", diff)
	}
	return true
}

func TestFastPathsMatchProtojson(t *testing.T) {
	mds := testMessages(t)
	plain := mds["Plain"]
	if !fastMessage(plain) {
		t.Fatal("Plain does not take the fast paths")
	}
	if fastMessage(mds["Kinds"]) {
		t.Error("Kinds, which has well-known types, takes the fast paths")
	}
	full := map[string]any{
		"i32": 5, "i64": 123, "u32": 7.0, "u64": 9007199254740992.0, "s32": -4, "f64": int64(3),
		"f": 1.1, "d": -2.5e-7, "b": true, "s": "héllo 🌍", "color": "RED", "tags": []any{"a", ""},
		"counts": map[string]any{"x": 3.0, "": -1}, "child": map[string]any{"s": "c", "child": map[string]any{"i32": 1}},
		"children": []any{map[string]any{"b": true}, map[string]any{}}, "ds": []any{1, 2.5}, "colors": []any{"GREEN"},
		"name": "n", "maybe": 0, "i64big": nil,
	}
	delete(full, "i64big")
	taken := map[string]map[string]any{
		"full":      full,
		"empty":     {},
		"numbers":   {"i32": json.Number("-7"), "d": json.Number("1e300"), "u32": 4294967295.0},
		"zero opt":  {"maybe": 0.0},
		"min int32": {"i32": float64(math.MinInt32)},
	}
	for name, args := range taken {
		if !checkFastIn(t, plain, args) {
			t.Errorf("%s: fill gave up on canonical arguments %v", name, args)
		}
	}
	// Not canonical: fill gives up and protojson decides.
	for name, args := range map[string]map[string]any{
		"int64 as string":     {"i64": "12"},
		"enum as number":      {"color": 1},
		"bytes":               {"raw": "AAE="},
		"fraction for int":    {"i32": 1.5},
		"int32 overflow":      {"i32": 3e9},
		"unknown field":       {"zz": 1},
		"json name":           {"byId": map[string]any{}},
		"int map keys":        {"by_id": map[string]any{"1": map[string]any{}}},
		"bool map keys":       {"flags": map[string]any{"true": "x"}},
		"two oneof members":   {"name": "a", "number": 1},
		"null":                {"s": nil},
		"float overflow":      {"f": 1e39},
		"beyond 2^53":         {"i64": 1e17},
		"negative uint":       {"u32": -1},
		"unknown enum name":   {"color": "BLUE"},
		"nested bad":          {"child": map[string]any{"i32": "x"}},
		"list of wrong kind":  {"tags": []any{1}},
		"list not a list":     {"tags": "a"},
		"invalid utf-8":       {"s": "\xff"},
		"message not object":  {"child": []any{}},
		"NaN":                 {"d": math.NaN()},
		"string for a double": {"d": "1.5"},
	} {
		if checkFastIn(t, plain, args) {
			t.Errorf("%s: fill took %v; protojson should decide", name, args)
		}
	}
	// Outputs.
	for name, args := range taken {
		m := dynamicpb.NewMessage(plain)
		b, _ := json.Marshal(args)
		if err := slowIn.Unmarshal(b, m); err != nil {
			t.Fatal(err)
		}
		if !checkFastOut(t, m) {
			t.Errorf("%s: value gave up", name)
		}
	}
	fd := func(n string) protoreflect.FieldDescriptor { return plain.Fields().ByName(protoreflect.Name(n)) }
	for name, set := range map[string]func(m *dynamicpb.Message){
		"NaN":           func(m *dynamicpb.Message) { m.Set(fd("d"), protoreflect.ValueOfFloat64(math.NaN())) },
		"Infinity":      func(m *dynamicpb.Message) { m.Set(fd("d"), protoreflect.ValueOfFloat64(math.Inf(1))) },
		"-Infinity":     func(m *dynamicpb.Message) { m.Set(fd("f"), protoreflect.ValueOfFloat32(float32(math.Inf(-1)))) },
		"large":         func(m *dynamicpb.Message) { m.Set(fd("d"), protoreflect.ValueOfFloat64(1e21)) },
		"small":         func(m *dynamicpb.Message) { m.Set(fd("d"), protoreflect.ValueOfFloat64(-1.5e-7)) },
		"float32":       func(m *dynamicpb.Message) { m.Set(fd("f"), protoreflect.ValueOfFloat32(1.1)) },
		"float32 small": func(m *dynamicpb.Message) { m.Set(fd("f"), protoreflect.ValueOfFloat32(3e-9)) },
		"unknown enum":  func(m *dynamicpb.Message) { m.Set(fd("color"), protoreflect.ValueOfEnum(7)) },
		"bytes":         func(m *dynamicpb.Message) { m.Set(fd("raw"), protoreflect.ValueOfBytes([]byte{0, 0xff, 'a'})) },
		"max uint64":    func(m *dynamicpb.Message) { m.Set(fd("u64"), protoreflect.ValueOfUint64(math.MaxUint64)) },
		"int map": func(m *dynamicpb.Message) {
			m.Mutable(fd("by_id")).Map().Set(protoreflect.ValueOfInt32(-3).MapKey(), protoreflect.ValueOfMessage(dynamicpb.NewMessage(plain)))
		},
		"bool map": func(m *dynamicpb.Message) {
			m.Mutable(fd("flags")).Map().Set(protoreflect.ValueOfBool(true).MapKey(), protoreflect.ValueOfString("y"))
		},
		"oneof number": func(m *dynamicpb.Message) { m.Set(fd("number"), protoreflect.ValueOfInt32(0)) },
		"empty children": func(m *dynamicpb.Message) {
			m.Mutable(fd("children")).List().Append(protoreflect.ValueOfMessage(dynamicpb.NewMessage(plain)))
		},
	} {
		m := dynamicpb.NewMessage(plain)
		set(m)
		if !checkFastOut(t, m) {
			t.Errorf("%s: value gave up", name)
		}
	}
	bad := dynamicpb.NewMessage(plain)
	bad.Set(fd("s"), protoreflect.ValueOfString("\xff"))
	if _, ok := value(bad); ok {
		t.Errorf("value rendered invalid UTF-8, which protojson refuses")
	}
}

// FuzzFastPaths checks that the fast paths agree with protojson on any
// JSON object of arguments.
func FuzzFastPaths(f *testing.F) {
	for _, seed := range []string{
		`{}`, `{"i32": 5, "i64": 123, "s": "x", "child": {"children": [{}, {"b": true}]}}`,
		`{"counts": {"a": 1, "b": -2}, "tags": ["x"], "colors": ["RED", "GREEN"], "d": 1e-7, "f": 3.4e38}`,
		`{"name": "n", "by_id": {"3": {"u64": 18446744073709551615}}}`, `{"i32": 2147483648}`, `{"maybe": 0, "number": 1}`,
	} {
		f.Add(seed)
	}
	var plain protoreflect.MessageDescriptor
	f.Fuzz(func(t *testing.T, data string) {
		if plain == nil {
			plain = testMessages(t)["Plain"]
		}
		var args map[string]any
		if json.Unmarshal([]byte(data), &args) != nil {
			return
		}
		checkFastIn(t, plain, args)
		m := dynamicpb.NewMessage(plain)
		b, _ := json.Marshal(args)
		if slowIn.Unmarshal(b, m) == nil {
			checkFastOut(t, m)
		}
	})
}
