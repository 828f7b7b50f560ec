/* allocstat: per-thread allocation-latency histograms and failure counts. */
#include "allocstat.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

typedef struct allocstat_block {
    _Atomic uint64_t hist[ALLOCSTAT_NBUCKETS + 1];
    _Atomic uint64_t count, sum_ns, failures;
    struct allocstat_block *next;
} allocstat_block;

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static allocstat_block *blocks;
static _Atomic uint64_t orphan_failures; /* failures of threads that could not get a block */
static _Thread_local allocstat_block *mine;

static inline void bump(_Atomic uint64_t *c, uint64_t d) {
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + d, memory_order_relaxed);
}

/* This thread's block; plain calloc, not mem_alloc: the layer must not measure itself. */
static allocstat_block *block(void) {
    if (mine) return mine;
    allocstat_block *b = calloc(1, sizeof *b);
    if (!b) return NULL;
    pthread_mutex_lock(&reg_mu);
    b->next = blocks;
    blocks = b;
    pthread_mutex_unlock(&reg_mu);
    mine = b;
    return b;
}

unsigned allocstat_bucket(uint64_t ns) {
    if (ns <= ALLOCSTAT_MIN_BOUND_NS) return 0;
    unsigned up = 64u - (unsigned)__builtin_clzll(ns - 1); /* ceil(log2 ns) */
    unsigned k = up - 4u;                                  /* 2^4 = ALLOCSTAT_MIN_BOUND_NS */
    return k > ALLOCSTAT_NBUCKETS ? ALLOCSTAT_NBUCKETS : k;
}

uint64_t allocstat_bound_ns(unsigned k) { return (uint64_t)ALLOCSTAT_MIN_BOUND_NS << k; }

void allocstat_record(uint64_t ns) {
    allocstat_block *b = block();
    if (!b) return; /* out of memory for the block: this sample goes unrecorded */
    bump(&b->hist[allocstat_bucket(ns)], 1);
    bump(&b->count, 1);
    bump(&b->sum_ns, ns);
}

void allocstat_failed(void) {
    allocstat_block *b = block();
    if (b) bump(&b->failures, 1);
    else atomic_fetch_add_explicit(&orphan_failures, 1, memory_order_relaxed);
}

void allocstat_sum(allocstat_totals *out) {
    memset(out, 0, sizeof *out);
    out->failures = atomic_load_explicit(&orphan_failures, memory_order_relaxed);
    pthread_mutex_lock(&reg_mu);
    for (allocstat_block *b = blocks; b; b = b->next) {
        for (unsigned k = 0; k <= ALLOCSTAT_NBUCKETS; k++)
            out->hist[k] += atomic_load_explicit(&b->hist[k], memory_order_relaxed);
        out->count += atomic_load_explicit(&b->count, memory_order_relaxed);
        out->sum_ns += atomic_load_explicit(&b->sum_ns, memory_order_relaxed);
        out->failures += atomic_load_explicit(&b->failures, memory_order_relaxed);
    }
    pthread_mutex_unlock(&reg_mu);
}

void allocstat_shutdown(void) {
    pthread_mutex_lock(&reg_mu);
    while (blocks) {
        allocstat_block *next = blocks->next;
        free(blocks);
        blocks = next;
    }
    pthread_mutex_unlock(&reg_mu);
    mine = NULL;
}
