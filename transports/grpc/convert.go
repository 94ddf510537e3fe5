package grpc

import (
	"encoding/base64"
	"encoding/json"
	"math"
	"strconv"
	"unicode/utf8"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// This file holds the fast paths between Go values and messages. They
// handle the common, canonical case without going through JSON text, and
// give up (ok false) on anything else, which then takes the protojson
// path: the result is the same either way, only cheaper.

// fastMessage reports whether every message reachable from md can be read
// and written by the fast paths: no well-known types (protojson gives
// them special JSON forms), no proto2 required fields, no groups, no
// google.protobuf.NullValue.
func fastMessage(md protoreflect.MessageDescriptor) bool {
	return fastMessageSeen(md, map[protoreflect.FullName]bool{})
}

func fastMessageSeen(md protoreflect.MessageDescriptor, seen map[protoreflect.FullName]bool) bool {
	if seen[md.FullName()] {
		return true
	}
	seen[md.FullName()] = true
	if md.ParentFile().Package() == "google.protobuf" {
		return false
	}
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if fd.Cardinality() == protoreflect.Required || fd.Kind() == protoreflect.GroupKind {
			return false
		}
		if fd.IsMap() {
			fd = fd.MapValue()
		}
		if fd.Kind() == protoreflect.MessageKind && !fastMessageSeen(fd.Message(), seen) {
			return false
		}
		if fd.Kind() == protoreflect.EnumKind && fd.Enum().FullName() == "google.protobuf.NullValue" {
			return false // protojson writes it as null
		}
	}
	return true
}

// fill sets the fields of m from args, which must be in canonical form:
// proto field names, values of the field's JSON type. It reports false,
// leaving m partly set, at the first thing it does not handle.
func fill(m protoreflect.Message, args map[string]any) bool {
	md := m.Descriptor()
	fields := md.Fields()
	for k, v := range args {
		fd := fields.ByName(protoreflect.Name(k))
		if fd == nil || v == nil {
			return false
		}
		if od := fd.ContainingOneof(); od != nil && m.WhichOneof(od) != nil {
			return false
		}
		switch {
		case fd.IsMap():
			in, ok := v.(map[string]any)
			if !ok || fd.MapKey().Kind() != protoreflect.StringKind {
				return false
			}
			mp := m.Mutable(fd).Map()
			for key, e := range in {
				if !utf8.ValidString(key) {
					return false
				}
				val, ok := single(mp, fd.MapValue(), e)
				if !ok {
					return false
				}
				mp.Set(protoreflect.ValueOfString(key).MapKey(), val)
			}
		case fd.IsList():
			in, ok := v.([]any)
			if !ok {
				return false
			}
			list := m.Mutable(fd).List()
			for _, e := range in {
				val, ok := single(list, fd, e)
				if !ok {
					return false
				}
				list.Append(val)
			}
		default:
			val, ok := single(m, fd, v)
			if !ok {
				return false
			}
			m.Set(fd, val)
		}
	}
	return true
}

// single converts one value of field fd. parent makes message values.
func single(parent any, fd protoreflect.FieldDescriptor, v any) (protoreflect.Value, bool) {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		b, ok := v.(bool)
		return protoreflect.ValueOfBool(b), ok
	case protoreflect.StringKind:
		s, ok := v.(string)
		return protoreflect.ValueOfString(s), ok && utf8.ValidString(s)
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		n, ok := integer(v, math.MinInt32, math.MaxInt32)
		return protoreflect.ValueOfInt32(int32(n)), ok
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		n, ok := integer(v, -1<<53, 1<<53)
		return protoreflect.ValueOfInt64(n), ok
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		n, ok := integer(v, 0, math.MaxUint32)
		return protoreflect.ValueOfUint32(uint32(n)), ok
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		n, ok := integer(v, 0, 1<<53)
		return protoreflect.ValueOfUint64(uint64(n)), ok
	case protoreflect.DoubleKind:
		f, ok := number(v)
		return protoreflect.ValueOfFloat64(f), ok
	case protoreflect.FloatKind:
		f, ok := number(v)
		return protoreflect.ValueOfFloat32(float32(f)), ok && math.Abs(f) <= math.MaxFloat32
	case protoreflect.EnumKind:
		s, ok := v.(string)
		if !ok {
			return protoreflect.Value{}, false
		}
		ev := fd.Enum().Values().ByName(protoreflect.Name(s))
		if ev == nil {
			return protoreflect.Value{}, false
		}
		return protoreflect.ValueOfEnum(ev.Number()), true
	case protoreflect.MessageKind:
		in, ok := v.(map[string]any)
		if !ok {
			return protoreflect.Value{}, false
		}
		var val protoreflect.Value
		switch p := parent.(type) {
		case protoreflect.Message:
			val = p.NewField(fd)
		case protoreflect.List:
			val = p.NewElement()
		case protoreflect.Map:
			val = p.NewValue()
		default:
			return protoreflect.Value{}, false
		}
		return val, fill(val.Message(), in)
	}
	return protoreflect.Value{}, false
}

