package store

import (
	"bytes"
	"fmt"
	"sync"

	"xferbench/servers/go/internal/limits"
)

// NewMem makes a store that keeps files in memory.
func NewMem(lim limits.Limits) *Store { return newStore(lim, memBackend{}) }

type memBackend struct{}

func (memBackend) describe() string { return "mem" }

func (memBackend) close() {}

func (memBackend) stage(_, size, chunkSize uint64) (stager, error) {
	return &memStager{chunkSize: chunkSize, size: size, chunks: make(map[uint64][]byte)}, nil
}

func (memBackend) load(name string) (Info, source, error) {
	return Info{}, nil, notFound(name)
}

// memStager keeps each chunk as its own slice: nothing is allocated for
// bytes not yet received, and commit needs no copy.
type memStager struct {
	chunkSize uint64
	size      uint64
	mu        sync.Mutex
	chunks    map[uint64][]byte
}

func (m *memStager) WriteAt(pieces [][]byte, off uint64) error {
	c := bytes.Join(pieces, nil) // one allocation of the chunk's size, owned by the store
	m.mu.Lock()
	m.chunks[off/m.chunkSize] = c
	m.mu.Unlock()
	return nil
}

func (m *memStager) Publish(name string) (source, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := (m.size + m.chunkSize - 1) / m.chunkSize
	src := &memSource{chunkSize: m.chunkSize, chunks: make([][]byte, n)}
	for i := range src.chunks {
		c, ok := m.chunks[uint64(i)]
		if !ok {
			return nil, fmt.Errorf("chunk %d of %q missing at publish", i, name)
		}
		src.chunks[i] = c
	}
	m.chunks = nil
	return src, nil
}

func (m *memStager) Discard() {
	m.mu.Lock()
	m.chunks = nil
	m.mu.Unlock()
}

// memSource is an immutable committed file made of its upload's chunks.
type memSource struct {
	chunkSize uint64
	chunks    [][]byte
}

func (m *memSource) ReadAt(p []byte, off int64) (int, error) {
	n := 0
	for n < len(p) {
		at := uint64(off) + uint64(n)
		i := at / m.chunkSize
		if i >= uint64(len(m.chunks)) {
			return n, fmt.Errorf("read past the end at offset %d", at)
		}
		n += copy(p[n:], m.chunks[i][at%m.chunkSize:])
	}
	return n, nil
}

// view returns the n bytes at off in place when one chunk holds them all:
// a committed version never changes, and the garbage collector keeps it
// alive while a reply still points into it.
func (m *memSource) view(off uint64, n int) ([]byte, bool) {
	i := off / m.chunkSize
	if i >= uint64(len(m.chunks)) {
		return nil, false
	}
	c := m.chunks[i][off%m.chunkSize:]
	if n > len(c) {
		return nil, false
	}
	return c[:n:n], true
}

// open returns the source itself: memory needs no descriptor.
func (m *memSource) open(string) (reader, error) { return m, nil }

func (m *memSource) Close() error { return nil }
