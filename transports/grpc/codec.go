package grpc

import (
	"fmt"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
)

// codec is grpc-go's proto codec without the required-fields check on
// both sides: requests were checked when they were read from the
// arguments, and a check of a dynamic message walks it reflectively on
// every call.
type codec struct{}

var (
	marshalPartial   = proto.MarshalOptions{AllowPartial: true, UseCachedSize: true}
	unmarshalPartial = proto.UnmarshalOptions{AllowPartial: true}
)

// Name is the codec's name, the standard one: the content type stays
// application/grpc.
func (codec) Name() string { return "proto" }

// Marshal encodes a proto.Message.
func (codec) Marshal(v any) (mem.BufferSlice, error) {
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("grpc: cannot marshal a %T", v)
	}
	size := proto.Size(m) // fills the cached sizes UseCachedSize relies on
	if mem.IsBelowBufferPoolingThreshold(size) {
		b, err := marshalPartial.MarshalAppend(make([]byte, 0, size), m)
		if err != nil {
			return nil, err
		}
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	pool := mem.DefaultBufferPool()
	buf := pool.Get(size)
	b, err := marshalPartial.MarshalAppend((*buf)[:0], m)
	if err != nil {
		pool.Put(buf)
		return nil, err
	}
	*buf = b
	return mem.BufferSlice{mem.NewBuffer(buf, pool)}, nil
}

// Unmarshal decodes into a proto.Message.
func (codec) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(proto.Message)
	if !ok {
		return fmt.Errorf("grpc: cannot unmarshal into a %T", v)
	}
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	return unmarshalPartial.Unmarshal(buf.ReadOnlyData(), m)
}
