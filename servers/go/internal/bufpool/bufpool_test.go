package bufpool

import (
	"runtime/debug"
	"testing"
)

func TestOffAlwaysAllocates(t *testing.T) {
	p := New(false, 1<<20)
	for i := 0; i < 10; i++ {
		b := p.Get(1000)
		if len(*b) != 1000 {
			t.Fatalf("len = %d", len(*b))
		}
		p.Put(b)
	}
	if p.Gets() != 10 || p.News() != 10 {
		t.Fatalf("gets=%d news=%d, want 10 10", p.Gets(), p.News())
	}
}

func TestOnReuses(t *testing.T) {
	// A GC between Put and Get may empty a sync.Pool; keep it out of the way.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	p := New(true, 1<<20)
	for i := 0; i < 100; i++ {
		b := p.Get(70000)
		if len(*b) != 70000 || cap(*b) < 70000 {
			t.Fatalf("len=%d cap=%d", len(*b), cap(*b))
		}
		p.Put(b)
	}
	if p.Gets() != 100 {
		t.Fatalf("gets = %d", p.Gets())
	}
	// Per-P caches may miss once per P the goroutine ran on, and under the
	// race detector sync.Pool drops a quarter of Puts on purpose; a pool
	// that did not reuse would show 100.
	if p.News() > 50 {
		t.Fatalf("news = %d, pool did not reuse", p.News())
	}
}

func TestCapEnforced(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	p := New(true, 4096)
	for i := 0; i < 5; i++ {
		b := p.Get(5000) // over the cap: fresh every time, never kept
		p.Put(b)
	}
	if p.News() != 5 {
		t.Fatalf("news = %d, want 5 (oversized buffers must not be pooled)", p.News())
	}
	foreign := make([]byte, 1000) // not a class size: dropped
	p.Put(&foreign)
	b := p.Get(1000)
	if cap(*b) == 1000 {
		t.Fatal("pool kept a buffer of foreign capacity")
	}
}

func TestClassesWasteAtMostAQuarter(t *testing.T) {
	p := New(true, 8<<20)
	for _, n := range []int{1, 600, 1<<20 + 30, 3 << 20, 8 << 20} {
		b := p.Get(n)
		if c := cap(*b); c < n || (n > minClass && c > n+n/4+1) {
			t.Errorf("Get(%d) cap %d", n, c)
		}
		p.Put(b)
	}
}

func TestLeases(t *testing.T) {
	p := New(true, 1<<16)
	l := NewLeases(p)
	key := new(int)
	l.Hold(key, p.Get(100))
	if l.Len() != 1 {
		t.Fatal("not held")
	}
	l.Release(key)
	l.Release(key) // second release is a no-op
	if l.Len() != 0 {
		t.Fatal("not released")
	}
}
