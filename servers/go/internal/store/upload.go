package store

import (
	"sync"
	"sync/atomic"
	"time"

	"xferbench/servers/go/internal/content"
	"xferbench/servers/go/internal/errs"
)

// stager holds an upload's bytes until commit.
type stager interface {
	// WriteAt stores one chunk, the concatenation of pieces; calls for
	// distinct chunks run concurrently.
	WriteAt(pieces [][]byte, off uint64) error
	// Publish turns the staged bytes into a readable source; the caller
	// makes it visible under the name.
	Publish(name string) (source, error)
	// Discard drops everything staged.
	Discard()
}

// slot is one chunk position: reserved while its write runs, then done.
type slot struct {
	done bool
	n    uint32
	crc  uint32
}

// upload tracks one open upload. Chunks are tracked in a map keyed by
// chunk index, so memory grows with chunks received, never with the size a
// client merely declares.
type upload struct {
	id        uint64
	owner     uint64 // the connection that began it, 0 for none
	name      string
	size      uint64
	chunkSize uint64
	st        stager

	mu       sync.Mutex
	closed   bool
	slots    map[uint64]slot
	received uint64
	writers  sync.WaitGroup // chunk writes in flight

	lastActive atomic.Int64 // unix nanos of the last call
}

func (u *upload) touch(now time.Time) { u.lastActive.Store(now.UnixNano()) }

func (u *upload) notFound() error {
	return errs.New(errs.NotFound, "no open upload with id %d", u.id)
}

// reserve checks a chunk against the upload's geometry and claims its slot.
func (u *upload) reserve(off uint64, n int) (uint64, error) {
	if off%u.chunkSize != 0 {
		return 0, errs.New(errs.InvalidArgument, "chunk offset %d is not a multiple of chunk size %d", off, u.chunkSize)
	}
	if off >= u.size || uint64(n) > u.size-off {
		return 0, errs.New(errs.OutOfRange, "chunk at offset %d with %d bytes ends past the declared size %d", off, n, u.size)
	}
	if want := min(u.chunkSize, u.size-off); uint64(n) != want {
		return 0, errs.New(errs.InvalidArgument, "chunk at offset %d has %d bytes, want %d", off, n, want)
	}
	idx := off / u.chunkSize
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed {
		return 0, u.notFound()
	}
	if _, dup := u.slots[idx]; dup {
		return 0, errs.New(errs.FailedPrecondition, "chunk at offset %d already received", off)
	}
	u.slots[idx] = slot{}
	u.writers.Add(1)
	return idx, nil
}

// finish records a chunk write's outcome: a failed write frees the slot so
// the client may retry it.
func (u *upload) finish(idx uint64, n int, crc uint32, werr error) (uint64, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	defer u.writers.Done()
	if werr != nil {
		delete(u.slots, idx)
		return 0, errs.New(errs.Internal, "storing chunk at offset %d: %v", idx*u.chunkSize, ioErr(werr))
	}
	if u.closed {
		return 0, u.notFound()
	}
	u.slots[idx] = slot{done: true, n: uint32(n), crc: crc}
	u.received += uint64(n)
	return u.received, nil
}

// close marks the upload closed; false when something closed it first.
// Writes already in flight finish (their callers get not_found).
func (u *upload) close() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed {
		return false
	}
	u.closed = true
	return true
}

// crc combines the chunk CRCs in file order. Call after close and after
// every writer finished, with received == size.
func (u *upload) crc() uint32 {
	var crc uint32
	chunks := (u.size + u.chunkSize - 1) / u.chunkSize
	for i := uint64(0); i < chunks; i++ {
		s := u.slots[i]
		crc = content.CombineCRC(crc, s.crc, uint64(s.n))
	}
	return crc
}
