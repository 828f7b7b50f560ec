package store

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"xferbench/servers/go/internal/content"
	"xferbench/servers/go/internal/limits"
	"xferbench/servers/go/internal/testvec"
)

const mib = genBlockBytes

// fakeClock is the cache's clock in tests: time moves only when told.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Unix(1_000_000, 0)} }

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// stream returns the first n bytes of seed's stream, generated directly.
func stream(seed, n uint64) []byte {
	buf := make([]byte, n)
	content.Gen{Size: n, Seed: seed}.Fill(buf, 0)
	return buf
}

// wantGenerations fails unless the cache has generated want blocks so far.
func wantGenerations(t *testing.T, c *genCache, want uint64, after string) {
	t.Helper()
	if got := c.blocks.generations.Load(); got != want {
		t.Fatalf("after %s: %d blocks generated, want %d", after, got, want)
	}
}

// TestGenCRCAtManySizes compares the combined CRC of names of one seed with
// the whole-buffer CRC of content generated directly, at block boundaries
// and around them, past the cache's size, and in orders that find the
// seed's CRCs unknown, partly known and evicted.
func TestGenCRCAtManySizes(t *testing.T) {
	const seed = 77
	sizes := []uint64{0, 1, 2, 7, 8, 4095, mib - 1, mib, mib + 1, 2*mib - 1, 2 * mib, 2*mib + 1,
		3*mib + 12345, 5 * mib, 5*mib + 3, 33*mib + 5, 40 * mib, 40*mib + 1}
	data := stream(seed, 40*mib+1)
	rng := rand.New(rand.NewPCG(5, 6))
	shuffled := append([]uint64(nil), sizes...)
	rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	descending := make([]uint64, len(sizes))
	for i, size := range sizes {
		descending[len(sizes)-1-i] = size
	}
	for order, list := range map[string][]uint64{"ascending": sizes, "descending": descending, "shuffled": shuffled} {
		t.Run(order, func(t *testing.T) {
			c := newGenCache(newFakeClock().now)
			for _, size := range list {
				g := content.Gen{Size: size, Seed: seed}
				if got, want := c.crc(g), crc32.ChecksumIEEE(data[:size]); got != want {
					t.Errorf("gen:%d:%d crc %08x, want %08x", size, seed, got, want)
				}
			}
			if n := c.blocks.cached(); n > genBlocksMax {
				t.Errorf("%d blocks cached, bound %d", n, genBlocksMax)
			}
		})
	}
}

