package grpcsvc

import (
	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"

	"xferbench/servers/go/gen/xferv1"
	"xferbench/servers/go/internal/chunkwire"
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

// encodedMsg is a message already in its wire form; checkedCodec.Marshal
// hands its buffer to grpc-go as is (grpc-go frees it once written).
type encodedMsg struct{ data mem.Buffer }

// received is one UploadRequest off the stream: decoded (msg), or a chunk
// left where grpc-go received it, as the pieces of raw's buffers that hold
// its bytes. The store copies the pieces in order; joining them first, as
// decoding must, would copy every byte once more.
type received struct {
	msg    *xferv1.UploadRequest
	pieces [][]byte
	raw    mem.BufferSlice // nil unless pieces is set: free it once they are stored
}

// recvUpload receives one UploadRequest. A chunk message comes back as
// pieces; anything else is decoded with the integer checks.
func recvUpload(stream grpc.ServerStream, pool mem.BufferPool) (received, error) {
	var raw rawMsg
	if err := stream.RecvMsg(&raw); err != nil {
		return received{}, err
	}
	if pieces, ok := chunkwire.Pieces(raw.data); ok {
		return received{pieces: pieces, raw: raw.data}, nil
	}
	whole := raw.materialize(pool)
	defer whole.Free()
	msg := &xferv1.UploadRequest{}
	if err := wirecheck.Unmarshal(whole.ReadOnlyData(), msg); err != nil {
		return received{}, errs.New(errs.InvalidArgument, "malformed UploadRequest body")
	}
	return received{msg: msg}, nil
}

// encodeChunk returns the DownloadResponse holding the n-byte chunk that
// fill writes, encoded straight into one buffer from pool: the chunk is
// read where it will be sent from. grpc-go returns the buffer to the pool
// once the message is written.
func encodeChunk(pool mem.BufferPool, n int, fill func([]byte) error) (*encodedMsg, error) {
	tag := protowire.AppendTag(nil, chunkwire.Field, protowire.BytesType)
	head := protowire.AppendVarint(tag, uint64(n))
	bp := pool.Get(len(head) + n)
	copy(*bp, head)
	if err := fill((*bp)[len(head):]); err != nil {
		pool.Put(bp)
		return nil, err
	}
	return &encodedMsg{data: mem.NewBuffer(bp, pool)}, nil
}
