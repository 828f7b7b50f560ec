package frame

import (
	"errors"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"

	"xferbench/servers/go/gen/xferv1"
	"xferbench/servers/go/internal/errs"
)

// Service is the net/rpc service name; methods are "Xfer.<Name>".
const Service = "Xfer"

// methodNames are PROTOCOL.md's methods. Known names are interned so a
// request header decodes without allocating its method string.
var methodNames = []string{
	"Xfer.UploadBegin", "Xfer.UploadChunk", "Xfer.UploadCommit", "Xfer.UploadAbort",
	"Xfer.Read", "Xfer.Echo", "Xfer.Stat", "Xfer.Meta",
}

var interned = func() map[string]string {
	m := make(map[string]string, len(methodNames))
	for _, n := range methodNames {
		m[n] = n
	}
	return m
}()

// MethodLabel is the metrics label of a method: the bare name, or
// "unknown" for a name the protocol does not define.
func MethodLabel(method string) string {
	if _, ok := interned[method]; ok {
		return method[len(Service)+1:]
	}
	return "unknown"
}

var errMalformed = errors.New("malformed protobuf")

// walk calls field for each field of a protobuf message. field consumes the
// value (returning its length, or < 0 for "not mine: skip it as unknown").
// Like proto.Unmarshal, a known field with an unexpected wire type is
// treated as unknown.
func walk(b []byte, field func(num protowire.Number, typ protowire.Type, b []byte) int) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || num > protowire.MaxValidNumber {
			return errMalformed
		}
		b = b[n:]
		n = field(num, typ, b)
		if n == skipField {
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return errMalformed
		}
		b = b[n:]
	}
	return nil
}

// skipField is what a walk callback returns for a field it does not take.
const skipField = -1 << 30

// takeVarint and takeBytes decode one field value into dst, returning its
// length or skipField when the wire type is not the expected one.
func takeVarint(typ protowire.Type, b []byte, dst *uint64) int {
	if typ != protowire.VarintType {
		return skipField
	}
	v, n := protowire.ConsumeVarint(b)
	if n >= 0 {
		*dst = v
	}
	return n
}

func takeBytes(typ protowire.Type, b []byte, dst *[]byte) int {
	if typ != protowire.BytesType {
		return skipField
	}
	v, n := protowire.ConsumeBytes(b)
	if n >= 0 {
		*dst = v
	}
	return n
}

// The connection errors of a request header (PROTOCOL.md "Request headers").
var (
	ErrMalformedHeader = errs.New(errs.InvalidArgument, "malformed request header")
	ErrSeqZero         = errs.New(errs.InvalidArgument, "request seq 0 is reserved")
)

// DecodeRequestHeader decodes a RequestHeader by PROTOCOL.md's one
// definition of a valid header, stricter than proto.Unmarshal: method and
// seq must have their own wire types, groups are malformed, and seq 0 is
// reserved for connection errors. Its errors are connection errors;
// CheckMethod gives the call error of a valid header.
func DecodeRequestHeader(b []byte) (method string, seq uint64, err error) {
	var m []byte
	err = walk(b, func(num protowire.Number, typ protowire.Type, v []byte) int {
		switch {
		case typ == protowire.StartGroupType || typ == protowire.EndGroupType:
			return -1
		case num == fieldMethod && typ != protowire.BytesType, num == fieldSeq && typ != protowire.VarintType:
			return -1
		case num == fieldMethod:
			n := takeBytes(typ, v, &m)
			if n >= 0 && !utf8.Valid(m) {
				return -1 // every occurrence must be UTF-8, not only the last that wins
			}
			return n
		case num == fieldSeq:
			return takeVarint(typ, v, &seq)
		}
		return skipField
	})
	if err != nil {
		return "", 0, ErrMalformedHeader
	}
	if seq == 0 {
		return "", 0, ErrSeqZero
	}
	if s, ok := interned[string(m)]; ok {
		return s, seq, nil
	}
	return string(m), seq, nil
}

// CheckMethod is the call error of a method name in a valid header: names
// are compared byte for byte, so a NUL would only hide what follows it.
func CheckMethod(method string) *errs.Error {
	if strings.IndexByte(method, 0) >= 0 {
		return errs.New(errs.InvalidArgument, "method %q contains NUL", method)
	}
	return nil
}

// EchoMethod is the method a response header echoes: the request's, unless
// it is longer than errs.QuoteMax bytes (it is valid UTF-8 once decoded),
// which keeps every response header far inside the 1024-byte limit.
func EchoMethod(method string) string {
	if len(method) > errs.QuoteMax {
		return ""
	}
	return method
}

// DecodeResponseHeader decodes a ResponseHeader (used by tests and tools).
func DecodeResponseHeader(b []byte) (method string, seq uint64, errStr string, err error) {
	var m, e []byte
	err = walk(b, func(num protowire.Number, typ protowire.Type, v []byte) int {
		switch num {
		case fieldMethod:
			return takeBytes(typ, v, &m)
		case fieldSeq:
			return takeVarint(typ, v, &seq)
		case fieldError:
			return takeBytes(typ, v, &e)
		}
		return skipField
	})
	if err != nil || !utf8.Valid(m) || !utf8.Valid(e) {
		return "", 0, "", errMalformed
	}
	return string(m), seq, string(e), nil
}

// decodeUploadChunk decodes the hot-path body without copying data: data
// aliases b, which the codec keeps alive until the call's response is
// written.
func decodeUploadChunk(b []byte, m *xferv1.UploadChunkRequest) error {
	var data []byte
	err := walk(b, func(num protowire.Number, typ protowire.Type, v []byte) int {
		switch num {
		case 1:
			return takeVarint(typ, v, &m.UploadId)
		case 2:
			return takeVarint(typ, v, &m.Offset)
		case 3:
			return takeBytes(typ, v, &data)
		}
		return skipField
	})
	m.Data = data
	return err
}

// decodeEcho decodes an EchoRequest without copying its payload.
func decodeEcho(b []byte, m *xferv1.EchoRequest) error {
	var p []byte
	err := walk(b, func(num protowire.Number, typ protowire.Type, v []byte) int {
		if num == 1 {
			return takeBytes(typ, v, &p)
		}
		return skipField
	})
	m.Payload = p
	return err
}
