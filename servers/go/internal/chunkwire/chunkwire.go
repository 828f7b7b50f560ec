// Package chunkwire finds a chunk message's bytes in the buffers grpc-go
// received it in, so that server and client can store or checksum them
// where they lie instead of decoding (and so copying) the message.
package chunkwire

import (
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
)

// Field is the field number of `bytes chunk` in UploadRequest and
// DownloadResponse (proto/xfer/v1/file_transfer.proto).
const Field = 2

// Pieces returns the chunk's bytes as slices of data's buffers when the
// message is exactly one chunk field, the form every chunk message has, and
// its tag and length lie in the first buffer, as grpc-go delivers them.
// Anything else (other fields, repeats, unknown fields, bad lengths, a
// length split across buffers) is left to the full decoder.
func Pieces(data mem.BufferSlice) ([][]byte, bool) {
	if len(data) == 0 {
		return nil, false
	}
	first := data[0].ReadOnlyData()
	num, typ, n := protowire.ConsumeTag(first)
	if n < 0 || num != Field || typ != protowire.BytesType {
		return nil, false
	}
	size, m := protowire.ConsumeVarint(first[n:])
	if m < 0 || size != uint64(data.Len()-n-m) {
		return nil, false
	}
	pieces := make([][]byte, 0, len(data))
	pieces = append(pieces, first[n+m:])
	for _, b := range data[1:] {
		pieces = append(pieces, b.ReadOnlyData())
	}
	return pieces, true
}
