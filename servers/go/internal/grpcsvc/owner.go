package grpcsvc

import (
	"context"
	"hash/fnv"

	"google.golang.org/grpc/peer"
)

// grpcOwnerBit keeps gRPC owners apart from the frame transport's, which
// count up from 1.
const grpcOwnerBit = 1 << 63

// connOwner names the gRPC connection a stream came on, so its uploads
// count against --max-uploads-per-conn: the peer's address is unique per
// open TCP connection. 0 (no owner, no per-connection limit) if unknown.
func connOwner(ctx context.Context) uint64 {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return 0
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(p.Addr.String())) // hash.Hash never fails
	return h.Sum64() | grpcOwnerBit
}
