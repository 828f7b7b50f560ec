/* pool: a per-thread slab/free-list pool for chunk buffers and protobuf-c decoding (--alloc pool).
 *
 * Each thread owns a cache of free blocks per size class (quarter-power-of-two classes, 64 B ...
 * POOL_MAX_BLOCK). A block freed on its owner thread goes back to the owner's free list; a block freed
 * on another thread is collected in the freeing thread's batch for that owner and handed back in
 * batches of POOL_REMOTE_BATCH under the owner's lock (or when the freeing thread calls
 * pool_thread_flush before it blocks). Free lists are capped, so idle memory is bounded. Requests
 * above POOL_MAX_BLOCK go straight to malloc. */
#ifndef XFERD_POOL_H
#define XFERD_POOL_H

#include <stddef.h>
#include <stdint.h>

#define POOL_MAX_THREADS 256        /* caches (threads) the pool can register */
#define POOL_REMOTE_BATCH 16        /* foreign frees handed back to an owner at once */
#define POOL_CLASS_BYTES (16u << 20) /* free bytes a thread keeps per size class ... */
#define POOL_CLASS_MIN_BLOCKS 4      /* ... but at least this many blocks */
#define POOL_CLASS_MAX_BLOCKS 4096   /* ... and at most this many */
#define POOL_MAX_BLOCK (32u << 20)   /* largest pooled block (header included) */

void *pool_alloc(size_t n);
void pool_free(void *p);

/* Hands this thread's pending foreign frees back to their owners and takes in frees others returned
 * to it. Call before a thread blocks or exits. */
void pool_thread_flush(void);

typedef struct {
    uint64_t gets;      /* pool_alloc calls */
    uint64_t news;      /* of which needed fresh memory from malloc */
    int64_t allocated;  /* bytes in blocks handed out and not yet freed */
    int64_t resident;   /* bytes the pool holds from malloc (handed out + cached free) */
    uint64_t remote_frees; /* frees of a block owned by another thread (cross-thread frees) */
    uint64_t lock_contended; /* times a thread found an owner's remote-list lock held and waited */
} pool_stats;

/* Sums every thread's counters. */
void pool_stats_get(pool_stats *out);

/* Frees every cached block and every cache; only once no other thread uses the pool. */
void pool_destroy(void);

#endif
