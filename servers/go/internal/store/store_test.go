package store

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"xferbench/servers/go/internal/errs"
	"xferbench/servers/go/internal/limits"
)

// eachStore runs a test against the memory and the disk store.
func eachStore(t *testing.T, lim limits.Limits, f func(t *testing.T, s *Store)) {
	t.Run("mem", func(t *testing.T) {
		s := NewMem(lim)
		defer s.Close()
		f(t, s)
	})
	t.Run("disk", func(t *testing.T) {
		s, err := NewDisk(lim, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		f(t, s)
	})
}

// geometry is the default limits without --min-chunk, for tests about
// chunk geometry that use small chunks to stay short.
func geometry() limits.Limits {
	lim := limits.Defaults()
	lim.MinChunk = 1
	return lim
}

func wantCode(t *testing.T, err error, code errs.Code) {
	t.Helper()
	var e *errs.Error
	if !errors.As(err, &e) || e.Code != code {
		t.Fatalf("error = %v, want code %s", err, code)
	}
}

func pattern(n int, salt byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) ^ salt
	}
	return b
}

// sendFile sends data in chunks (in reverse order, to show order is free).
func sendFile(t *testing.T, s *Store, name string, data []byte, chunk int) uint64 {
	t.Helper()
	id, err := s.Begin(name, uint64(len(data)), uint32(chunk))
	if err != nil {
		t.Fatal(err)
	}
	last := (len(data) - 1) / chunk * chunk
	for off := last; off >= 0 && len(data) > 0; off -= chunk {
		if _, err := s.Chunk(id, uint64(off), data[off:min(off+chunk, len(data))]); err != nil {
			t.Fatal(err)
		}
	}
	return id
}

func readAll(t *testing.T, s *Store, name string) ([]byte, Info) {
	t.Helper()
	h, err := s.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	buf := make([]byte, h.Size)
	if _, err := h.ReadAt(buf, 0); err != nil {
		t.Fatal(err)
	}
	return buf, h.Info
}

func TestCommitMakesVisible(t *testing.T) {
	eachStore(t, limits.Defaults(), func(t *testing.T, s *Store) {
		data := pattern(10000, 1)
		id := sendFile(t, s, "a.bin", data, 4096)
		if _, err := s.Stat("a.bin"); err == nil {
			t.Fatal("visible before commit")
		}
		info, err := s.Commit(id, crc32.ChecksumIEEE(data))
		if err != nil {
			t.Fatal(err)
		}
		if info.Size != 10000 || info.CRC != crc32.ChecksumIEEE(data) {
			t.Fatalf("info %+v", info)
		}
		got, gi := readAll(t, s, "a.bin")
		if !bytes.Equal(got, data) || gi != info {
			t.Fatal("read back differs")
		}
		_, err = s.Chunk(id, 0, data[:4096])
		wantCode(t, err, errs.NotFound)
		_, err = s.Commit(id, 0)
		wantCode(t, err, errs.NotFound)
	})
}

// A chunk given as pieces (a gRPC message's receive buffers, empty ones
// included) is stored as their concatenation, with its CRC; more pieces than
// one pwritev takes are written in several calls.
func TestChunkFromPieces(t *testing.T) {
	eachStore(t, geometry(), func(t *testing.T, s *Store) {
		data := pattern(3*4096, 3)
		id, err := s.Begin("p.bin", uint64(len(data)), 4096)
		if err != nil {
			t.Fatal(err)
		}
		var many [][]byte // 4096 one-byte pieces: four pwritev calls
		for i := range 4096 {
			many = append(many, data[i:i+1])
		}
		chunks := [][][]byte{many, {nil, data[4096:5000], {}, data[5000:8192], nil}, {data[8192:]}}
		for i, pieces := range chunks {
			if _, err := s.Chunk(id, uint64(i*4096), pieces...); err != nil {
				t.Fatalf("chunk %d: %v", i, err)
			}
		}
		if _, err := s.Commit(id, crc32.ChecksumIEEE(data)); err != nil {
			t.Fatal(err)
		}
		if got, _ := readAll(t, s, "p.bin"); !bytes.Equal(got, data) {
			t.Fatal("read back differs from the pieces sent")
		}
	})
}

