// Package grpcsvc is the gRPC FileTransfer service over the shared store.
package grpcsvc

import (
	"context"
	"errors"
	"io"

	"google.golang.org/grpc/status"

	"xferbench/servers/go/gen/xferv1"
	"xferbench/servers/go/internal/bufpool"
	"xferbench/servers/go/internal/errs"
	"xferbench/servers/go/internal/limits"
	"xferbench/servers/go/internal/meta"
	"xferbench/servers/go/internal/store"
)

// Bytes counts payload moved, by direction.
type Bytes interface {
	Upload(n int)
	Download(n int)
}

// Service implements xferv1.FileTransferServer.
type Service struct {
	xferv1.UnimplementedFileTransferServer
	store *store.Store
	lim   limits.Limits
	pool  *bufpool.Pool
	bytes Bytes
}

// New makes the service.
func New(st *store.Store, lim limits.Limits, pool *bufpool.Pool, bytes Bytes) *Service {
	return &Service{store: st, lim: lim, pool: pool, bytes: bytes}
}

// ctxErr turns a finished context into the matching gRPC status.
func ctxErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return status.FromContextError(err).Err()
	}
	return nil
}

// recvErr maps a Recv failure: a client cancel or deadline keeps its
// status; anything else is passed on as grpc-go reported it.
func recvErr(err error) error {
	if _, ok := status.FromError(err); ok {
		return err
	}
	return status.FromContextError(err).Err()
}

// Upload receives header, chunks and trailer, and commits after the client
// half-closes. Any failure, including a stream that ends or is cancelled
// before its trailer, aborts the upload so nothing is left behind.
func (s *Service) Upload(stream xferv1.FileTransfer_UploadServer) error {
	first, err := stream.Recv()
	if errors.Is(err, io.EOF) {
		return errs.New(errs.InvalidArgument, "stream ended before the UploadHeader")
	}
	if err != nil {
		return recvErr(err)
	}
	hdr := first.GetHeader()
	if hdr == nil {
		return errs.New(errs.InvalidArgument, "first message must be an UploadHeader")
	}
	id, err := s.store.BeginOwned(connOwner(stream.Context()), hdr.Name, hdr.Size, hdr.ChunkSize)
	if err != nil {
		return err
	}
	trailer, err := s.receiveChunks(stream, id)
	if err != nil {
		_ = s.store.Abort(id) // not_found here only means it is already gone
		return err
	}
	info, err := s.store.Commit(id, trailer.Crc32)
	if err != nil {
		return err
	}
	return stream.SendAndClose(&xferv1.UploadResponse{Size: info.Size, Crc32: info.CRC})
}

// receiveChunks stores chunks in order until the client half-closes and
// returns the trailer, which must come last.
func (s *Service) receiveChunks(stream xferv1.FileTransfer_UploadServer, id uint64) (*xferv1.UploadTrailer, error) {
	var off uint64
	var trailer *xferv1.UploadTrailer
	for {
		if err := ctxErr(stream.Context()); err != nil {
			return nil, err
		}
		rcv, err := recvUpload(stream, s.pool)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, recvErr(err)
		}
		err = s.take(rcv, id, &off, &trailer)
		if rcv.raw != nil {
			rcv.raw.Free() // the chunk is in the store now
		}
		if err != nil {
			return nil, err
		}
	}
	if trailer == nil {
		return nil, errs.New(errs.InvalidArgument, "stream ended before the UploadTrailer")
	}
	return trailer, nil
}

// take handles one message after the header: a chunk is stored at *off,
// a trailer kept in *trailer.
func (s *Service) take(rcv received, id uint64, off *uint64, trailer **xferv1.UploadTrailer) error {
	if *trailer != nil {
		return errs.New(errs.InvalidArgument, "message after the UploadTrailer")
	}
	pieces := rcv.pieces
	if rcv.msg != nil {
		switch m := rcv.msg.Msg.(type) {
		case *xferv1.UploadRequest_Chunk:
			pieces = [][]byte{m.Chunk}
		case *xferv1.UploadRequest_Trailer:
			if m.Trailer == nil {
				return errs.New(errs.InvalidArgument, "empty UploadTrailer")
			}
			*trailer = m.Trailer
			return nil
		case *xferv1.UploadRequest_Header:
			return errs.New(errs.InvalidArgument, "UploadHeader after the first message")
		default:
			return errs.New(errs.InvalidArgument, "UploadRequest with no message set")
		}
	}
	n := 0
	for _, p := range pieces {
		n += len(p)
	}
	if _, err := s.store.Chunk(id, *off, pieces...); err != nil {
		return err
	}
	s.bytes.Upload(n)
	*off += uint64(n)
	return nil
}

// Download streams header, chunks (each read into the buffer it is sent from), trailer.
func (s *Service) Download(req *xferv1.DownloadRequest, stream xferv1.FileTransfer_DownloadServer) error {
	cs := req.ChunkSize
	if cs == 0 {
		cs = min(limits.DefaultDownloadChunk, s.lim.MaxChunk)
	}
	if err := s.lim.CheckChunkSize(cs); err != nil {
		return err
	}
	h, err := s.store.Open(req.Name)
	if err != nil {
		return err
	}
	defer h.Close()
	hdr := &xferv1.DownloadHeader{Name: req.Name, Size: h.Size, ChunkSize: cs}
	if err := stream.Send(&xferv1.DownloadResponse{Msg: &xferv1.DownloadResponse_Header{Header: hdr}}); err != nil {
		return err
	}
	if err := s.sendChunks(stream, h, int(cs)); err != nil {
		return err
	}
	trailer := &xferv1.DownloadTrailer{Crc32: h.CRC}
	return stream.Send(&xferv1.DownloadResponse{Msg: &xferv1.DownloadResponse_Trailer{Trailer: trailer}})
}

// sendChunks reads each chunk straight into the buffer it is sent from
// (encodeChunk), one buffer from the pool per chunk: grpc-go writes a sent
// message after Send returns, and puts the buffer back once written.
func (s *Service) sendChunks(stream xferv1.FileTransfer_DownloadServer, h *store.Handle, cs int) error {
	for off := uint64(0); off < h.Size; {
		if err := ctxErr(stream.Context()); err != nil {
			return err
		}
		n := int(min(uint64(cs), h.Size-off))
		msg, err := encodeChunk(s.pool, n, func(p []byte) error {
			_, err := h.ReadAt(p, off)
			return err
		})
		if err != nil {
			return err
		}
		if err := stream.SendMsg(msg); err != nil {
			return err
		}
		s.bytes.Download(n)
		off += uint64(n)
	}
	return nil
}

// Echo returns the payload.
func (s *Service) Echo(_ context.Context, req *xferv1.EchoRequest) (*xferv1.EchoResponse, error) {
	if err := s.lim.CheckPayload(len(req.Payload)); err != nil {
		return nil, err
	}
	return &xferv1.EchoResponse{Payload: req.Payload}, nil
}

// Stat describes a file.
func (s *Service) Stat(_ context.Context, req *xferv1.StatRequest) (*xferv1.StatResponse, error) {
	info, err := s.store.Stat(req.Name)
	if err != nil {
		return nil, err
	}
	return &xferv1.StatResponse{Name: req.Name, Size: info.Size, Crc32: info.CRC}, nil
}

// Meta answers the entries sorted by key with their digest.
func (s *Service) Meta(_ context.Context, req *xferv1.MetaRequest) (*xferv1.MetaResponse, error) {
	return meta.Answer(req, s.lim.MaxMetaEntries)
}
