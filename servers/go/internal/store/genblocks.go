package store

import (
	"sync"
	"sync/atomic"
	"time"

	"xferbench/servers/go/internal/content"
)

// Generated content is cached in blocks of one seed's stream (PROTOCOL.md,
// "Generated content"): block k is bytes [k·genBlockBytes, (k+1)·genBlockBytes)
// of every gen:<size>:<seed> name of that seed, whatever its size.
const (
	genBlockShift = 20
	genBlockBytes = 1 << genBlockShift
	// genBlocksMax bounds the cache to 32 MiB of content, as in xferd-c.
	genBlocksMax = 32
	// genBlockIdle is how long an unused block stays, so an idle server
	// holds none of them.
	genBlockIdle = 2 * time.Second
)

// genBlockKey names block index of seed's stream.
type genBlockKey struct {
	seed, index uint64
}

// genBlock is one generated block. data is written once, by the first
// acquirer inside once, and only read after that.
type genBlock struct {
	key  genBlockKey
	once sync.Once
	data []byte

	// Guarded by genBlocks.mu.
	refs     int       // acquirers that have not released it: they may still read data
	lastTick uint64    // recency, for evicting the least recently used
	lastUsed time.Time // for dropping blocks unused for genBlockIdle
}

// genBlocks keeps the recently used generated blocks, at most genBlocksMax.
// A block is generated once however many readers ask for it at the same
// time, and a block no one has used for genBlockIdle is dropped.
type genBlocks struct {
	now func() time.Time // time.Now; tests set a fake clock

	mu      sync.Mutex
	entries map[genBlockKey]*genBlock
	tick    uint64

	// generations counts blocks generated, so tests can tell a cached
	// block from one generated again.
	generations atomic.Uint64
}

func newGenBlocks(now func() time.Time) *genBlocks {
	return &genBlocks{now: now, entries: make(map[genBlockKey]*genBlock)}
}

// acquire returns block index of seed, generated, and holds it until
// release: its data stays unchanged while held, even if it is evicted.
func (c *genBlocks) acquire(seed, index uint64) *genBlock {
	key := genBlockKey{seed, index}
	c.mu.Lock()
	b, ok := c.entries[key]
	if !ok {
		b = &genBlock{key: key, data: c.makeRoom()}
		c.entries[key] = b
	}
	c.tick++
	b.lastTick = c.tick
	b.lastUsed = c.now()
	b.refs++
	c.mu.Unlock()
	b.once.Do(func() { c.generate(b) })
	return b
}

// release ends a hold taken by acquire.
func (c *genBlocks) release(b *genBlock) {
	c.mu.Lock()
	b.refs--
	c.mu.Unlock()
}

// generate fills b.data with its block. The block is the content of the
// name that ends with it, so Fill's bound on offsets holds.
func (c *genBlocks) generate(b *genBlock) {
	if b.data == nil {
		b.data = make([]byte, genBlockBytes)
	}
	end := (b.key.index + 1) << genBlockShift
	content.Gen{Size: end, Seed: b.key.seed}.Fill(b.data, b.key.index<<genBlockShift)
	c.generations.Add(1)
}

// makeRoom evicts the least recently used block when the cache is full. It
// returns the evicted block's memory for the new block when no one holds
// it: a sequential read of a file larger than the cache replaces a block per
// MiB, and reusing the memory keeps it from turning into garbage at read
// speed. nil when a new block must be allocated. c.mu is held.
func (c *genBlocks) makeRoom() []byte {
	if len(c.entries) < genBlocksMax {
		return nil
	}
	var victim *genBlock
	for _, b := range c.entries {
		if victim == nil || b.lastTick < victim.lastTick {
			victim = b
		}
	}
	delete(c.entries, victim.key)
	if victim.refs > 0 {
		return nil // its holders still read it; the collector frees it after them
	}
	return victim.data
}

// expire drops the blocks unused for genBlockIdle. Holders of a dropped
// block keep reading it; its memory goes when they release it.
func (c *genBlocks) expire() {
	deadline := c.now().Add(-genBlockIdle)
	c.mu.Lock()
	defer c.mu.Unlock()
	for key, b := range c.entries {
		if !b.lastUsed.After(deadline) {
			delete(c.entries, key)
		}
	}
}

// cached counts the blocks held (tests).
func (c *genBlocks) cached() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

// read copies bytes [off, off+len(p)) of seed's stream into p from the
// cached blocks, generating the missing ones.
func (c *genBlocks) read(seed uint64, p []byte, off uint64) {
	for len(p) > 0 {
		b := c.acquire(seed, off>>genBlockShift)
		n := copy(p, b.data[off&(genBlockBytes-1):])
		c.release(b)
		p = p[n:]
		off += uint64(n)
	}
}