func TestEmptyFile(t *testing.T) {
	eachStore(t, limits.Defaults(), func(t *testing.T, s *Store) {
		id, err := s.Begin("empty", 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Chunk(id, 0, nil)
		wantCode(t, err, errs.OutOfRange)
		if _, err := s.Commit(id, 0); err != nil {
			t.Fatal(err)
		}
		h, err := s.Open("empty")
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		if h.Size != 0 || h.CheckOffset(0) != nil {
			t.Fatal("empty file")
		}
		wantCode(t, h.CheckOffset(1), errs.OutOfRange)
	})
}

func TestCRCMismatchLeavesNothing(t *testing.T) {
	eachStore(t, geometry(), func(t *testing.T, s *Store) {
		data := pattern(5000, 2)
		id := sendFile(t, s, "b.bin", data, 1000)
		_, err := s.Commit(id, crc32.ChecksumIEEE(data)^1)
		wantCode(t, err, errs.DataLoss)
		_, err = s.Stat("b.bin")
		wantCode(t, err, errs.NotFound)
		_, err = s.Commit(id, crc32.ChecksumIEEE(data))
		wantCode(t, err, errs.NotFound) // a failed commit aborts
		if s.OpenUploads() != 0 {
			t.Fatal("upload left open")
		}
	})
}

func TestIncompleteCommitAborts(t *testing.T) {
	eachStore(t, geometry(), func(t *testing.T, s *Store) {
		id, _ := s.Begin("c.bin", 3000, 1000)
		if _, err := s.Chunk(id, 1000, pattern(1000, 0)); err != nil {
			t.Fatal(err)
		}
		_, err := s.Commit(id, 0)
		wantCode(t, err, errs.FailedPrecondition)
		_, err = s.Chunk(id, 0, pattern(1000, 0))
		wantCode(t, err, errs.NotFound)
	})
}

func TestAbort(t *testing.T) {
	eachStore(t, geometry(), func(t *testing.T, s *Store) {
		data := pattern(100, 3)
		id := sendFile(t, s, "d.bin", data, 64)
		if err := s.Abort(id); err != nil {
			t.Fatal(err)
		}
		wantCode(t, s.Abort(id), errs.NotFound)
		_, err := s.Commit(id, crc32.ChecksumIEEE(data))
		wantCode(t, err, errs.NotFound)
		_, err = s.Stat("d.bin")
		wantCode(t, err, errs.NotFound)
	})
}

func TestChunkRules(t *testing.T) {
	eachStore(t, geometry(), func(t *testing.T, s *Store) {
		id, _ := s.Begin("e.bin", 2500, 1000)
		_, err := s.Chunk(id, 100, pattern(1000, 0))
		wantCode(t, err, errs.InvalidArgument) // misaligned
		_, err = s.Chunk(id, 3000, pattern(1000, 0))
		wantCode(t, err, errs.OutOfRange) // past the end
		_, err = s.Chunk(id, 2000, pattern(501, 0))
		wantCode(t, err, errs.OutOfRange) // last chunk too long
		_, err = s.Chunk(id, 2000, pattern(499, 0))
		wantCode(t, err, errs.InvalidArgument) // last chunk too short
		_, err = s.Chunk(id, 0, pattern(999, 0))
		wantCode(t, err, errs.InvalidArgument) // short middle chunk
		got, err := s.Chunk(id, 2000, pattern(500, 0))
		if err != nil || got != 500 {
			t.Fatalf("received %d, %v", got, err)
		}
		_, err = s.Chunk(id, 2000, pattern(500, 0))
		wantCode(t, err, errs.FailedPrecondition) // duplicate
		_, err = s.Chunk(id^1, 0, pattern(1000, 0))
		wantCode(t, err, errs.NotFound)
	})
}

func TestBeginRules(t *testing.T) {
	lim := geometry()
	lim.MaxUploads = 2
	lim.MaxFileSize = 1 << 20
	eachStore(t, lim, func(t *testing.T, s *Store) {
		for _, bad := range []string{"", ".", "..", "a/b", `a\b`, "a\x00b", "gen:1:2", "\xff", string(make([]byte, 256))} {
			_, err := s.Begin(bad, 1, 1)
			wantCode(t, err, errs.InvalidArgument)
		}
		_, err := s.Begin("big", 1<<20+1, 1)
		wantCode(t, err, errs.InvalidArgument)
		_, err = s.Begin("c0", 1, 0)
		wantCode(t, err, errs.InvalidArgument)
		_, err = s.Begin("c5", 1, 4<<20+1)
		wantCode(t, err, errs.InvalidArgument)
		for i := 0; i < 2; i++ {
			if _, err := s.Begin(fmt.Sprintf("ok%d ünï:code", i), 10, 5); err != nil {
				t.Fatal(err)
			}
		}
		_, err = s.Begin("third", 10, 5)
		wantCode(t, err, errs.ResourceExhausted)
	})
}

func TestHostileDeclaredSizeCostsNothing(t *testing.T) {
	lim := geometry()
	lim.MaxStagedBytes = 1 << 40 // this test is about memory, not the staged-bytes cap
	s := NewMem(lim)
	defer s.Close()
	var before, after runtimeMem
	before.read()
	for i := 0; i < 100; i++ {
		if _, err := s.Begin(fmt.Sprintf("huge%d", i), 1<<30, 1); err != nil {
			t.Fatal(err)
		}
	}
	after.read()
	if grown := after.total - before.total; grown > 10<<20 {
		t.Fatalf("declaring 100 × 1 GiB allocated %d bytes", grown)
	}
}

func TestExpiry(t *testing.T) {
	lim := geometry()
	lim.UploadIdleTimeout = 50 * time.Millisecond
	eachStore(t, lim, func(t *testing.T, s *Store) {
		id, _ := s.Begin("f.bin", 10, 5)
		deadline := time.Now().Add(5 * time.Second)
		for s.OpenUploads() != 0 {
			if time.Now().After(deadline) {
				t.Fatal("idle upload did not expire")
			}
			time.Sleep(10 * time.Millisecond)
		}
		_, err := s.Chunk(id, 0, pattern(5, 0))
		wantCode(t, err, errs.NotFound)
	})
}

func TestConcurrentSameNameLastWinsWhole(t *testing.T) {
	eachStore(t, limits.Defaults(), func(t *testing.T, s *Store) {
		const writers, size, chunk = 8, 64 << 10, 4 << 10
		var wg sync.WaitGroup
		for w := 0; w < writers; w++ {
			wg.Add(1)
			go func(salt byte) {
				defer wg.Done()
				data := pattern(size, salt)
				for round := 0; round < 5; round++ {
					id, err := s.Begin("same", size, chunk)
					if err != nil {
						t.Error(err)
						return
					}
					for off := 0; off < size; off += chunk {
						if _, err := s.Chunk(id, uint64(off), data[off:off+chunk]); err != nil {
							t.Error(err)
							return
						}
					}
					if _, err := s.Commit(id, crc32.ChecksumIEEE(data)); err != nil {
						t.Error(err)
						return
					}
				}
			}(byte(w + 1))
		}
		// Readers meanwhile must always see one writer's whole file.
		stop := make(chan struct{})
		var rg sync.WaitGroup
		rg.Add(1)
		go func() {
			defer rg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				h, err := s.Open("same")
				if err != nil {
					continue
				}
				buf := make([]byte, h.Size)
				_, err = h.ReadAt(buf, 0)
				h.Close()
				if err != nil || crc32.ChecksumIEEE(buf) != h.CRC {
					t.Error("reader saw a mixed or broken file")
					return
				}
			}
		}()
		wg.Wait()
		close(stop)
		rg.Wait()
		got, info := readAll(t, s, "same")
		if crc32.ChecksumIEEE(got) != info.CRC || !bytes.Equal(got, pattern(size, got[0])) {
			t.Fatal("final file is a mix")
		}
	})
}

