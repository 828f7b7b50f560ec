package grpcsvc

import (
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"xferbench/servers/go/internal/errs"
	"xferbench/servers/go/internal/wirecheck"
)

// checkedCodec is grpc-go's proto codec with the wire integers checked
// before decoding (PROTOCOL.md "Integers"), as the frame codec does.
type checkedCodec struct{ encoding.CodecV2 }

// Replacing the "proto" codec is grpc-go's documented way to change how
// every message of the process is decoded; it must happen in init.
func init() {
	encoding.RegisterCodecV2(checkedCodec{encoding.GetCodecV2(grpcproto.Name)})
}

func (c checkedCodec) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(proto.Message)
	if !ok {
		return c.CodecV2.Unmarshal(data, v)
	}
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	if err := wirecheck.Check(buf.ReadOnlyData(), m.ProtoReflect().Descriptor()); err != nil {
		return err
	}
	return proto.Unmarshal(buf.ReadOnlyData(), m)
}

// checkedStream turns the integer check's failure back into
// INVALID_ARGUMENT: grpc-go reports any codec error as INTERNAL, keeping
// only its text.
type checkedStream struct{ grpc.ServerStream }

func (s checkedStream) RecvMsg(m any) error {
	err := s.ServerStream.RecvMsg(m)
	if st, ok := status.FromError(err); ok && st.Code() == codes.Internal &&
		strings.HasSuffix(st.Message(), wirecheck.ErrOverflow.Error()) {
		name := "request"
		if pm, ok := m.(proto.Message); ok {
			name = string(pm.ProtoReflect().Descriptor().Name())
		}
		return errs.New(errs.InvalidArgument, "malformed %s body", name)
	}
	return err
}
