package grpcsvc

import (
	"context"
	"path"
	"strings"
	"time"

	"google.golang.org/grpc"

	"xferbench/servers/go/gen/xferv1"
	"xferbench/servers/go/internal/errs"
)

// Observer receives per-call figures (same shape as the frame codec's).
type Observer interface {
	Started()
	Done(method string, code errs.Code, d time.Duration)
}

// servicePrefix limits metrics to FileTransfer: health checks and
// reflection are not the workload.
var servicePrefix = "/" + xferv1.FileTransfer_ServiceDesc.ServiceName + "/"

func observed(fullMethod string) bool { return strings.HasPrefix(fullMethod, servicePrefix) }

// UnaryInterceptor records Echo, Stat and Meta calls.
func UnaryInterceptor(o Observer) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if !observed(info.FullMethod) {
			return h(ctx, req)
		}
		o.Started()
		start := time.Now()
		resp, err := h(ctx, req)
		o.Done(path.Base(info.FullMethod), errs.CodeOf(err), time.Since(start))
		return resp, err
	}
}

// StreamInterceptor records Upload and Download calls, whole-stream time.
func StreamInterceptor(o Observer) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		ss = checkedStream{ss}
		if !observed(info.FullMethod) {
			return h(srv, ss)
		}
		o.Started()
		start := time.Now()
		err := h(srv, ss)
		o.Done(path.Base(info.FullMethod), errs.CodeOf(err), time.Since(start))
		return err
	}
}
