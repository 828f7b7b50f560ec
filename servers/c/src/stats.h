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

/* The listeners a connection can come through: the plaintext frame listener and the TLS one. */
typedef enum { LISTENER_FRAME = 0, LISTENER_TLS, LISTENER__COUNT } listener_id;

/* Server-wide gauges. stats_connections counts every open connection, handshakes included; the per-listener
 * counts are what --max-conns bounds (PROTOCOL.md: "open connections, per listener"). */
extern _Atomic int64_t stats_connections;
extern _Atomic int64_t stats_listener_connections[LISTENER__COUNT];
extern _Atomic int64_t stats_inflight;
/* Connections admitted since start (refused ones over --max-conns are not): its rate is connections/s. */
extern _Atomic uint64_t stats_accepted;

/* A connection of listener l opened (taken from the listener), or closed. */
static inline void stats_conn_opened(listener_id l) {
    atomic_fetch_add(&stats_connections, 1);
    atomic_fetch_add(&stats_listener_connections[l], 1);
}
static inline void stats_conn_closed(listener_id l) {
    atomic_fetch_sub(&stats_connections, 1);
    atomic_fetch_sub(&stats_listener_connections[l], 1);
}

/* --metrics on|off: false leaves the request path without clock reads or counter writes (the caller
 * checks it before monotime_ns / stats_record). Set once before any thread starts, read-only after. */
extern bool stats_enabled;

/* The histogram bucket of a duration (STATS_NBUCKETS: +Inf). */
int stats_bucket(uint64_t dur_ns);

/* Records one call from this thread. */
void stats_record(method_id m, xerr_code code, uint64_t dur_ns, uint64_t up_bytes, uint64_t down_bytes);

/* Sums every thread's block into out (plain values in the same layout). */
void stats_sum(stats_block *out);

/* Frees every block; only once no thread records any more. */
void stats_shutdown(void);

#endif
