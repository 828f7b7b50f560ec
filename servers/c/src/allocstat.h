/* allocstat: what the allocator layer (mem.h) measures of itself under --metrics on: a sampled latency
 * histogram of single allocations and the count of failed ones. Per-thread blocks (perthread.h), summed at
 * scrape time, like stats.h.
 *
 * The histogram times mem_alloc, i.e. the pool under --alloc pool and malloc (whichever library serves it)
 * otherwise: one allocation in every ALLOCSTAT sample interval is timed with CLOCK_MONOTONIC, so the cost
 * stays two vDSO clock reads per N allocations. */
#ifndef XFERD_ALLOCSTAT_H
#define XFERD_ALLOCSTAT_H

#include <stdint.h>

/* Bucket upper bounds in nanoseconds: 16, 32, ... 2^20 (about 1 ms); +Inf is the extra slot. */
#define ALLOCSTAT_NBUCKETS 17
#define ALLOCSTAT_MIN_BOUND_NS 16u
#define ALLOCSTAT_DEFAULT_SAMPLE 64u    /* --alloc-sample default: time 1 allocation in 64 */
#define ALLOCSTAT_MAX_SAMPLE (1u << 24) /* largest --alloc-sample */

typedef struct {
    uint64_t hist[ALLOCSTAT_NBUCKETS + 1]; /* per bucket, not cumulative */
    uint64_t count, sum_ns;                /* timed allocations and their total time */
    uint64_t failures;                     /* allocations that returned NULL */
} allocstat_totals;

/* The bucket an allocation of ns nanoseconds falls in (ALLOCSTAT_NBUCKETS: +Inf). */
unsigned allocstat_bucket(uint64_t ns);
/* Upper bound of bucket k in nanoseconds. */
uint64_t allocstat_bound_ns(unsigned k);

void allocstat_record(uint64_t ns);
void allocstat_failed(void);

/* Sums every thread's block (blocks outlive their threads). */
void allocstat_sum(allocstat_totals *out);

/* Frees every block; only once no thread allocates any more. */
void allocstat_shutdown(void);

#endif
