// Package bufpool hands out byte buffers from size-classed sync.Pools when
// on, and fresh allocations when off: the switch the pool experiment flips.
// It counts gets and new allocations so the pool's effect shows in metrics.
package bufpool

import (
	"sort"
	"sync"
	"sync/atomic"
)

const (
	// minClass is the smallest buffer handed out; smaller requests round up
	// so tiny frames share one class.
	minClass = 512
	// stepsPerDoubling splits each power of two into this many classes, so a
	// 1 MiB chunk plus its frame header wastes a quarter, not a half.
	stepsPerDoubling = 4
)

// Pool is a set of size-classed buffer pools with a cap on what it keeps.
type Pool struct {
	enabled bool
	maxCap  int
	sizes   []int // ascending class sizes, the last ≥ maxCap
	pools   []sync.Pool
	gets    atomic.Uint64
	news    atomic.Uint64
}

// New makes a pool; buffers bigger than maxCap are never pooled (they are
// allocated fresh and dropped on Put), so one huge request cannot pin memory.
func New(enabled bool, maxCap int) *Pool {
	p := &Pool{enabled: enabled, maxCap: maxCap}
	for base := minClass; ; base *= 2 {
		done := false
		for s := 0; s < stepsPerDoubling && !done; s++ {
			size := base + base/stepsPerDoubling*s
			p.sizes = append(p.sizes, size)
			done = size >= maxCap
		}
		if done {
			break
		}
	}
	p.pools = make([]sync.Pool, len(p.sizes))
	for i := range p.pools {
		size := p.sizes[i]
		p.pools[i].New = func() any {
			p.news.Add(1)
			b := make([]byte, size)
			return &b
		}
	}
	return p
}

// Enabled reports whether buffers are reused.
func (p *Pool) Enabled() bool { return p.enabled }

// Get returns a buffer of length n. Put it back when done; never keep a
// slice of it afterwards.
func (p *Pool) Get(n int) *[]byte {
	p.gets.Add(1)
	i := p.class(n)
	if !p.enabled || n > p.maxCap || i < 0 {
		p.news.Add(1)
		b := make([]byte, n)
		return &b
	}
	bp := p.pools[i].Get().(*[]byte)
	*bp = (*bp)[:n]
	return bp
}

// Put returns a buffer. Buffers of foreign capacity or over the cap are
// dropped, as are all buffers when the pool is off.
func (p *Pool) Put(bp *[]byte) {
	if bp == nil || !p.enabled {
		return
	}
	c := cap(*bp)
	if c > p.maxCap {
		return
	}
	i := sort.SearchInts(p.sizes, c)
	if i == len(p.sizes) || p.sizes[i] != c {
		return
	}
	*bp = (*bp)[:0]
	p.pools[i].Put(bp)
}

// class is the index of the smallest class holding n bytes, -1 if none.
func (p *Pool) class(n int) int {
	i := sort.SearchInts(p.sizes, max(n, minClass))
	if i == len(p.sizes) {
		return -1
	}
	return i
}

// Gets counts Get calls.
func (p *Pool) Gets() uint64 { return p.gets.Load() }

// News counts buffers allocated fresh (pool misses, pool off, oversized).
func (p *Pool) News() uint64 { return p.news.Load() }
