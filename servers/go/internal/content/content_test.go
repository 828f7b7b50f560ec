package content

import (
	"encoding/hex"
	"hash/crc32"
	"math/rand/v2"
	"strconv"
	"testing"

	"xferbench/servers/go/internal/testvec"
)

const maxFileSize = 1 << 30

func TestGenVectors(t *testing.T) {
	for _, v := range testvec.Lines(t, "gen.vectors") {
		size, _ := strconv.ParseUint(v[0], 10, 64)
		seed, _ := strconv.ParseUint(v[1], 10, 64)
		wantCRC, _ := strconv.ParseUint(v[2], 16, 32)
		off, _ := strconv.ParseUint(v[3], 10, 64)
		want := testvec.Hex(t, v[4])
		g := Gen{Size: size, Seed: seed}
		if got := g.CRC(); got != uint32(wantCRC) {
			t.Errorf("gen:%d:%d crc = %08x, want %08x", size, seed, got, wantCRC)
		}
		got := make([]byte, len(want))
		g.Fill(got, off)
		if hex.EncodeToString(got) != hex.EncodeToString(want) {
			t.Errorf("gen:%d:%d at %d = %x, want %x", size, seed, off, got, want)
		}
	}
}

func TestParseGen(t *testing.T) {
	good := map[string]Gen{
		"gen:0:0":                    {0, 0},
		"gen:100:42":                 {100, 42},
		"gen:1:18446744073709551615": {1, 1<<64 - 1},
		"gen:1073741824:7":           {1 << 30, 7},
	}
	for name, want := range good {
		got, err := ParseGen(name, maxFileSize)
		if err != nil || got != want {
			t.Errorf("ParseGen(%q) = %v, %v; want %v", name, got, err, want)
		}
	}
	bad := []string{"gen:", "gen:1", "gen:01:2", "gen:1:02", "gen:+1:2", "gen:-1:2",
		"gen:1:18446744073709551616", "gen:1073741825:0", "gen:1:2:3", "gen: 1:2", "gen:a:1"}
	for _, name := range bad {
		if _, err := ParseGen(name, maxFileSize); err == nil {
			t.Errorf("ParseGen(%q) accepted", name)
		}
	}
}

// randomBytes returns n bytes from rng.
func randomBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for j := range b {
		b[j] = byte(rng.Uint32())
	}
	return b
}

// TestCombineCRC checks the combination against a whole-buffer CRC-32 over
// splits of random buffers: every split of the shortest ones (empty and
// one-byte pieces on either side), the ends and a random point of longer
// ones, and pieces past 1 MiB like the generated blocks.
func TestCombineCRC(t *testing.T) {
	if crc32.ChecksumIEEE([]byte("123456789")) != 0xcbf43926 {
		t.Fatal("check value")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	check := func(buf []byte, split int) {
		t.Helper()
		a, b := buf[:split], buf[split:]
		want := crc32.ChecksumIEEE(buf)
		got := CombineCRC(crc32.ChecksumIEEE(a), crc32.ChecksumIEEE(b), uint64(len(b)))
		if got != want {
			t.Fatalf("combine(%d, %d bytes) = %08x, want %08x", len(a), len(b), got, want)
		}
	}
	for n := 0; n <= 3; n++ {
		buf := randomBytes(rng, n)
		for split := 0; split <= n; split++ {
			check(buf, split)
		}
	}
	for i := 0; i < 200; i++ {
		n := 2 + rng.IntN(6000)
		if i%20 == 0 {
			n = 1<<20 + rng.IntN(1<<20)
		}
		buf := randomBytes(rng, n)
		for _, split := range []int{0, 1, n - 1, n, rng.IntN(n + 1)} {
			check(buf, split)
		}
	}
}

// TestCRCShift combines runs of equal pieces with one precomputed shift, as
// the store combines a seed's block CRCs.
func TestCRCShift(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, piece := range []int{0, 1, 7, 4096, 1 << 20} {
		for _, pieces := range []int{0, 1, 2, 5} {
			buf := randomBytes(rng, piece*pieces)
			shift := ShiftFor(uint64(piece))
			var got uint32
			for k := 0; k < pieces; k++ {
				got = shift.Combine(got, crc32.ChecksumIEEE(buf[k*piece:(k+1)*piece]))
			}
			if want := crc32.ChecksumIEEE(buf); got != want {
				t.Fatalf("%d pieces of %d bytes: %08x, want %08x", pieces, piece, got, want)
			}
		}
	}
}

func BenchmarkGenFill(b *testing.B) {
	buf := make([]byte, 1<<20)
	g := Gen{Size: 1 << 30, Seed: 9}
	b.SetBytes(int64(len(buf)))
	for i := 0; i < b.N; i++ {
		g.Fill(buf, uint64(i)*3)
	}
}
