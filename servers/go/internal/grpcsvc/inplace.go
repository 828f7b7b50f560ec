package grpcsvc

import (
	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"

	"xferbench/servers/go/gen/xferv1"
	"xferbench/servers/go/internal/errs"
	"xferbench/servers/go/internal/wirecheck"
)

// The chunk messages are the bulk of every transfer, and the generic proto
// path copies each one more than it must: on receive proto.Unmarshal copies
// the chunk out of grpc-go's buffer into a fresh allocation (which the store
// then copies again); on send proto.Marshal copies the chunk, already read
// into a buffer, into another. The two functions below decode and encode
// the one field a chunk message holds in place. Every other message still
// goes through wirecheck and proto.

// chunkField is the field number of `bytes chunk` in UploadRequest and
// DownloadResponse (proto/xfer/v1/file_transfer.proto).
const chunkField = 2

// encodedMsg is a message already in its wire form; checkedCodec.Marshal
// hands its buffer to grpc-go as is (grpc-go frees it once written).
type encodedMsg struct{ data mem.Buffer }

// recvUpload receives one UploadRequest, joining a message that arrived in
// several buffers into one from pool. A chunk's bytes alias that buffer:
// the caller frees buf (non-nil only then) once it has stored them.
func recvUpload(stream grpc.ServerStream, pool mem.BufferPool) (msg *xferv1.UploadRequest, buf mem.Buffer, err error) {
	var raw rawMsg
	if err := stream.RecvMsg(&raw); err != nil {
		return nil, nil, err
	}
	whole := raw.materialize(pool)
	b := whole.ReadOnlyData()
	if chunk, ok := chunkOnly(b); ok {
		return &xferv1.UploadRequest{Msg: &xferv1.UploadRequest_Chunk{Chunk: chunk}}, whole, nil
	}
	defer whole.Free()
	msg = &xferv1.UploadRequest{}
	if err := wirecheck.Unmarshal(b, msg); err != nil {
		return nil, nil, errs.New(errs.InvalidArgument, "malformed UploadRequest body")
	}
	return msg, nil, nil
}

// chunkOnly returns the chunk when b is exactly one `chunk` field, the form
// every chunk message has; anything else (other fields, repeats, unknown
// fields, bad lengths) is left to the full decoder.
func chunkOnly(b []byte) ([]byte, bool) {
	num, typ, n := protowire.ConsumeTag(b)
	if n < 0 || num != chunkField || typ != protowire.BytesType {
		return nil, false
	}
	v, m := protowire.ConsumeBytes(b[n:])
	if m < 0 || n+m != len(b) {
		return nil, false
	}
	return v, true
}

// encodeChunk returns the DownloadResponse holding the n-byte chunk that
// fill writes, encoded straight into one buffer from pool: the chunk is
// read where it will be sent from. grpc-go returns the buffer to the pool
// once the message is written.
func encodeChunk(pool mem.BufferPool, n int, fill func([]byte) error) (*encodedMsg, error) {
	tag := protowire.AppendTag(nil, chunkField, protowire.BytesType)
	head := protowire.AppendVarint(tag, uint64(n))
	bp := pool.Get(len(head) + n)
	copy(*bp, head)
	if err := fill((*bp)[len(head):]); err != nil {
		pool.Put(bp)
		return nil, err
	}
	return &encodedMsg{data: mem.NewBuffer(bp, pool)}, nil
}
