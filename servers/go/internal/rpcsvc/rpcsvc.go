// Package rpcsvc is the net/rpc service "Xfer" served over the frame
// protocol: each method takes and returns the xferv1 messages.
package rpcsvc

import (
	"fmt"
	"net/rpc"
	"sync/atomic"

	"xferbench/servers/go/gen/xferv1"
	"xferbench/servers/go/internal/bufpool"
	"xferbench/servers/go/internal/limits"
	"xferbench/servers/go/internal/meta"
	"xferbench/servers/go/internal/store"
)

// Bytes counts payload moved, by direction.
type Bytes interface {
	Upload(n int)
	Download(n int)
}

// Xfer holds the service's methods; register it as frame.Service. Only
// the eight protocol methods are exported, as net/rpc expects.
type Xfer struct {
	store  *store.Store
	lim    limits.Limits
	pool   *bufpool.Pool
	leases *bufpool.Leases
	bytes  Bytes

	owner  uint64         // the connection this copy serves; 0 in the template
	owners *atomic.Uint64 // the last owner id handed out, shared by all copies
}

// New makes the service and the hook the codec calls after writing a
// reply (it returns pooled Read buffers).
func New(st *store.Store, lim limits.Limits, pool *bufpool.Pool, bytes Bytes) (*Xfer, func(reply any)) {
	x := &Xfer{store: st, lim: lim, pool: pool, leases: bufpool.NewLeases(pool), bytes: bytes, owners: new(atomic.Uint64)}
	return x, x.leases.Release
}

// PerConn returns what frame.NewConnServer calls for each connection: an
// rpc.Server whose service knows its connection (net/rpc methods are not
// told which connection called them), and the hook to run once the
// connection is done, which aborts the uploads it left open
// (PROTOCOL.md: an upload belongs to its connection).
func PerConn(x *Xfer, service string) func() (*rpc.Server, func(), error) {
	return func() (*rpc.Server, func(), error) {
		c := *x
		c.owner = x.owners.Add(1)
		rs := rpc.NewServer()
		if err := rs.RegisterName(service, &c); err != nil {
			return nil, nil, fmt.Errorf("registering the frame service: %w", err)
		}
		return rs, func() { x.store.AbortOwner(c.owner) }, nil
	}
}

// UploadBegin opens an upload.
func (x *Xfer) UploadBegin(req *xferv1.UploadBeginRequest, resp *xferv1.UploadBeginResponse) error {
	id, err := x.store.BeginOwned(x.owner, req.Name, req.Size, req.ChunkSize)
	if err != nil {
		return err
	}
	resp.UploadId = id
	return nil
}

// UploadChunk stores one chunk; req.Data aliases the request frame, which
// the store copies.
func (x *Xfer) UploadChunk(req *xferv1.UploadChunkRequest, resp *xferv1.UploadChunkResponse) error {
	got, err := x.store.Chunk(req.UploadId, req.Offset, req.Data)
	if err != nil {
		return err
	}
	x.bytes.Upload(len(req.Data))
	resp.Received = got
	return nil
}

// UploadCommit makes the file visible if complete and its CRC matches.
func (x *Xfer) UploadCommit(req *xferv1.UploadCommitRequest, resp *xferv1.UploadCommitResponse) error {
	info, err := x.store.Commit(req.UploadId, req.Crc32)
	if err != nil {
		return err
	}
	resp.Size, resp.Crc32 = info.Size, info.CRC
	return nil
}

// UploadAbort discards an upload.
func (x *Xfer) UploadAbort(req *xferv1.UploadAbortRequest, _ *xferv1.UploadAbortResponse) error {
	return x.store.Abort(req.UploadId)
}

// Read returns one chunk of a file: in place from the memory store, else
// in a pooled buffer held until the codec has encoded the reply.
func (x *Xfer) Read(req *xferv1.ReadRequest, resp *xferv1.ReadResponse) error {
	if err := x.lim.CheckReadLength(req.Length); err != nil {
		return err
	}
	h, err := x.store.Open(req.Name)
	if err != nil {
		return err
	}
	defer h.Close()
	if err := h.CheckOffset(req.Offset); err != nil {
		return err
	}
	// The memory store's bytes as they are (the codec writes them out from there); otherwise a pooled buffer
	// held until the reply is encoded.
	data, inPlace := h.View(req.Offset, int(req.Length))
	if !inPlace {
		buf := x.pool.Get(int(min(uint64(req.Length), h.Size-req.Offset)))
		n, err := h.ReadAt(*buf, req.Offset)
		if err != nil {
			x.pool.Put(buf)
			return err
		}
		data = (*buf)[:n]
		x.leases.Hold(resp, buf)
	}
	resp.Data, resp.Size, resp.Crc32 = data, h.Size, h.CRC
	x.bytes.Download(len(data))
	return nil
}

// Echo returns the payload (aliasing the request frame until written).
func (x *Xfer) Echo(req *xferv1.EchoRequest, resp *xferv1.EchoResponse) error {
	if err := x.lim.CheckPayload(len(req.Payload)); err != nil {
		return err
	}
	resp.Payload = req.Payload
	return nil
}

// Stat describes a file.
func (x *Xfer) Stat(req *xferv1.StatRequest, resp *xferv1.StatResponse) error {
	info, err := x.store.Stat(req.Name)
	if err != nil {
		return err
	}
	resp.Name, resp.Size, resp.Crc32 = req.Name, info.Size, info.CRC
	return nil
}

// Meta answers the entries sorted by key with their digest.
func (x *Xfer) Meta(req *xferv1.MetaRequest, resp *xferv1.MetaResponse) error {
	out, err := meta.Answer(req, x.lim.MaxMetaEntries)
	if err != nil {
		return err
	}
	resp.Entries, resp.Digest = out.Entries, out.Digest
	return nil
}