func TestDiskLayoutAndRestart(t *testing.T) {
	dir := t.TempDir()
	s, err := NewDisk(limits.Defaults(), dir)
	if err != nil {
		t.Fatal(err)
	}
	data := pattern(3000, 9)
	id := sendFile(t, s, "keep.bin", data, 1024)
	if _, err := s.Commit(id, crc32.ChecksumIEEE(data)); err != nil {
		t.Fatal(err)
	}
	sendFile(t, s, "abandoned.bin", data, 1024) // never committed
	tmp, _ := os.ReadDir(filepath.Join(dir, tmpDir))
	if len(tmp) != 1 {
		t.Fatalf("tmp holds %d files, want 1", len(tmp))
	}
	s.Close()
	if tmp, _ := os.ReadDir(filepath.Join(dir, tmpDir)); len(tmp) != 0 {
		t.Fatal("closing the store left staged data")
	}
	s2, err := NewDisk(limits.Defaults(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	got, info := readAll(t, s2, "keep.bin")
	if !bytes.Equal(got, data) || info.CRC != crc32.ChecksumIEEE(data) {
		t.Fatal("committed file lost across restart")
	}
}

func TestGenRead(t *testing.T) {
	s := NewMem(limits.Defaults())
	defer s.Close()
	h, err := s.Open("gen:100:42")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if h.Size != 100 || h.CRC != 0x1587afe2 {
		t.Fatalf("gen info %+v", h.Info)
	}
	buf := make([]byte, 64)
	n, err := h.ReadAt(buf, 90)
	if err != nil || n != 10 {
		t.Fatalf("read %d, %v", n, err)
	}
	_, err = s.Open("gen:01:2")
	wantCode(t, err, errs.InvalidArgument)
	_, err = s.Open("missing.bin")
	wantCode(t, err, errs.NotFound)
}

// View hands out a memory-store version's bytes in place when one chunk
// holds them, and nothing otherwise (so the caller copies with ReadAt).
func TestViewInPlace(t *testing.T) {
	eachStore(t, geometry(), func(t *testing.T, s *Store) {
		data := pattern(3*4096+100, 5)
		id := sendFile(t, s, "v.bin", data, 4096)
		if _, err := s.Commit(id, crc32.ChecksumIEEE(data)); err != nil {
			t.Fatal(err)
		}
		h, err := s.Open("v.bin")
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		for _, r := range []struct {
			off  uint64
			n    int
			want bool
		}{{0, 4096, true}, {4096 + 10, 100, true}, {3 * 4096, 1000, true}, {4000, 200, false}, {uint64(len(data)), 10, true}} {
			got, ok := h.View(r.off, r.n)
			if mem := s.String() == "mem"; mem && ok != r.want || !mem && ok {
				t.Fatalf("%s: View(%d, %d) ok=%v", s, r.off, r.n, ok)
			}
			end := min(int(r.off)+r.n, len(data))
			if ok && !bytes.Equal(got, data[r.off:end]) {
				t.Fatalf("View(%d, %d) = %d bytes that differ from the file's", r.off, r.n, len(got))
			}
		}
	})
}