// TestGenVectorsThroughStore checks gen.vectors through Open and ReadAt.
func TestGenVectorsThroughStore(t *testing.T) {
	s := NewMem(limits.Defaults())
	defer s.Close()
	for _, v := range testvec.Lines(t, "gen.vectors") {
		name := fmt.Sprintf("gen:%s:%s", v[0], v[1])
		wantCRC, _ := strconv.ParseUint(v[2], 16, 32)
		off, _ := strconv.ParseUint(v[3], 10, 64)
		want := testvec.Hex(t, v[4])
		h, err := s.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		if h.CRC != uint32(wantCRC) {
			t.Errorf("%s crc %08x, want %08x", name, h.CRC, wantCRC)
		}
		got := make([]byte, len(want))
		if n, err := h.ReadAt(got, off); err != nil || n != len(want) {
			t.Fatalf("%s: read %d at %d: %v", name, n, off, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s at %d = %s, want %s", name, off, hex.EncodeToString(got), hex.EncodeToString(want))
		}
		h.Close()
	}
}

// TestGenNewSizeOfKnownSeedGeneratesOneBlockAtMost counts block
// generations: after a seed's first name, another size costs at most the
// block its end falls in, never a pass over the file.
func TestGenNewSizeOfKnownSeedGeneratesOneBlockAtMost(t *testing.T) {
	const seed = 9
	clock := newFakeClock()
	c := newGenCache(clock.now)
	check := func(size uint64) {
		t.Helper()
		g := content.Gen{Size: size, Seed: seed}
		if got, want := c.crc(g), g.CRC(); got != want {
			t.Fatalf("gen:%d:%d crc %08x, want %08x", size, seed, got, want)
		}
	}

	check(40 * mib) // the first name of the seed: one pass, leaving blocks 8..39 cached
	wantGenerations(t, c, 40, "the first name")
	check(3*mib + 1) // block 3 was evicted: generated again, and only it
	wantGenerations(t, c, 41, "a size ending in an evicted block")
	check(6 * mib) // whole blocks only: combined from known CRCs
	wantGenerations(t, c, 41, "a size of whole blocks")
	check(39*mib + 5) // block 39 is cached
	wantGenerations(t, c, 41, "a size ending in a cached block")

	clock.advance(genBlockIdle)
	c.expire()
	check(20*mib + 9) // nothing cached, CRCs known: one block
	wantGenerations(t, c, 42, "a size after the blocks expired")
	check(43*mib + 2) // past the known CRCs: only the blocks past them
	wantGenerations(t, c, 46, "a size past the known CRCs")
}

// TestGenReadsCopyFromBlocksTheCRCPassLeft reads a file after its CRC:
// every byte comes from the blocks the pass left, across block boundaries.
func TestGenReadsCopyFromBlocksTheCRCPassLeft(t *testing.T) {
	const seed, size = 4, 3*mib + 100
	c := newGenCache(newFakeClock().now)
	g := content.Gen{Size: size, Seed: seed}
	c.crc(g)
	wantGenerations(t, c, 4, "the CRC")
	want := stream(seed, size)
	got := make([]byte, size)
	const piece = 100_000 // not a divisor of a block: some pieces straddle two
	for off := 0; off < size; off += piece {
		c.read(g, got[off:min(off+piece, size)], uint64(off))
	}
	if !bytes.Equal(got, want) {
		t.Fatal("generated content read from blocks differs from content generated directly")
	}
	wantGenerations(t, c, 4, "reading the file")
}

// TestGenBlocksBoundedAndDroppedWhenIdle checks the cache's bound and that
// blocks unused for genBlockIdle go, so an idle server holds none.
func TestGenBlocksBoundedAndDroppedWhenIdle(t *testing.T) {
	const seed = 5
	clock := newFakeClock()
	c := newGenCache(clock.now)
	c.crc(content.Gen{Size: 40 * mib, Seed: seed})
	if n := c.blocks.cached(); n != genBlocksMax {
		t.Fatalf("%d blocks cached after a 40 MiB pass, want the bound %d", n, genBlocksMax)
	}

	clock.advance(genBlockIdle / 2)
	c.read(content.Gen{Size: 40 * mib, Seed: seed}, make([]byte, 10), 39*mib) // block 39 used again
	clock.advance(genBlockIdle / 2)
	c.expire()
	if n := c.blocks.cached(); n != 1 {
		t.Fatalf("%d blocks cached one idle time after the pass, want only the one used since", n)
	}
	clock.advance(genBlockIdle / 2)
	c.expire()
	if n := c.blocks.cached(); n != 0 {
		t.Fatalf("%d blocks cached after every block sat idle, want 0", n)
	}
}

// TestGenHeldBlockSurvivesEviction holds a block while the cache turns over:
// its memory must not be reused for another block while it is read.
func TestGenHeldBlockSurvivesEviction(t *testing.T) {
	const seed = 6
	blocks := newGenBlocks(newFakeClock().now)
	held := blocks.acquire(seed, 0)
	for k := uint64(1); k <= 2*genBlocksMax; k++ {
		blocks.release(blocks.acquire(seed, k))
	}
	if !bytes.Equal(held.data, stream(seed, mib)) {
		t.Fatal("a held block changed after its eviction")
	}
	blocks.release(held)
	if n := blocks.cached(); n != genBlocksMax {
		t.Fatalf("%d blocks cached, want the bound %d", n, genBlocksMax)
	}
}

// TestGenSeedsBounded checks that the seeds' CRCs are bounded and that a
// seed pushed out is computed again, correctly.
func TestGenSeedsBounded(t *testing.T) {
	c := newGenCache(newFakeClock().now)
	for seed := uint64(0); seed < genSeedsMax+4; seed++ {
		c.crc(content.Gen{Size: mib + seed, Seed: seed})
	}
	c.seeds.mu.Lock()
	n := len(c.seeds.entries)
	c.seeds.mu.Unlock()
	if n != genSeedsMax {
		t.Fatalf("%d seeds' CRCs kept, want the bound %d", n, genSeedsMax)
	}
	g := content.Gen{Size: 2*mib + 1, Seed: 0}
	if got, want := c.crc(g), g.CRC(); got != want {
		t.Fatalf("gen:%d:%d crc %08x, want %08x", g.Size, g.Seed, got, want)
	}
}

// TestGenConcurrentFirstReadsComputeOnce opens names of one new seed from
// many goroutines at once: each block is generated once.
func TestGenConcurrentFirstReadsComputeOnce(t *testing.T) {
	const seed = 11
	c := newGenCache(newFakeClock().now)
	data := stream(seed, 6*mib)
	var wg sync.WaitGroup
	for i := range 16 {
		size := 5*mib + uint64(i%4)*1000 // some goroutines share a name, all share the blocks
		if i%5 == 0 {
			size = uint64(i) * mib / 3 // and some need only a prefix of them
		}
		wg.Go(func() {
			if got, want := c.crc(content.Gen{Size: size, Seed: seed}), crc32.ChecksumIEEE(data[:size]); got != want {
				t.Errorf("gen:%d:%d crc %08x, want %08x", size, seed, got, want)
			}
		})
	}
	wg.Wait()
	wantGenerations(t, c, 6, "concurrent first reads of blocks 0..5")
}

// BenchmarkGenCRCNewSize64MiB is the first Read's CRC of a new 64 MiB size
// of a seed already seen: whole-pass is the former path (a pass over the
// file per name), known-seed the combined one with the block the size ends
// in cached, known-seed-cold the same with that block generated again.
// new-seed is the pass a seed's first name still costs, through the cache.
func BenchmarkGenCRCNewSize64MiB(b *testing.B) {
	const seed, size = 3, 64 * mib
	b.Run("whole-pass", func(b *testing.B) {
		b.SetBytes(size)
		for i := 0; b.Loop(); i++ {
			content.Gen{Size: size - 1 - uint64(i%mib), Seed: seed}.CRC()
		}
	})
	b.Run("new-seed", func(b *testing.B) {
		c := newGenCache(newFakeClock().now)
		b.SetBytes(size)
		for i := uint64(0); b.Loop(); i++ {
			c.crc(content.Gen{Size: size - 1, Seed: seed + 1 + i})
		}
	})
	for _, cold := range []bool{false, true} {
		name := "known-seed"
		if cold {
			name += "-cold"
		}
		b.Run(name, func(b *testing.B) {
			clock := newFakeClock()
			c := newGenCache(clock.now)
			c.crc(content.Gen{Size: size, Seed: seed})
			b.SetBytes(size)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if cold {
					b.StopTimer()
					clock.advance(genBlockIdle)
					c.expire()
					b.StartTimer()
				}
				c.crc(content.Gen{Size: size - 1 - uint64(i%mib), Seed: seed}) // a new name each time
			}
		})
	}
}
