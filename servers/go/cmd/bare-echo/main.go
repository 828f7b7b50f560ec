// Command bare-echo is the baseline xferd-go's gRPC Echo is measured against
// (scripts/studies/grpc.sh, BENCHMARKS.md): the smallest honest grpc-go server
// of xfer.v1.FileTransfer. Echo returns the payload as PROTOCOL.md says;
// every other method is grpc-go's Unimplemented. No interceptors, no
// metrics, no limits, grpc.NewServer's default options: whatever xferd-go
// costs on top of this is xferd-go's own.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	"google.golang.org/grpc"

	"xferbench/servers/go/gen/xferv1"
)

type echoServer struct {
	xferv1.UnimplementedFileTransferServer
}

// Echo returns the payload.
func (echoServer) Echo(_ context.Context, req *xferv1.EchoRequest) (*xferv1.EchoResponse, error) {
	return &xferv1.EchoResponse{Payload: req.Payload}, nil
}

func main() { os.Exit(run()) }

func run() int {
	fs := flag.NewFlagSet("bare-echo", flag.ContinueOnError)
	addr := fs.String("grpc-addr", "127.0.0.1:0", "gRPC listen address, `HOST:PORT` (port 0: any free port)")
	if err := fs.Parse(os.Args[1:]); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bare-echo: error: listening on --grpc-addr %s: %v\n", *addr, err)
		return 1
	}
	srv := grpc.NewServer()
	xferv1.RegisterFileTransferServer(srv, echoServer{})
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	// Handle SIGTERM before announcing readiness, as xferd-go does.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	fmt.Fprintf(os.Stderr, "bare-echo ready grpc=%s\n", ln.Addr())
	select {
	case <-sigs:
		srv.Stop()
		return 0
	case err := <-errc:
		fmt.Fprintf(os.Stderr, "bare-echo: error: %v\n", err)
		return 1
	}
}
