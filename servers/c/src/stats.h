/* stats: per-thread request counters and latency histograms (summed for /metrics), plus the
 * server-wide gauges. Each thread writes only its own block (perthread.h), memcached-style. */
#ifndef XFERD_STATS_H
#define XFERD_STATS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "method.h"
#include "perthread.h"
#include "xerr.h"

#define STATS_NBUCKETS 37 /* PROTOCOL.md's bucket bounds; +Inf is the extra slot */

extern const double stats_bounds[STATS_NBUCKETS];
extern const char *const stats_bound_text[STATS_NBUCKETS];

typedef struct {
    perthread_link link; /* first: the block is perthread.h's */
    _Atomic uint64_t requests[M__COUNT][XERR__COUNT];
    _Atomic uint64_t hist[M__COUNT][STATS_NBUCKETS + 1]; /* per bucket, not cumulative */
    _Atomic uint64_t sum_ns[M__COUNT];
    _Atomic uint64_t bytes_upload, bytes_download;
} stats_block;

/* Server-wide gauges. */
extern _Atomic int64_t stats_connections;
extern _Atomic int64_t stats_inflight;
/* Connections admitted since start (refused ones over --max-conns are not): its rate is connections/s. */
extern _Atomic uint64_t stats_accepted;

/* --metrics on|off: false leaves the request path without clock reads or counter writes (the caller
 * checks it before monotime_ns / stats_record). Set once before any thread starts, read-only after. */
extern bool stats_enabled;

/* Records one call from this thread. */
void stats_record(method_id m, xerr_code code, uint64_t dur_ns, uint64_t up_bytes, uint64_t down_bytes);

/* Sums every thread's block into out (plain values in the same layout). */
void stats_sum(stats_block *out);

/* Frees every block; only once no thread records any more. */
void stats_shutdown(void);

#endif
