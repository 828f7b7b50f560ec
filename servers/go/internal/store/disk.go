package store

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"

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

// NewDisk makes a store under dir, creating dir/tmp and dir/files. Stale
// staged uploads from an earlier run are removed: they never committed.
func NewDisk(lim limits.Limits, dir string) (*Store, error) {
	d := diskBackend{dir: dir}
	for _, sub := range []string{tmpDir, filesDir} {
		if err := os.MkdirAll(filepath.Join(dir, sub), dirPerm); err != nil {
			return nil, fmt.Errorf("disk store: %w", err)
		}
	}
	stale, err := os.ReadDir(filepath.Join(dir, tmpDir))
	if err != nil {
		return nil, fmt.Errorf("disk store: %w", err)
	}
	for _, e := range stale {
		if err := os.Remove(filepath.Join(dir, tmpDir, e.Name())); err != nil {
			return nil, fmt.Errorf("disk store: removing stale upload: %w", err)
		}
	}
	return newStore(lim, d), nil
}

type diskBackend struct{ dir string }

func (d diskBackend) describe() string { return "disk:" + d.dir }

func (d diskBackend) stage(id, _, _ uint64) (stager, error) {
	path := filepath.Join(d.dir, tmpDir, fmt.Sprintf("upload-%016x", id))
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, filePerm)
	if err != nil {
		return nil, err
	}
	return &diskStager{f: f, path: path, filesDir: filepath.Join(d.dir, filesDir)}, nil
}

// load opens a file committed by an earlier run and computes its CRC.
func (d diskBackend) load(name string) (Info, source, error) {
	f, err := os.Open(filepath.Join(d.dir, filesDir, name))
	if errors.Is(err, fs.ErrNotExist) {
		return Info{}, nil, notFound(name)
	}
	if err != nil {
		return Info{}, nil, errs.New(errs.Internal, "opening %q: %v", name, err)
	}
	h := crc32.NewIEEE()
	n, err := io.Copy(h, f)
	if err != nil {
		_ = f.Close() // read-only
		return Info{}, nil, errs.New(errs.Internal, "reading %q: %v", name, err)
	}
	return Info{Size: uint64(n), CRC: h.Sum32()}, f, nil
}

// diskStager is a temp file written with pwrite, so chunks of one upload
// may be written concurrently.
type diskStager struct {
	f        *os.File
	path     string
	filesDir string
}

func (d *diskStager) WriteAt(p []byte, off uint64) error {
	_, err := d.f.WriteAt(p, int64(off))
	return err
}

// Publish renames the temp file into place; its descriptor stays open as the
// read source of this version, which survives a later replacement.
func (d *diskStager) Publish(name string) (source, error) {
	if err := os.Rename(d.path, filepath.Join(d.filesDir, name)); err != nil {
		return nil, err
	}
	return d.f, nil
}

func (d *diskStager) Discard() {
	// Errors here leave only a stale temp file, removed at the next start.
	_ = d.f.Close()
	_ = os.Remove(d.path)
}
