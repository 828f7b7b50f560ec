package main

import (
	"hash/crc32"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"xferbench/servers/go/internal/chunkwire"
)

// The chunks are the bulk of every transfer, and a generic client spends
// more CPU on them than the server does (ghz, with dynamic messages, shows
// 21% of its samples in memmove and 13% in the GC at 800 MB/s): a driver
// that is the bottleneck measures itself. So a chunk is sent from bytes
// encoded once (encoded) and received by checksumming grpc-go's buffers in
// place (chunkSink), never copied into a message.

// encoded is a message already in its wire form, sent as it is.
type encoded []byte

// chunkSink receives one DownloadResponse: a chunk is folded into the
// running CRC-32 and counted where it lies; any other message is decoded
// into msg.
type chunkSink struct {
	crc   uint32
	bytes uint64
	chunk bool // the last message received was a chunk
	msg   proto.Message
}

// take folds chunk bytes into the running CRC-32 and count.
func (s *chunkSink) take(pieces ...[]byte) {
	for _, p := range pieces {
		s.crc = crc32.Update(s.crc, crc32.IEEETable, p)
		s.bytes += uint64(len(p))
	}
}

// codec is the proto codec with the two shortcuts above; any other
// message goes through proto as usual.
type codec struct{ encoding.CodecV2 }

func (c codec) Name() string { return "proto" }

func (c codec) Marshal(v any) (mem.BufferSlice, error) {
	if e, ok := v.(encoded); ok {
		return mem.BufferSlice{mem.SliceBuffer(e)}, nil
	}
	return c.CodecV2.Marshal(v)
}

func (c codec) Unmarshal(data mem.BufferSlice, v any) error {
	s, ok := v.(*chunkSink)
	if !ok {
		return c.CodecV2.Unmarshal(data, v)
	}
	if pieces, ok := chunkwire.Pieces(data); ok {
		s.take(pieces...)
		s.chunk = true
		return nil
	}
	s.chunk = false
	return c.CodecV2.Unmarshal(data, s.msg)
}
