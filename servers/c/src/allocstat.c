/* allocstat: per-thread allocation-latency histograms and failure counts in the perthread registry. */
#include "allocstat.h"

#include <stdatomic.h>
#include <string.h>

#include "perthread.h"

typedef struct {
    perthread_link link; /* first: the block is perthread.h's */
    _Atomic uint64_t hist[ALLOCSTAT_NBUCKETS + 1];
    _Atomic uint64_t count, sum_ns, failures;
} allocstat_block;

static perthread_reg reg = PERTHREAD_REG_INIT(0);
static _Atomic uint64_t orphan_failures; /* failures of threads that could not get a block */
static _Thread_local allocstat_block *mine;

/* This thread's block (perthread_join allocates with calloc: the layer must not measure itself). */
static allocstat_block *my_block(void) {
    if (!mine) mine = perthread_join(&reg, sizeof *mine);
    return mine;
}

unsigned allocstat_bucket(uint64_t ns) {
    if (ns <= ALLOCSTAT_MIN_BOUND_NS) return 0;
    unsigned up = 64u - (unsigned)__builtin_clzll(ns - 1); /* ceil(log2 ns) */
    unsigned k = up - 4u;                                  /* 2^4 = ALLOCSTAT_MIN_BOUND_NS */
    return k > ALLOCSTAT_NBUCKETS ? ALLOCSTAT_NBUCKETS : k;
}

uint64_t allocstat_bound_ns(unsigned k) { return (uint64_t)ALLOCSTAT_MIN_BOUND_NS << k; }

void allocstat_record(uint64_t ns) {
    allocstat_block *b = my_block();
    if (!b) return; /* out of memory for the block: this sample goes unrecorded */
    perthread_add(&b->hist[allocstat_bucket(ns)], 1);
    perthread_add(&b->count, 1);
    perthread_add(&b->sum_ns, ns);
}

void allocstat_failed(void) {
    allocstat_block *b = my_block();
    if (b) perthread_add(&b->failures, 1);
    else atomic_fetch_add_explicit(&orphan_failures, 1, memory_order_relaxed);
}

static void add_block(void *block, void *sum) {
    allocstat_block *b = block;
    allocstat_totals *out = sum;
    for (unsigned k = 0; k <= ALLOCSTAT_NBUCKETS; k++) out->hist[k] += perthread_load(&b->hist[k]);
    out->count += perthread_load(&b->count);
    out->sum_ns += perthread_load(&b->sum_ns);
    out->failures += perthread_load(&b->failures);
}

void allocstat_sum(allocstat_totals *out) {
    memset(out, 0, sizeof *out);
    out->failures = atomic_load_explicit(&orphan_failures, memory_order_relaxed);
    perthread_each(&reg, add_block, out);
}

void allocstat_shutdown(void) {
    perthread_clear(&reg, NULL);
    mine = NULL;
}
