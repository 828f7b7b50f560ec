/* pool: per-thread slab caches with batched cross-thread frees. */
#include "pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "perthread.h"

#define POOL_MAGIC 0x706f6f6cu /* "pool" */
#define POOL_LARGE 0xffffffffu /* class of a block that bypasses the caches */
#define POOL_MIN_BLOCK 64u
#define POOL_NCLASSES 80       /* enough quarter-power classes to reach POOL_MAX_BLOCK */

typedef struct pool_cache pool_cache;

typedef struct {
    pool_cache *owner;
    uint32_t cls;
    uint32_t magic;
} pool_hdr; /* 16 bytes: payload stays 16-byte aligned */

typedef struct free_block { struct free_block *next; } free_block;

struct pool_cache {
    perthread_link link; /* first: the cache is a perthread.h block; link.id indexes the batch arrays */
    free_block *free[POOL_NCLASSES];
    uint32_t nfree[POOL_NCLASSES];
    /* foreign frees waiting to go back to their owner, by owner id */
    free_block *batch_head[POOL_MAX_THREADS];
    free_block *batch_tail[POOL_MAX_THREADS];
    uint32_t batch_n[POOL_MAX_THREADS];
    /* owners with a batch begun since the last flush, so a flush with nothing pending costs nothing */
    pool_cache *pending[POOL_MAX_THREADS];
    bool is_pending[POOL_MAX_THREADS];
    unsigned npending;
    /* blocks other threads returned to this one */
    pthread_mutex_t rmu;
    free_block *remote;
    _Atomic uint32_t nremote;
    /* counters written by this thread only */
    _Atomic uint64_t gets, news, remote_frees, lock_contended;
    _Atomic int64_t allocated, resident;
};

static perthread_reg reg = PERTHREAD_REG_INIT(POOL_MAX_THREADS);
static _Thread_local pool_cache *tc;
/* frees of pool blocks by threads with no cache of their own (always cross-thread) */
static _Atomic uint64_t orphan_remote_frees;

/* Class index and block size (header included) for a block of at least n bytes. */
static uint32_t size_class(size_t n, size_t *block) {
    if (n <= POOL_MIN_BLOCK) { *block = POOL_MIN_BLOCK; return 0; }
    unsigned k = 63u - (unsigned)__builtin_clzll((unsigned long long)(n - 1)); /* n-1 in [2^k, 2^(k+1)) */
    size_t sub = ((n - 1) >> (k - 2)) & 3;
    *block = (size_t)(5 + sub) << (k - 2);
    return 1 + (k - 6) * 4 + (uint32_t)sub;
}

static size_t class_block(uint32_t cls) {
    if (cls == 0) return POOL_MIN_BLOCK;
    unsigned k = (cls - 1) / 4 + 6, sub = (cls - 1) % 4;
    return (size_t)(5 + sub) << (k - 2);
}

static uint32_t class_cap(uint32_t cls) {
    size_t b = class_block(cls), n = POOL_CLASS_BYTES / b;
    if (n < POOL_CLASS_MIN_BLOCKS) n = POOL_CLASS_MIN_BLOCKS;
    if (n > POOL_CLASS_MAX_BLOCKS) n = POOL_CLASS_MAX_BLOCKS;
    return (uint32_t)n;
}

static pool_cache *cache_get(void) {
    if (tc) return tc;
    pool_cache *c = perthread_join(&reg, sizeof *c); /* NULL past POOL_MAX_THREADS caches */
    if (!c) return NULL;
    pthread_mutex_init(&c->rmu, NULL); /* before any block it owns exists, so before anyone locks it */
    tc = c;
    return c;
}

/* Takes an owner's remote-list lock; c (the caller's cache) counts the times it was already held, the
 * pool's one contention point. A trylock first costs nothing more when the lock is free. */
static void rmu_lock(pool_cache *c, pool_cache *o) {
    if (pthread_mutex_trylock(&o->rmu) == 0) return;
    if (c) perthread_add(&c->lock_contended, 1);
    pthread_mutex_lock(&o->rmu);
}

static inline pool_hdr *hdr_of(free_block *b) { return (pool_hdr *)((char *)b - sizeof(pool_hdr)); }

/* Puts a block owned by c (the calling thread's cache) on its free list, or frees it when full. */
static void local_put(pool_cache *c, pool_hdr *h) {
    uint32_t cls = h->cls;
    if (c->nfree[cls] >= class_cap(cls)) {
        perthread_add_signed(&c->resident, -(int64_t)class_block(cls));
        free(h);
        return;
    }
    free_block *b = (free_block *)(h + 1);
    b->next = c->free[cls];
    c->free[cls] = b;
    c->nfree[cls]++;
}

/* Takes every block other threads returned to c. */
static void drain_remote(pool_cache *c) {
    if (atomic_load_explicit(&c->nremote, memory_order_acquire) == 0) return;
    rmu_lock(c, c);
    free_block *list = c->remote;
    c->remote = NULL;
    atomic_store_explicit(&c->nremote, 0, memory_order_release);
    pthread_mutex_unlock(&c->rmu);
    while (list) {
        free_block *next = list->next;
        local_put(c, hdr_of(list));
        list = next;
    }
}

/* Hands c's batch of blocks owned by o back to o. */
static void flush_batch(pool_cache *c, pool_cache *o) {
    unsigned id = o->link.id;
    if (!c->batch_n[id]) return;
    rmu_lock(c, o);
    c->batch_tail[id]->next = o->remote;
    o->remote = c->batch_head[id];
    atomic_fetch_add_explicit(&o->nremote, c->batch_n[id], memory_order_release);
    pthread_mutex_unlock(&o->rmu);
    c->batch_head[id] = c->batch_tail[id] = NULL;
    c->batch_n[id] = 0;
}

