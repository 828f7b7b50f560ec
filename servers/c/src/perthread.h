/* perthread: the registry of per-thread counter blocks, memcached's pattern. Each thread allocates its own
 * block on first use and is the only one to write it (relaxed atomics, no locked instruction, no shared cache
 * line per call); a reader sums every block under the registry's lock at scrape time. Blocks outlive their
 * threads (nothing counted is lost when one ends) and are freed together at shutdown. stats, allocstat, mem
 * and the pool each keep one registry. */
#ifndef XFERD_PERTHREAD_H
#define XFERD_PERTHREAD_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* The first member of every block. */
typedef struct perthread_link {
    struct perthread_link *next;
    unsigned id; /* 0, 1, 2 ... in the order blocks joined (since the last perthread_clear) */
} perthread_link;

typedef struct {
    pthread_mutex_t mu;
    perthread_link *head;
    unsigned count; /* blocks joined: the next one's id */
    unsigned max;   /* at most this many blocks; 0: no limit */
} perthread_reg;

#define PERTHREAD_REG_INIT(limit) {PTHREAD_MUTEX_INITIALIZER, NULL, 0, (limit)}

/* A new zeroed block of size bytes (a struct whose first member is a perthread_link), registered. NULL when
 * out of memory or the registry holds max blocks already. Plain calloc, never mem_alloc: the allocator layer
 * must not count or time its own bookkeeping. */
void *perthread_join(perthread_reg *r, size_t size);

/* Calls fn on every block under the registry's lock (blocks of ended threads included). */
void perthread_each(perthread_reg *r, void (*fn)(void *block, void *arg), void *arg);

/* Calls fini (when not NULL) on every block, frees them all and restarts the ids at 0; only once no thread
 * writes its block any more. Each thread's own pointer to its block is its module's to forget. */
void perthread_clear(perthread_reg *r, void (*fini)(void *block));

/* Adds d to a counter only the calling thread writes: a relaxed load and store, not an atomic add. */
static inline void perthread_add(_Atomic uint64_t *c, uint64_t d) {
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + d, memory_order_relaxed);
}

/* The same for a signed counter (the pool's byte gauges go down as well as up). */
static inline void perthread_add_signed(_Atomic int64_t *c, int64_t d) {
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + d, memory_order_relaxed);
}

/* Reads a counter of another thread's block (under perthread_each). */
static inline uint64_t perthread_load(_Atomic uint64_t *c) { return atomic_load_explicit(c, memory_order_relaxed); }

#endif
