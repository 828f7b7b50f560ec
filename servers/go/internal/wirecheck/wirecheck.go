// Package wirecheck holds the integers of an encoded protobuf message to the
// types their fields declare (PROTOCOL.md "Integers"). proto.Unmarshal, like
// every proto3 parser, keeps only the low 32 bits of a varint in a 32-bit
// field; the protocol makes such a message malformed instead, on both
// transports, so the wire value is checked before it is decoded.
package wirecheck

import (
	"errors"
	"math"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// ErrOverflow is a varint too large for its field's type.
var ErrOverflow = errors.New("wirecheck: integer out of range for its field")

// Unmarshal is proto.Unmarshal after Check.
func Unmarshal(b []byte, m proto.Message) error {
	if err := Check(b, m.ProtoReflect().Descriptor()); err != nil {
		return err
	}
	return proto.Unmarshal(b, m)
}

// Check walks b as a message of type md, into nested messages, and returns
// ErrOverflow for a varint its field's kind cannot hold. It leaves every
// other judgement (malformed bytes, UTF-8) to proto.Unmarshal.
func Check(b []byte, md protoreflect.MessageDescriptor) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		if fd := md.Fields().ByNumber(num); fd != nil {
			if err := checkField(fd, typ, b[:n]); err != nil {
				return err
			}
		}
		b = b[n:]
	}
	return nil
}

// checkField checks one field value v (already known to be well formed).
// A value of another wire type than the field's is left to proto.Unmarshal,
// which treats it as unknown.
func checkField(fd protoreflect.FieldDescriptor, typ protowire.Type, v []byte) error {
	switch {
	case typ == protowire.VarintType:
		x, _ := protowire.ConsumeVarint(v)
		if !fits(fd.Kind(), x) {
			return ErrOverflow
		}
	case typ == protowire.BytesType && fd.Kind() == protoreflect.MessageKind:
		m, _ := protowire.ConsumeBytes(v)
		return Check(m, fd.Message())
	}
	return nil
}

// fits says whether varint x is a value of kind k.
func fits(k protoreflect.Kind, x uint64) bool {
	switch k {
	case protoreflect.Uint32Kind:
		return x <= math.MaxUint32
	case protoreflect.Int32Kind, protoreflect.EnumKind: // negative values are sign-extended to 64 bits
		return int64(x) >= math.MinInt32 && int64(x) <= math.MaxInt32
	case protoreflect.Sint32Kind:
		z := protowire.DecodeZigZag(x)
		return z >= math.MinInt32 && z <= math.MaxInt32
	}
	return true
}
