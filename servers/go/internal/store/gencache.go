package store

import (
	"hash/crc32"
	"sync"
	"time"

	"xferbench/servers/go/internal/content"
)

// genNamesMax bounds how many generated files' CRCs are remembered; the
// memo is cleared when full (a name's CRC is cheap to combine again from
// its seed's block CRCs, memory is not).
const genNamesMax = 4096

// wholeBlockCRCShift appends one whole block to a CRC-32: computed once,
// used for every block of every name.
var wholeBlockCRCShift = content.ShiftFor(genBlockBytes)

// genCache serves generated content by the rule of PROTOCOL.md, "Generated
// content": a name's CRC-32 is combined from its seed's block CRC-32s, so a
// new size of a seed already seen costs at most one block's generation and
// a combine per MiB, and Reads copy from cached blocks. Each name's CRC is
// also remembered, since every Read opens its name again.
type genCache struct {
	blocks *genBlocks
	seeds  *genSeeds

	mu    sync.Mutex
	names map[content.Gen]*genName
}

// genName is one name's CRC, computed once even when many readers ask for
// the same new name at the same time.
type genName struct {
	once sync.Once
	crc  uint32
}

func newGenCache(now func() time.Time) *genCache {
	blocks := newGenBlocks(now)
	return &genCache{
		blocks: blocks,
		seeds:  newGenSeeds(blocks),
		names:  make(map[content.Gen]*genName),
	}
}

// crc returns the CRC-32 of the whole generated file g.
func (c *genCache) crc(g content.Gen) uint32 {
	c.mu.Lock()
	e, ok := c.names[g]
	if !ok {
		if len(c.names) >= genNamesMax {
			clear(c.names)
		}
		e = &genName{}
		c.names[g] = e
	}
	c.mu.Unlock()
	e.once.Do(func() { e.crc = c.combinedCRC(g) })
	return e.crc
}

// combinedCRC combines g's CRC-32 from the CRC-32s of its seed's whole
// blocks below g.Size and of the part of the next block up to g.Size.
func (c *genCache) combinedCRC(g content.Gen) uint32 {
	whole := g.Size >> genBlockShift
	rest := g.Size & (genBlockBytes - 1)
	var crc uint32
	for _, blockCRC := range c.seeds.blockCRCs(g.Seed, whole) {
		crc = wholeBlockCRCShift.Combine(crc, blockCRC)
	}
	if rest == 0 {
		return crc
	}
	b := c.blocks.acquire(g.Seed, whole)
	defer c.blocks.release(b)
	return content.CombineCRC(crc, crc32.ChecksumIEEE(b.data[:rest]), rest)
}

// read copies bytes [off, off+len(p)) of g into p; the caller keeps them
// within g.Size.
func (c *genCache) read(g content.Gen, p []byte, off uint64) {
	c.blocks.read(g.Seed, p, off)
}

// expire drops the generated blocks unused for genBlockIdle, so an idle
// server holds none; the CRCs stay, being small.
func (c *genCache) expire() { c.blocks.expire() }
