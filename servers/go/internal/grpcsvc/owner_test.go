package grpcsvc

import (
	"context"
	"net"
	"testing"

	"google.golang.org/grpc/peer"
)

func ctxFrom(addr string) context.Context {
	a, _ := net.ResolveTCPAddr("tcp", addr)
	return peer.NewContext(context.Background(), &peer.Peer{Addr: a})
}

func TestConnOwner(t *testing.T) {
	a, b := connOwner(ctxFrom("127.0.0.1:40000")), connOwner(ctxFrom("127.0.0.1:40001"))
	if a == 0 || b == 0 || a == b {
		t.Fatalf("owners %x %x: want distinct and non-zero", a, b)
	}
	if a&grpcOwnerBit == 0 {
		t.Fatalf("owner %x overlaps the frame transport's ids", a)
	}
	if again := connOwner(ctxFrom("127.0.0.1:40000")); again != a {
		t.Fatal("one connection, two owners")
	}
	if connOwner(context.Background()) != 0 {
		t.Fatal("no peer: want no owner")
	}
}
