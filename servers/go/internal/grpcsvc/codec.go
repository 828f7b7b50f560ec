package grpcsvc

import (
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"xferbench/servers/go/internal/errs"
	"xferbench/servers/go/internal/wirecheck"
)

// rawMsg is a received message not yet decoded: checkedStream asks the
// codec for the bytes and decodes them itself. data holds its own reference
// to grpc-go's buffers; the receiver frees it.
type rawMsg struct{ data mem.BufferSlice }

// materialize returns the message in one buffer (from pool if it spans
// several) and drops the raw reference; free the result.
func (r *rawMsg) materialize(pool mem.BufferPool) mem.Buffer {
	buf := r.data.MaterializeToBuffer(pool)
	r.data.Free()
	return buf
}

// checkedCodec is grpc-go's proto codec with the wire integers checked
// before decoding (PROTOCOL.md "Integers"), as the frame codec does, and
// able to hand a message over undecoded (rawMsg).
type checkedCodec struct{ encoding.CodecV2 }

// Replacing the "proto" codec is grpc-go's documented way to change how
// every message of the process is decoded; it must happen in init.
func init() {
	encoding.RegisterCodecV2(checkedCodec{encoding.GetCodecV2(grpcproto.Name)})
}

// Marshal passes an encodedMsg's buffer through; anything else is proto.
func (c checkedCodec) Marshal(v any) (mem.BufferSlice, error) {
	if e, ok := v.(*encodedMsg); ok {
		return mem.BufferSlice{e.data}, nil
	}
	return c.CodecV2.Marshal(v)
}

func (c checkedCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if r, ok := v.(*rawMsg); ok {
		data.Ref() // grpc-go frees its reference when Unmarshal returns
		r.data = data
		return nil
	}
	m, ok := v.(proto.Message)
	if !ok {
		return c.CodecV2.Unmarshal(data, v)
	}
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	return wirecheck.Unmarshal(buf.ReadOnlyData(), m)
}

// checkedStream decodes each received message itself so that a message
// the integer check refuses is the call's INVALID_ARGUMENT: a codec error
// inside grpc-go's RecvMsg would end the stream as INTERNAL at once.
type checkedStream struct{ grpc.ServerStream }

func (s checkedStream) RecvMsg(m any) error {
	pm, ok := m.(proto.Message)
	if !ok {
		return s.ServerStream.RecvMsg(m)
	}
	var raw rawMsg
	if err := s.ServerStream.RecvMsg(&raw); err != nil {
		return err
	}
	buf := raw.materialize(mem.DefaultBufferPool())
	defer buf.Free()
	if err := wirecheck.Unmarshal(buf.ReadOnlyData(), pm); err != nil {
		return errs.New(errs.InvalidArgument, "malformed %s body", string(pm.ProtoReflect().Descriptor().Name()))
	}
	return nil
}
