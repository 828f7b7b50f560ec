// Package limits holds every size, count and timeout the protocol bounds,
// with their PROTOCOL.md defaults, and the checks both transports share.
package limits

import (
	"time"

	"xferbench/servers/go/internal/errs"
)

// Defaults from PROTOCOL.md's limit table.
const (
	DefaultMaxFrame          = 8 << 20
	DefaultMaxChunk          = 4 << 20
	DefaultMaxFileSize       = 1 << 30
	DefaultMaxUploads        = 1024
	DefaultMaxUploadsPerConn = 64
	DefaultMaxStagedBytes    = 4 << 30
	DefaultMinChunk          = 1 << 10
	DefaultReadTimeout       = 10 * time.Second
	DefaultUploadIdleTimeout = 60 * time.Second
	DefaultMaxConnCalls      = 256
	DefaultMaxConnUnsent     = 32 << 20
	DefaultWriteTimeout      = 10 * time.Second
	DefaultDrainTimeout      = 5 * time.Second
	DefaultMaxMetaEntries    = 1024
	// AutoConns as MaxConns means "derive from RLIMIT_NOFILE" (netx.AutoMaxConns).
	AutoConns = 0
	// MaxHeader is fixed by the protocol, not a flag.
	MaxHeader = 1024
	// DefaultDownloadChunk is what a gRPC Download with chunk_size 0 uses.
	DefaultDownloadChunk = 1 << 20
)

// Limits is the effective set for one server.
type Limits struct {
	MaxFrame          uint32
	MaxChunk          uint32
	MaxFileSize       uint64
	MaxConns          int
	MaxUploads        int
	MaxUploadsPerConn int
	MaxStagedBytes    uint64
	MinChunk          uint32
	ReadTimeout       time.Duration
	UploadIdleTimeout time.Duration
	MaxConnCalls      int
	MaxConnUnsent     uint64
	WriteTimeout      time.Duration
	DrainTimeout      time.Duration
	MaxMetaEntries    int
}

// Defaults returns PROTOCOL.md's defaults.
func Defaults() Limits {
	return Limits{
		MaxFrame:          DefaultMaxFrame,
		MaxChunk:          DefaultMaxChunk,
		MaxFileSize:       DefaultMaxFileSize,
		MaxConns:          AutoConns,
		MaxUploads:        DefaultMaxUploads,
		MaxUploadsPerConn: DefaultMaxUploadsPerConn,
		MaxStagedBytes:    DefaultMaxStagedBytes,
		MinChunk:          DefaultMinChunk,
		ReadTimeout:       DefaultReadTimeout,
		UploadIdleTimeout: DefaultUploadIdleTimeout,
		MaxConnCalls:      DefaultMaxConnCalls,
		MaxConnUnsent:     DefaultMaxConnUnsent,
		WriteTimeout:      DefaultWriteTimeout,
		DrainTimeout:      DefaultDrainTimeout,
		MaxMetaEntries:    DefaultMaxMetaEntries,
	}
}

// CheckPayload bounds an Echo payload.
func (l Limits) CheckPayload(n int) error {
	if uint64(n) > uint64(l.MaxChunk) {
		return errs.New(errs.InvalidArgument, "payload length %d exceeds limit %d", n, l.MaxChunk)
	}
	return nil
}

// CheckReadLength bounds a Read length: 1 … MaxChunk.
func (l Limits) CheckReadLength(n uint32) error {
	if n == 0 || n > l.MaxChunk {
		return errs.New(errs.InvalidArgument, "length %d is outside 1..%d", n, l.MaxChunk)
	}
	return nil
}

// CheckChunkSize bounds an upload's or a download's chunk size: 1 … MaxChunk.
func (l Limits) CheckChunkSize(n uint32) error {
	if n == 0 || n > l.MaxChunk {
		return errs.New(errs.InvalidArgument, "chunk size %d is outside 1..%d", n, l.MaxChunk)
	}
	return nil
}

// CheckFileSize bounds a declared file size.
func (l Limits) CheckFileSize(n uint64) error {
	if n > l.MaxFileSize {
		return errs.New(errs.InvalidArgument, "size %d exceeds limit %d", n, l.MaxFileSize)
	}
	return nil
}

// CheckUploadChunk refuses an upload's chunk size below MinChunk unless one
// chunk holds the whole file: tiny chunks cost the server bookkeeping per
// chunk out of all proportion to the bytes they carry.
func (l Limits) CheckUploadChunk(chunkSize uint32, size uint64) error {
	if chunkSize < l.MinChunk && uint64(chunkSize) < size {
		return errs.New(errs.InvalidArgument, "chunk size %d is below the minimum %d for size %d (--min-chunk)", chunkSize, l.MinChunk, size)
	}
	return nil
}