// integer reads an integral number within [lo, hi].
func integer(v any, lo, hi int64) (int64, bool) {
	switch n := v.(type) {
	case float64:
		if n != math.Trunc(n) || n < float64(lo) || n > float64(hi) {
			return 0, false
		}
		return int64(n), true
	case int:
		return int64(n), int64(n) >= lo && int64(n) <= hi
	case int64:
		return n, n >= lo && n <= hi
	case json.Number:
		i, err := strconv.ParseInt(string(n), 10, 64)
		return i, err == nil && i >= lo && i <= hi
	}
	return 0, false
}

// number reads a finite number.
func number(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, !math.IsInf(n, 0) && !math.IsNaN(n)
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil && !math.IsInf(f, 0)
	}
	return 0, false
}

// value renders a message as protojson does with UseProtoNames and
// EmitDefaultValues, as the values jsonx.DecodeValue would give for that
// JSON (numbers as json.Number). It reports false for a message it does
// not handle (extension fields set).
func value(m protoreflect.Message) (map[string]any, bool) {
	md := m.Descriptor()
	fields := md.Fields()
	out := make(map[string]any, fields.Len())
	ok := true
	m.Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
		ok = !fd.IsExtension()
		return ok
	})
	if !ok {
		return nil, false
	}
	for i := range fields.Len() {
		fd := fields.Get(i)
		if !m.Has(fd) && fd.HasPresence() {
			continue
		}
		v := m.Get(fd)
		switch {
		case fd.IsMap():
			mp := v.Map()
			obj := make(map[string]any, mp.Len())
			vd := fd.MapValue()
			mp.Range(func(k protoreflect.MapKey, e protoreflect.Value) bool {
				var r any
				r, ok = scalarOut(vd, e)
				obj[k.String()] = r
				return ok
			})
			if !ok {
				return nil, false
			}
			out[string(fd.Name())] = obj
		case fd.IsList():
			list := v.List()
			arr := make([]any, list.Len())
			for j := range list.Len() {
				if arr[j], ok = scalarOut(fd, list.Get(j)); !ok {
					return nil, false
				}
			}
			out[string(fd.Name())] = arr
		default:
			if out[string(fd.Name())], ok = scalarOut(fd, v); !ok {
				return nil, false
			}
		}
	}
	return out, true
}

// scalarOut renders one value of field fd.
func scalarOut(fd protoreflect.FieldDescriptor, v protoreflect.Value) (any, bool) {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return v.Bool(), true
	case protoreflect.StringKind:
		return v.String(), utf8.ValidString(v.String())
	case protoreflect.BytesKind:
		return base64.StdEncoding.EncodeToString(v.Bytes()), true
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return json.Number(strconv.FormatInt(v.Int(), 10)), true
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return json.Number(strconv.FormatUint(v.Uint(), 10)), true
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return strconv.FormatInt(v.Int(), 10), true
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return strconv.FormatUint(v.Uint(), 10), true
	case protoreflect.DoubleKind:
		return floatOut(v.Float(), 64), true
	case protoreflect.FloatKind:
		return floatOut(v.Float(), 32), true
	case protoreflect.EnumKind:
		if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
			return string(ev.Name()), true
		}
		return json.Number(strconv.FormatInt(int64(v.Enum()), 10)), true
	case protoreflect.MessageKind:
		return value(v.Message())
	}
	return nil, false
}

// floatOut renders a float as protojson does: NaN and the infinities as
// strings, other values in the shortest form, with an exponent only for
// very small or large magnitudes (the ES6 rule encoding/json uses too).
func floatOut(f float64, bits int) any {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 {
		if bits == 64 && (abs < 1e-6 || abs >= 1e21) || bits == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21) {
			format = 'e'
		}
	}
	b := strconv.AppendFloat(make([]byte, 0, 24), f, format, -1, bits)
	if format == 'e' {
		// Clean up e-09 to e-9.
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return json.Number(b)
}
