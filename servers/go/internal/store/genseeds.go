package store

import (
	"hash/crc32"
	"sync"
)

// genSeedsMax bounds how many seeds' block CRC-32s are kept (PROTOCOL.md
// asks for 16 or more; 4 bytes per MiB each), the least recently used
// seed's being dropped first.
const genSeedsMax = 16

// seedCRCs holds the CRC-32s of a seed's first blocks. Every size needs
// all the whole blocks below it, so the known ones are always a prefix,
// extended one block at a time by one goroutine at a time.
type seedCRCs struct {
	// Guarded by genSeeds.mu. Entries below len(crcs) never change, so a
	// prefix taken under the lock can be read after it is released.
	crcs      []uint32
	extending bool // a goroutine is computing crcs[len(crcs)]
	lastTick  uint64
}

// genSeeds computes each block CRC-32 of a seed once, however many readers
// of names of that seed ask at the same time, and through the block cache,
// so the blocks the pass generates are there for the Reads that follow.
type genSeeds struct {
	blocks *genBlocks

	mu       sync.Mutex
	extended sync.Cond // signalled when a seed's prefix grows or stops growing
	entries  map[uint64]*seedCRCs
	tick     uint64
}

func newGenSeeds(blocks *genBlocks) *genSeeds {
	s := &genSeeds{blocks: blocks, entries: make(map[uint64]*seedCRCs)}
	s.extended.L = &s.mu
	return s
}

// blockCRCs returns the CRC-32s of blocks [0, n) of seed. Blocks already
// known cost nothing; while one goroutine computes the next block, others
// wait for it rather than compute it again, and each returns as soon as its
// own prefix is known.
func (s *genSeeds) blockCRCs(seed, n uint64) []uint32 {
	if n == 0 {
		return nil // a name below one block: no entry, so no seed is pushed out
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entry(seed)
	for uint64(len(e.crcs)) < n {
		if e.extending {
			s.extended.Wait()
			continue
		}
		e.extending = true
		index := uint64(len(e.crcs))
		s.mu.Unlock()
		crc := s.blockCRC(seed, index)
		s.mu.Lock()
		e.crcs = append(e.crcs, crc)
		e.extending = false
		s.extended.Broadcast()
	}
	return e.crcs[:n:n]
}

// blockCRC computes the CRC-32 of one whole block, leaving it cached.
func (s *genSeeds) blockCRC(seed, index uint64) uint32 {
	b := s.blocks.acquire(seed, index)
	defer s.blocks.release(b)
	return crc32.ChecksumIEEE(b.data)
}

// entry returns seed's CRCs, making room by dropping the least recently
// used seed. A dropped entry's goroutines still finish on it; only its
// CRCs are forgotten. s.mu is held.
func (s *genSeeds) entry(seed uint64) *seedCRCs {
	s.tick++
	if e, ok := s.entries[seed]; ok {
		e.lastTick = s.tick
		return e
	}
	if len(s.entries) >= genSeedsMax {
		var victim uint64
		oldest := s.tick
		for k, e := range s.entries {
			if e.lastTick < oldest {
				victim, oldest = k, e.lastTick
			}
		}
		delete(s.entries, victim)
	}
	e := &seedCRCs{lastTick: s.tick}
	s.entries[seed] = e
	return e
}
