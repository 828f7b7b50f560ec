package store

import (
	"io"
	"sync/atomic"

	"xferbench/servers/go/internal/content"
	"xferbench/servers/go/internal/errs"
)

// Info describes a whole file.
type Info struct {
	Size uint64
	CRC  uint32
}

// source is the bytes of one committed file version.
type source interface {
	io.ReaderAt
	Close() error
}

// blob is one committed version of a file. The store holds one reference;
// each open Handle holds another; the source closes when the last goes, so
// a replaced disk file stays readable by downloads already under way.
type blob struct {
	info Info
	src  source
	refs atomic.Int64
}

func newBlob(info Info, src source) *blob {
	b := &blob{info: info, src: src}
	b.refs.Store(1)
	return b
}

func (b *blob) acquire() { b.refs.Add(1) }

func (b *blob) release() {
	if b.refs.Add(-1) == 0 {
		_ = b.src.Close() // a read-only source: nothing to lose on close
	}
}

// Handle reads one file version; Close it when done.
type Handle struct {
	Name string
	Info
	blob *blob       // nil for generated content
	gen  content.Gen // used when blob is nil
}

// CheckOffset refuses an offset past the end (offset = size reads empty).
func (h *Handle) CheckOffset(off uint64) error {
	if off > h.Size {
		return errs.New(errs.OutOfRange, "offset %d is past the end of file %q (size %d)", off, h.Name, h.Size)
	}
	return nil
}

// ReadAt fills p from off, stopping at the end of the file; it returns the
// number of bytes read. off must pass CheckOffset.
func (h *Handle) ReadAt(p []byte, off uint64) (int, error) {
	n := int(min(uint64(len(p)), h.Size-off))
	p = p[:n]
	if h.blob == nil {
		h.gen.Fill(p, off)
		return n, nil
	}
	got, err := h.blob.src.ReadAt(p, int64(off))
	if got < n {
		return got, errs.New(errs.Internal, "reading %q at offset %d: %v", h.Name, off, err)
	}
	return n, nil
}

// Close releases the version.
func (h *Handle) Close() {
	if h.blob != nil {
		h.blob.release()
		h.blob = nil
	}
}
