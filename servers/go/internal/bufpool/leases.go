package bufpool

import "sync"

// Leases ties a pooled buffer to the reply that refers to it, so the
// transport returns the buffer only after it has encoded the reply.
type Leases struct {
	pool *Pool
	mu   sync.Mutex
	held map[any]*[]byte
}

// NewLeases makes an empty lease table over pool.
func NewLeases(pool *Pool) *Leases {
	return &Leases{pool: pool, held: make(map[any]*[]byte)}
}

// Hold records that key's encoding still needs b.
func (l *Leases) Hold(key any, b *[]byte) {
	l.mu.Lock()
	l.held[key] = b
	l.mu.Unlock()
}

// Release returns the buffer held for key, if any, to the pool.
func (l *Leases) Release(key any) {
	l.mu.Lock()
	b, ok := l.held[key]
	delete(l.held, key)
	l.mu.Unlock()
	if ok {
		l.pool.Put(b)
	}
}

// Len counts buffers still held (for tests and leak checks).
func (l *Leases) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.held)
}
