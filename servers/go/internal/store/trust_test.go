package store

import (
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"xferbench/servers/go/internal/errs"
	"xferbench/servers/go/internal/limits"
)

func commitFile(t *testing.T, s *Store, name string, data []byte) {
	t.Helper()
	id := sendFile(t, s, name, data, 1024)
	if _, err := s.Commit(id, crc32.ChecksumIEEE(data)); err != nil {
		t.Fatal(err)
	}
}

func TestDiskRefusesSymlinkedSubdirs(t *testing.T) {
	for _, sub := range []string{tmpDir, filesDir} {
		t.Run(sub, func(t *testing.T) {
			dir, target := t.TempDir(), t.TempDir()
			victim := filepath.Join(target, "precious")
			if err := os.WriteFile(victim, []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, filepath.Join(dir, sub)); err != nil {
				t.Fatal(err)
			}
			_, err := NewDisk(limits.Defaults(), dir)
			if err == nil || !strings.HasPrefix(err.Error(), "store: ") || !strings.Contains(err.Error(), "symlink") {
				t.Fatalf("NewDisk = %v, want a store: ... symlink error", err)
			}
			if _, err := os.Stat(victim); err != nil {
				t.Fatalf("the symlink's target lost its contents: %v", err)
			}
		})
	}
}

func TestDiskRefusesFileAsSubdir(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, filesDir), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := NewDisk(limits.Defaults(), dir); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Fatalf("NewDisk = %v, want not a directory", err)
	}
}

func TestDiskStartCleansOnlyRegularFilesInTmp(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	tmp := filepath.Join(dir, tmpDir)
	keep := filepath.Join(outside, "keep")
	for _, p := range []string{tmp, filepath.Join(tmp, "sub")} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{filepath.Join(tmp, "stale"), filepath.Join(tmp, "sub", "inner"), keep} {
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(keep, filepath.Join(tmp, "link")); err != nil {
		t.Fatal(err)
	}
	s, err := NewDisk(limits.Defaults(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := os.Lstat(filepath.Join(tmp, "stale")); !os.IsNotExist(err) {
		t.Fatal("a stale staged file survived start-up")
	}
	for _, p := range []string{filepath.Join(tmp, "sub", "inner"), filepath.Join(tmp, "link"), keep} {
		if _, err := os.Lstat(p); err != nil {
			t.Fatalf("start-up removed %s: %v", p, err)
		}
	}
}

func TestDiskServesNoSymlinkOrFIFO(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	s, err := NewDisk(limits.Defaults(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	secret := filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	files := filepath.Join(dir, filesDir)
	if err := os.Symlink(secret, filepath.Join(files, "link")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(files, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, name := range []string{"link", "fifo"} {
			_, err := s.Stat(name)
			wantCode(t, err, errs.NotFound)
		}
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Stat blocked on a FIFO")
	}
}

func TestDiskReadOfReplacedFileIsNotFound(t *testing.T) {
	dir := t.TempDir()
	s, err := NewDisk(limits.Defaults(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	commitFile(t, s, "a.bin", pattern(2000, 1))
	path := filepath.Join(dir, filesDir, "a.bin")
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", path); err != nil {
		t.Fatal(err)
	}
	_, err = s.Open("a.bin")
	wantCode(t, err, errs.NotFound)
}

// openFDs counts this process's open descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	return len(ents)
}

func TestDiskHoldsNoDescriptorPerFile(t *testing.T) {
	s, err := NewDisk(limits.Defaults(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	before := openFDs(t)
	for i := 0; i < 100; i++ {
		commitFile(t, s, "f"+string(rune('a'+i%26))+strings.Repeat("x", i/26), pattern(100, byte(i)))
	}
	if grown := openFDs(t) - before; grown > 2 {
		t.Fatalf("100 committed files hold %d more descriptors", grown)
	}
}

func TestInternalErrorNamesNoPath(t *testing.T) {
	dir := t.TempDir()
	s, err := NewDisk(limits.Defaults(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	data := pattern(2000, 4)
	id := sendFile(t, s, "gone.bin", data, 1024)
	staged, _ := filepath.Glob(filepath.Join(dir, tmpDir, "*"))
	for _, p := range staged {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	_, err = s.Commit(id, crc32.ChecksumIEEE(data))
	wantCode(t, err, errs.Internal)
	if strings.Contains(err.Error(), dir) || strings.Contains(err.Error(), "/") {
		t.Fatalf("internal error names a path: %v", err)
	}
}

func TestMinChunk(t *testing.T) {
	eachStore(t, limits.Defaults(), func(t *testing.T, s *Store) {
		_, err := s.Begin("tiny", 1<<20, 1)
		wantCode(t, err, errs.InvalidArgument)
		if !strings.Contains(err.Error(), "1024") {
			t.Fatalf("%v does not name the limit", err)
		}
		if _, err := s.Begin("one-chunk", 10, 10); err != nil { // one chunk holds the file
			t.Fatal(err)
		}
		if _, err := s.Begin("at-min", 1<<20, 1024); err != nil {
			t.Fatal(err)
		}
	})
}

func TestPerOwnerLimitAndAbortOwner(t *testing.T) {
	lim := limits.Defaults()
	lim.MaxUploadsPerConn = 2
	eachStore(t, lim, func(t *testing.T, s *Store) {
		for i := 0; i < 2; i++ {
			if _, err := s.BeginOwned(7, "a", 10, 10); err != nil {
				t.Fatal(err)
			}
		}
		_, err := s.BeginOwned(7, "a", 10, 10)
		wantCode(t, err, errs.ResourceExhausted)
		if _, err := s.BeginOwned(8, "b", 10, 10); err != nil { // another connection is not affected
			t.Fatal(err)
		}
		s.AbortOwner(7)
		if n := s.OpenUploads(); n != 1 {
			t.Fatalf("%d uploads open after the owner closed, want 1", n)
		}
		if _, err := s.BeginOwned(7, "a", 10, 10); err != nil {
			t.Fatal(err)
		}
	})
}

func TestStagedBytesLimit(t *testing.T) {
	lim := limits.Defaults()
	lim.MaxStagedBytes = 10000
	eachStore(t, lim, func(t *testing.T, s *Store) {
		id, err := s.Begin("a", 6000, 2000)
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Begin("b", 5000, 2000)
		wantCode(t, err, errs.ResourceExhausted)
		if _, err := s.Begin("c", 4000, 2000); err != nil {
			t.Fatal(err)
		}
		if err := s.Abort(id); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Begin("b", 5000, 2000); err != nil { // released by the abort
			t.Fatal(err)
		}
	})
}
