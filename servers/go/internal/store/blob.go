package store

import (
	"io"

	"xferbench/servers/go/internal/content"
	"xferbench/servers/go/internal/errs"
)

// Info describes a whole file.
type Info struct {
	Size uint64
	CRC  uint32
}

// source is one committed file version. open gives a reader of exactly
// that version, or not_found when it is gone; the store calls it under its
// lock. The disk store opens a descriptor per call instead of keeping one
// per file, so the number of files stored never limits connections.
type source interface {
	open(name string) (reader, error)
}

// reader reads one version for one call; Close releases its descriptor.
type reader interface {
	io.ReaderAt
	Close() error
}

// blob is one committed version of a file, as the index holds it.
type blob struct {
	info Info
	src  source
}

// Handle reads one file version; Close it when done.
type Handle struct {
	Name string
	Info
	r    reader      // nil for generated content
	gen  content.Gen // used when r is nil
	gens *genCache   // where generated content is read from
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
	if h.r == nil {
		h.gens.read(h.gen, p, off)
		return n, nil
	}
	got, err := h.r.ReadAt(p, int64(off))
	if got < n {
		return got, errs.New(errs.Internal, "reading %q at offset %d: %v", h.Name, off, ioErr(err))
	}
	return n, nil
}

// viewer is a reader that can hand out its bytes in place (the memory store).
type viewer interface {
	view(off uint64, n int) ([]byte, bool)
}

// View returns the bytes ReadAt would read into a buffer of n, in place and
// read-only, when the version lives in memory in one piece there; false
// otherwise (a disk file, generated content, a read across two chunks).
// off must pass CheckOffset.
func (h *Handle) View(off uint64, n int) ([]byte, bool) {
	v, ok := h.r.(viewer)
	if !ok {
		return nil, false
	}
	return v.view(off, int(min(uint64(n), h.Size-off)))
}

// Close releases the version.
func (h *Handle) Close() {
	if h.r != nil {
		_ = h.r.Close() // read-only: nothing to lose on close
		h.r = nil
	}
}
