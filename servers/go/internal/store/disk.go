package store

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"xferbench/servers/go/internal/errs"
	"xferbench/servers/go/internal/limits"
)

// Layout under the disk store's directory: uploads are staged in tmp and
// renamed into files, both in one file system so the rename is atomic.
const (
	tmpDir   = "tmp"
	filesDir = "files"
	dirPerm  = 0o755
	filePerm = 0o644
)

// readFlags open a committed file: O_NOFOLLOW so a planted symlink is never
// followed, O_NONBLOCK so a planted FIFO never blocks the open.
const readFlags = unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC

// NewDisk makes a store under dir, creating dir/tmp and dir/files. Stale
// staged uploads from an earlier run are removed: they never committed.
func NewDisk(lim limits.Limits, dir string) (*Store, error) {
	tmp, files, err := openStoreDirs(dir)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	if err := cleanTmp(tmp); err != nil {
		_ = unix.Close(tmp) // failing start-up: the error below says why
		_ = unix.Close(files)
		return nil, fmt.Errorf("store: removing stale uploads in %s: %w", dir+"/"+tmpDir, err)
	}
	return newStore(lim, diskBackend{dir: dir, tmp: tmp, files: files}), nil
}

// diskBackend works relative to descriptors of tmp and files opened once at
// start, so swapping either for a symlink later redirects nothing.
type diskBackend struct {
	dir        string
	tmp, files int
}

func (d diskBackend) describe() string { return "disk:" + d.dir }

func (d diskBackend) close() {
	_ = unix.Close(d.tmp) // directories: nothing to flush
	_ = unix.Close(d.files)
}

func (d diskBackend) stage(id, _, _ uint64) (stager, error) {
	name := fmt.Sprintf("upload-%016x", id)
	fd, err := unix.Openat(d.tmp, name, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, filePerm)
	if err != nil {
		return nil, err
	}
	return &diskStager{f: os.NewFile(uintptr(fd), name), name: name, d: d}, nil
}

// load indexes a file committed by an earlier run: only a regular file
// counts, and its CRC is computed once; no descriptor stays open.
func (d diskBackend) load(name string) (Info, source, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(d.files, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return Info{}, nil, notFound(name)
	}
	src := &diskSource{files: d.files, dev: st.Dev, ino: st.Ino, size: uint64(st.Size)}
	r, err := src.open(name)
	if err != nil {
		return Info{}, nil, err
	}
	defer func() { _ = r.Close() }() // read-only
	h := crc32.NewIEEE()
	n, err := io.Copy(h, io.NewSectionReader(r, 0, st.Size))
	if err != nil || uint64(n) != src.size {
		return Info{}, nil, errs.New(errs.Internal, "reading %q: %v", name, ioErr(err))
	}
	return Info{Size: src.size, CRC: h.Sum32()}, src, nil
}

// diskSource is one committed version, known by its inode: each open
// checks that the name still holds that inode, so a reader gets that
// version or not_found, never another file that took the name.
type diskSource struct {
	files    int
	dev, ino uint64
	size     uint64
}

func (s *diskSource) open(name string) (reader, error) {
	fd, err := unix.Openat(s.files, name, readFlags, 0)
	if err != nil {
		if isGone(err) {
			return nil, notFound(name)
		}
		if e := fdExhausted(err); e != nil {
			return nil, e
		}
		return nil, errs.New(errs.Internal, "opening %q: %v", name, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG ||
		st.Dev != s.dev || st.Ino != s.ino || uint64(st.Size) != s.size {
		_ = unix.Close(fd) // not the version the index holds
		return nil, notFound(name)
	}
	return os.NewFile(uintptr(fd), name), nil
}

// isGone: the name holds nothing we may serve (absent, or a symlink that
// O_NOFOLLOW refused).
func isGone(err error) bool {
	return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR)
}

// diskStager is a temp file written with pwrite, so chunks of one upload
// may be written concurrently.
type diskStager struct {
	f    *os.File
	name string
	d    diskBackend
}

func (s *diskStager) WriteAt(pieces [][]byte, off uint64) error {
	if len(pieces) == 1 {
		_, err := s.f.WriteAt(pieces[0], int64(off))
		return err
	}
	return pwritevAll(int(s.f.Fd()), pieces, int64(off))
}

// iovMax is Linux's IOV_MAX: pwritev takes at most this many pieces a call.
const iovMax = 1024

// pwritevAll writes the pieces in order from off in as few system calls as
// the kernel allows (one per 1,024 pieces unless a write comes up short):
// a gRPC chunk arrives as dozens of 16 KiB buffers.
func pwritevAll(fd int, pieces [][]byte, off int64) error {
	for len(pieces) > 0 {
		n, err := unix.Pwritev(fd, pieces[:min(len(pieces), iovMax)], off)
		if err != nil {
			return err
		}
		if n == 0 {
			return io.ErrShortWrite
		}
		off += int64(n)
		for len(pieces) > 0 && n >= len(pieces[0]) {
			n -= len(pieces[0])
			pieces = pieces[1:]
		}
		if n > 0 {
			pieces = append([][]byte{pieces[0][n:]}, pieces[1:]...)
		}
	}
	return nil
}

// Publish renames the temp file into place and closes it: readers open the
// file by name per call and check its inode.
func (s *diskStager) Publish(name string) (source, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(s.f.Fd()), &st); err != nil {
		return nil, err
	}
	if err := unix.Renameat(s.d.tmp, s.name, s.d.files, name); err != nil {
		return nil, err
	}
	_ = s.f.Close() // written with pwrite, nothing buffered
	return &diskSource{files: s.d.files, dev: st.Dev, ino: st.Ino, size: uint64(st.Size)}, nil
}

func (s *diskStager) Discard() {
	// Errors here leave only a stale temp file, removed at the next start.
	_ = s.f.Close()
	_ = unix.Unlinkat(s.d.tmp, s.name, 0)
}
