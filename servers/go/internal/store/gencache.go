package store

import (
	"sync"

	"xferbench/servers/go/internal/content"
)

// genCacheMax bounds how many generated files' CRCs are remembered; the
// cache is cleared when full (names are cheap to recompute, memory is not).
const genCacheMax = 4096

// genCache computes each generated file's CRC once, even when many readers
// ask for the same new name at the same time.
type genCache struct {
	mu      sync.Mutex
	entries map[content.Gen]*genEntry
}

type genEntry struct {
	once sync.Once
	crc  uint32
}

func newGenCache() *genCache {
	return &genCache{entries: make(map[content.Gen]*genEntry)}
}

func (c *genCache) crc(g content.Gen) uint32 {
	c.mu.Lock()
	e, ok := c.entries[g]
	if !ok {
		if len(c.entries) >= genCacheMax {
			clear(c.entries)
		}
		e = &genEntry{}
		c.entries[g] = e
	}
	c.mu.Unlock()
	e.once.Do(func() { e.crc = g.CRC() })
	return e.crc
}
