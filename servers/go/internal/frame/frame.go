// Package frame implements the framed TCP protocol of PROTOCOL.md: a
// stateless parser, encoders, header and hot-path body decoders, and the
// net/rpc ServerCodec that serves it.
package frame

import (
	"encoding/binary"

	"google.golang.org/protobuf/encoding/protowire"

	"xferbench/servers/go/internal/errs"
	"xferbench/servers/go/internal/limits"
)

// Frame layout: frame_len (4) | header_len (4) | header | body.
const (
	lenSize   = 4 // frame_len and header_len are each 4 bytes
	prefixLen = 2 * lenSize
	// minFrameLen: frame_len counts at least the header_len field.
	minFrameLen = lenSize
)

// Header field numbers of RequestHeader and ResponseHeader (frame.proto).
const (
	fieldMethod = 1
	fieldSeq    = 2
	fieldError  = 3
)

// CheckFrameLen is the check made as soon as frame_len's 4 bytes arrive.
func CheckFrameLen(frameLen, maxFrame uint32) error {
	if frameLen > maxFrame {
		return errs.New(errs.ResourceExhausted, "frame length %d exceeds limit %d", frameLen, maxFrame)
	}
	if frameLen < minFrameLen {
		return errs.New(errs.InvalidArgument, "frame length %d is below the minimum %d", frameLen, minFrameLen)
	}
	return nil
}

// CheckHeaderLen is the check made once header_len arrives.
func CheckHeaderLen(frameLen, headerLen uint32) error {
	if headerLen > limits.MaxHeader {
		return errs.New(errs.InvalidArgument, "header length %d exceeds limit %d", headerLen, limits.MaxHeader)
	}
	if headerLen > frameLen-lenSize {
		return errs.New(errs.InvalidArgument, "header length %d exceeds frame length %d minus %d", headerLen, frameLen, lenSize)
	}
	return nil
}

// Parse looks at the bytes received so far: (0, nil) means need more,
// (n, nil) one whole frame of n bytes at the start of buf, or an error whose
// code the connection error carries.
func Parse(buf []byte, maxFrame uint32) (int, error) {
	if len(buf) < lenSize {
		return 0, nil
	}
	frameLen := binary.BigEndian.Uint32(buf)
	if err := CheckFrameLen(frameLen, maxFrame); err != nil {
		return 0, err
	}
	if len(buf) < prefixLen {
		return 0, nil
	}
	if err := CheckHeaderLen(frameLen, binary.BigEndian.Uint32(buf[lenSize:])); err != nil {
		return 0, err
	}
	total := lenSize + int(frameLen)
	if len(buf) < total {
		return 0, nil
	}
	return total, nil
}

// Split returns the header and body of one whole frame accepted by Parse.
func Split(frame []byte) (header, body []byte) {
	hl := binary.BigEndian.Uint32(frame[lenSize:])
	return frame[prefixLen : prefixLen+hl], frame[prefixLen+hl:]
}

// appendPrefix writes frame_len and header_len.
func appendPrefix(dst []byte, headerLen, bodyLen int) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(lenSize+headerLen+bodyLen))
	return binary.BigEndian.AppendUint32(dst, uint32(headerLen))
}

// headerSize is the canonical size of {method, seq, error}: proto3 omits
// empty strings and a zero seq.
func headerSize(method string, seq uint64, errStr string) int {
	n := 0
	if method != "" {
		n += protowire.SizeTag(fieldMethod) + protowire.SizeBytes(len(method))
	}
	if seq != 0 {
		n += protowire.SizeTag(fieldSeq) + protowire.SizeVarint(seq)
	}
	if errStr != "" {
		n += protowire.SizeTag(fieldError) + protowire.SizeBytes(len(errStr))
	}
	return n
}

// appendHeader encodes RequestHeader (errStr "") or ResponseHeader.
func appendHeader(dst []byte, method string, seq uint64, errStr string) []byte {
	if method != "" {
		dst = protowire.AppendTag(dst, fieldMethod, protowire.BytesType)
		dst = protowire.AppendString(dst, method)
	}
	if seq != 0 {
		dst = protowire.AppendTag(dst, fieldSeq, protowire.VarintType)
		dst = protowire.AppendVarint(dst, seq)
	}
	if errStr != "" {
		dst = protowire.AppendTag(dst, fieldError, protowire.BytesType)
		dst = protowire.AppendString(dst, errStr)
	}
	return dst
}

// AppendRequest appends a whole request frame.
func AppendRequest(dst []byte, seq uint64, method string, body []byte) []byte {
	dst = appendPrefix(dst, headerSize(method, seq, ""), len(body))
	dst = appendHeader(dst, method, seq, "")
	return append(dst, body...)
}

// AppendResponse appends a whole response frame.
func AppendResponse(dst []byte, seq uint64, method, errStr string, body []byte) []byte {
	dst = appendPrefix(dst, headerSize(method, seq, errStr), len(body))
	dst = appendHeader(dst, method, seq, errStr)
	return append(dst, body...)
}
