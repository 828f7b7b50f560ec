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

func TestCombineCRC(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 200; i++ {
		a := make([]byte, rng.IntN(3000))
		b := make([]byte, rng.IntN(3000))
		for j := range a {
			a[j] = byte(rng.Uint32())
		}
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		want := crc32.ChecksumIEEE(append(append([]byte{}, a...), b...))
		got := CombineCRC(crc32.ChecksumIEEE(a), crc32.ChecksumIEEE(b), uint64(len(b)))
		if got != want {
			t.Fatalf("combine(%d, %d bytes) = %08x, want %08x", len(a), len(b), got, want)
		}
	}
	if crc32.ChecksumIEEE([]byte("123456789")) != 0xcbf43926 {
		t.Fatal("check value")
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