void *pool_alloc(size_t n) {
    pool_cache *c = cache_get();
    size_t need = n + sizeof(pool_hdr);
    if (need < n) return NULL;
    if (!c || need > POOL_MAX_BLOCK) {
        pool_hdr *h = malloc(need);
        if (!h) return NULL;
        h->cls = POOL_LARGE;
        h->magic = POOL_MAGIC;
        /* large blocks are counted by the allocating thread's cache when it has one */
        if (c) {
            perthread_add(&c->gets, 1);
            perthread_add(&c->news, 1);
            perthread_add_signed(&c->allocated, (int64_t)need);
            perthread_add_signed(&c->resident, (int64_t)need);
        }
        /* remember the size for the counters at free time in the class slot's place */
        h->owner = (pool_cache *)(uintptr_t)need;
        return h + 1;
    }
    size_t block;
    uint32_t cls = size_class(need, &block);
    perthread_add(&c->gets, 1);
    perthread_add_signed(&c->allocated, (int64_t)block);
    if (!c->free[cls]) drain_remote(c);
    free_block *b = c->free[cls];
    if (b) {
        c->free[cls] = b->next;
        c->nfree[cls]--;
        return b;
    }
    pool_hdr *h = malloc(block);
    if (!h) {
        perthread_add_signed(&c->allocated, -(int64_t)block);
        return NULL;
    }
    perthread_add(&c->news, 1);
    perthread_add_signed(&c->resident, (int64_t)block);
    h->owner = c;
    h->cls = cls;
    h->magic = POOL_MAGIC;
    return h + 1;
}

void pool_free(void *p) {
    if (!p) return;
    pool_hdr *h = (pool_hdr *)p - 1;
    if (h->magic != POOL_MAGIC) abort(); /* not a pool block: a bug, never continue with a corrupt heap */
    pool_cache *c = cache_get();
    if (h->cls == POOL_LARGE) {
        int64_t need = (int64_t)(uintptr_t)h->owner;
        if (c) {
            perthread_add_signed(&c->allocated, -need);
            perthread_add_signed(&c->resident, -need);
        }
        h->magic = 0;
        free(h);
        return;
    }
    size_t block = class_block(h->cls);
    pool_cache *o = h->owner;
    if (!c) { /* no cache for this thread: hand the block straight back to its owner */
        free_block *b = (free_block *)p;
        atomic_fetch_add_explicit(&orphan_remote_frees, 1, memory_order_relaxed);
        pthread_mutex_lock(&o->rmu);
        b->next = o->remote;
        o->remote = b;
        atomic_fetch_add_explicit(&o->nremote, 1, memory_order_release);
        pthread_mutex_unlock(&o->rmu);
        return;
    }
    perthread_add_signed(&c->allocated, -(int64_t)block);
    if (o == c) {
        local_put(c, h);
        return;
    }
    /* a foreign block: batch it for its owner (it stays resident: the pool still holds it) */
    perthread_add(&c->remote_frees, 1);
    unsigned oid = o->link.id;
    free_block *b = (free_block *)p;
    b->next = NULL;
    if (c->batch_tail[oid]) c->batch_tail[oid]->next = b;
    else c->batch_head[oid] = b;
    c->batch_tail[oid] = b;
    if (!c->is_pending[oid]) {
        c->is_pending[oid] = true;
        c->pending[c->npending++] = o;
    }
    if (++c->batch_n[oid] >= POOL_REMOTE_BATCH) flush_batch(c, o);
}

void pool_thread_flush(void) {
    pool_cache *c = tc;
    if (!c) return;
    /* Called each time a thread is about to block, so the common case (nothing pending) must stay a few
     * loads: no registry lock, no walk over every cache (callgrind showed this at 10% of an echo's
     * instructions under --alloc pool when it did both). */
    for (unsigned i = 0; i < c->npending; i++) {
        pool_cache *o = c->pending[i];
        c->is_pending[o->link.id] = false;
        flush_batch(c, o);
    }
    c->npending = 0;
    drain_remote(c);
}

static void add_cache(void *block, void *sum) {
    pool_cache *c = block;
    pool_stats *out = sum;
    out->gets += perthread_load(&c->gets);
    out->news += perthread_load(&c->news);
    out->remote_frees += perthread_load(&c->remote_frees);
    out->lock_contended += perthread_load(&c->lock_contended);
    out->allocated += atomic_load_explicit(&c->allocated, memory_order_relaxed);
    out->resident += atomic_load_explicit(&c->resident, memory_order_relaxed);
}

void pool_stats_get(pool_stats *out) {
    memset(out, 0, sizeof *out);
    out->remote_frees = atomic_load_explicit(&orphan_remote_frees, memory_order_relaxed);
    perthread_each(&reg, add_cache, out);
}

static void free_list(free_block *b) {
    while (b) {
        free_block *next = b->next;
        free(hdr_of(b));
        b = next;
    }
}

/* Frees every block a cache holds: its batches for other owners (a block goes back to malloc, never to its
 * owner, so the order caches are freed in does not matter), its free lists and what others returned to it. */
static void cache_free_blocks(void *block) {
    pool_cache *c = block;
    for (unsigned j = 0; j < POOL_MAX_THREADS; j++) free_list(c->batch_head[j]);
    for (unsigned k = 0; k < POOL_NCLASSES; k++) free_list(c->free[k]);
    free_list(c->remote);
    pthread_mutex_destroy(&c->rmu);
}

void pool_destroy(void) {
    perthread_clear(&reg, cache_free_blocks);
    tc = NULL;
}
