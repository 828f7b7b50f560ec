/* metrics: the text exposition, families in their order. */
#include "metrics.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "allocstat.h"
#include "mem.h"
#include "pool.h"
#include "stats.h"
#include "tlsmem.h"
#include "tlsstats.h"

typedef struct {
    char *buf;
    size_t len, cap;
    int oom;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...) {
    if (b->oom) return;
    for (int tries = 0; tries < 2; tries++) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->buf + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n < 0) { b->oom = 1; return; }
        if ((size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        size_t nc = (b->cap + (size_t)n + 1) * 2;
        char *nb = realloc(b->buf, nc);
        if (!nb) { b->oom = 1; return; }
        b->buf = nb;
        b->cap = nc;
    }
}

static void header(sbuf *b, const char *name, const char *type, const char *help) {
    sb_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* The active allocator's (or the pool's) own figures, each only where it really measures it. */
static void write_allocator_stats(sbuf *b, const metrics_info *mi) {
    alloc_stats st = {0};
    const char *src;
    if (mi->pool) {
        pool_stats ps;
        pool_stats_get(&ps);
        st.allocated = ps.allocated > 0 ? (uint64_t)ps.allocated : 0;
        st.resident = ps.resident > 0 ? (uint64_t)ps.resident : 0;
        st.have = ALLOC_HAVE_ALLOCATED | ALLOC_HAVE_RESIDENT;
        src = "the built-in pool's own counters";
    } else {
        if (allocdet_stats(mi->impl, &st) != 0) return;
        src = mi->impl == MALLOC_GLIBC      ? "glibc mallinfo2 (uordblks+hblkhd / arena+hblkhd)"
              : mi->impl == MALLOC_JEMALLOC ? "jemalloc stats.allocated / stats.resident"
              : mi->impl == MALLOC_TCMALLOC ? "tcmalloc generic.current_allocated_bytes / generic.total_physical_bytes"
              : mi->impl == MALLOC_MIMALLOC ? "mimalloc mi_process_info current_commit"
                                            : "sanitizer allocator";
    }
    if (st.have & ALLOC_HAVE_ALLOCATED) {
        sb_printf(b, "# HELP xfer_allocator_allocated_bytes Bytes allocated, from %s.\n", src);
        sb_printf(b, "# TYPE xfer_allocator_allocated_bytes gauge\nxfer_allocator_allocated_bytes %llu\n",
                  (unsigned long long)st.allocated);
    }
    if (st.have & ALLOC_HAVE_RESIDENT) {
        sb_printf(b, "# HELP xfer_allocator_resident_bytes Bytes resident, from %s.\n", src);
        sb_printf(b, "# TYPE xfer_allocator_resident_bytes gauge\nxfer_allocator_resident_bytes %llu\n",
                  (unsigned long long)st.resident);
    }
    if (st.have & ALLOC_HAVE_COMMITTED) {
        sb_printf(b, "# HELP xfer_allocator_committed_bytes Bytes committed (not necessarily touched), from %s.\n", src);
        sb_printf(b, "# TYPE xfer_allocator_committed_bytes gauge\nxfer_allocator_committed_bytes %llu\n",
                  (unsigned long long)st.committed);
    }
}

static uint64_t rss_bytes(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long size = 0, res = 0;
    if (f) {
        if (fscanf(f, "%lu %lu", &size, &res) != 2) res = 0;
        fclose(f);
    }
    return (uint64_t)res * (uint64_t)sysconf(_SC_PAGESIZE);
}

/* The allocator layer's sampled latency and its failures (--metrics on only: the sampling reads clocks). */
static void write_alloc_latency(sbuf *b) {
    allocstat_totals t;
    allocstat_sum(&t);
    header(b, "xfer_alloc_duration_seconds", "histogram",
           "Time of single allocations through the allocator layer (the pool, or malloc), one in --alloc-sample "
           "timed with CLOCK_MONOTONIC.");
    uint64_t cum = 0;
    for (unsigned k = 0; k < ALLOCSTAT_NBUCKETS; k++) {
        cum += t.hist[k];
        sb_printf(b, "xfer_alloc_duration_seconds_bucket{le=\"%.9g\"} %llu\n", (double)allocstat_bound_ns(k) / 1e9,
                  (unsigned long long)cum);
    }
    cum += t.hist[ALLOCSTAT_NBUCKETS];
    sb_printf(b, "xfer_alloc_duration_seconds_bucket{le=\"+Inf\"} %llu\n", (unsigned long long)cum);
    sb_printf(b, "xfer_alloc_duration_seconds_sum %.9f\n", (double)t.sum_ns / 1e9);
    sb_printf(b, "xfer_alloc_duration_seconds_count %llu\n", (unsigned long long)cum);
    header(b, "xfer_alloc_failures_total", "counter", "Allocations through the allocator layer that returned NULL.");
    sb_printf(b, "xfer_alloc_failures_total %llu\n", (unsigned long long)t.failures);
}

/* The pool's cross-thread traffic: its own bookkeeping, counted whatever --metrics says (no clock). */
static void write_pool_traffic(sbuf *b) {
    pool_stats ps;
    pool_stats_get(&ps);
    header(b, "xfer_alloc_cross_thread_frees_total", "counter",
           "Pool blocks freed by a thread other than the one whose cache owns them (--alloc pool only).");
    sb_printf(b, "xfer_alloc_cross_thread_frees_total %llu\n", (unsigned long long)ps.remote_frees);
    header(b, "xfer_alloc_pool_lock_contended_total", "counter",
           "Times a thread found a pool cache's remote-free lock held and had to wait (--alloc pool only).");
    sb_printf(b, "xfer_alloc_pool_lock_contended_total %llu\n", (unsigned long long)ps.lock_contended);
}

/* The families fed by every call (--metrics on): requests, latency, bytes moved, allocations. */
static void write_per_call(sbuf *b) {
    stats_block *s = malloc(sizeof *s); /* large: keep it off the stack */
    if (!s) {
        b->oom = 1;
        return;
    }
    stats_sum(s);

    header(b, "xfer_requests_total", "counter", "Calls handled, by transport, method and outcome code.");
    for (int m = 0; m < M__COUNT; m++)
        for (int c = 0; c < XERR__COUNT; c++) {
            uint64_t v = s->requests[m][c];
            if (v || (c == XERR_OK && m != M_UNKNOWN))
                sb_printf(b, "xfer_requests_total{transport=\"frame\",method=\"%s\",code=\"%s\"} %llu\n",
                          method_label((method_id)m), xerr_name((xerr_code)c), (unsigned long long)v);
        }
    header(b, "xfer_request_duration_seconds", "histogram", "Time from a whole request frame to its response.");
    for (int m = 0; m < M__COUNT; m++) {
        uint64_t cum = 0;
        const char *ml = method_label((method_id)m);
        for (int k = 0; k < STATS_NBUCKETS; k++) {
            cum += s->hist[m][k];
            sb_printf(b, "xfer_request_duration_seconds_bucket{transport=\"frame\",method=\"%s\",le=\"%s\"} %llu\n",
                      ml, stats_bound_text[k], (unsigned long long)cum);
        }
        cum += s->hist[m][STATS_NBUCKETS];
        sb_printf(b, "xfer_request_duration_seconds_bucket{transport=\"frame\",method=\"%s\",le=\"+Inf\"} %llu\n", ml,
                  (unsigned long long)cum);
        sb_printf(b, "xfer_request_duration_seconds_sum{transport=\"frame\",method=\"%s\"} %.9f\n", ml,
                  (double)s->sum_ns[m] / 1e9);
        sb_printf(b, "xfer_request_duration_seconds_count{transport=\"frame\",method=\"%s\"} %llu\n", ml,
                  (unsigned long long)cum);
    }
    header(b, "xfer_transfer_bytes_total", "counter", "File bytes moved, by direction.");
    sb_printf(b, "xfer_transfer_bytes_total{direction=\"upload\"} %llu\n", (unsigned long long)s->bytes_upload);
    sb_printf(b, "xfer_transfer_bytes_total{direction=\"download\"} %llu\n", (unsigned long long)s->bytes_download);
    free(s);

    mem_counts mc;
    mem_counts_get(&mc);
    header(b, "xfer_buffer_pool_gets_total", "counter",
           "Allocations asked of the allocator layer: everything a call allocates (its job, frames, answers, store records).");
    sb_printf(b, "xfer_buffer_pool_gets_total %llu\n", (unsigned long long)mc.gets);
    header(b, "xfer_buffer_pool_news_total", "counter", "Of those, buffers freshly allocated (all without the pool).");
    sb_printf(b, "xfer_buffer_pool_news_total %llu\n", (unsigned long long)mc.news);
    write_alloc_latency(b);
}

/* The TLS handshakes and OpenSSL's share of the allocations (--metrics on only: they are counted as they
 * happen). */
static void write_tls_counted(sbuf *b) {
    tlsstats_totals t;
    tlsstats_sum(&t);
    header(b, "xfer_tls_handshakes_total", "counter", "TLS handshakes completed (resumed ones included).");
    sb_printf(b, "xfer_tls_handshakes_total{transport=\"frame\"} %llu\n", (unsigned long long)t.handshakes);
    header(b, "xfer_tls_resumed_handshakes_total", "counter", "Of those, handshakes that resumed a session.");
    sb_printf(b, "xfer_tls_resumed_handshakes_total{transport=\"frame\"} %llu\n", (unsigned long long)t.resumed);
    header(b, "xfer_tls_handshake_failures_total", "counter", "TLS handshakes that failed, by reason.");
    for (int r = 0; r < TLS_FAIL__COUNT; r++)
        sb_printf(b, "xfer_tls_handshake_failures_total{transport=\"frame\",reason=\"%s\"} %llu\n",
                  tlsstats_reason_name((tls_fail_reason)r), (unsigned long long)t.failures[r]);
    const char *h = "xfer_tls_handshake_duration_seconds";
    header(b, h, "histogram", "Time from a TLS connection's accept to its handshake's end.");
    uint64_t cum = 0;
    for (int k = 0; k <= STATS_NBUCKETS; k++) {
        cum += t.hist[k];
        sb_printf(b, "%s_bucket{transport=\"frame\",le=\"%s\"} %llu\n", h,
                  k < STATS_NBUCKETS ? stats_bound_text[k] : "+Inf", (unsigned long long)cum);
    }
    sb_printf(b, "%s_sum{transport=\"frame\"} %.9f\n", h, (double)t.sum_ns / 1e9);
    sb_printf(b, "%s_count{transport=\"frame\"} %llu\n", h, (unsigned long long)cum);
    tlsmem_counts m;
    tlsmem_counts_get(&m);
    header(b, "xfer_tls_allocations_total", "counter",
           "Allocations OpenSSL asked of the allocator layer (also in xfer_buffer_pool_gets_total).");
    sb_printf(b, "xfer_tls_allocations_total %llu\n", (unsigned long long)m.allocations);
    header(b, "xfer_tls_allocated_bytes", "gauge", "Bytes OpenSSL holds from the allocator layer.");
    sb_printf(b, "xfer_tls_allocated_bytes %lld\n", (long long)m.live_bytes);
}

char *metrics_render(const metrics_info *mi, size_t *len) {
    sbuf b = {.buf = malloc(16384), .cap = 16384};
    if (!b.buf) return NULL;
    header(&b, "xfer_instrumentation_enabled", "gauge",
           "1: per-call counters and histograms are recorded (--metrics on); 0: --metrics off, and the "
           "xfer_requests_total, xfer_request_duration_seconds, xfer_transfer_bytes_total and "
           "xfer_buffer_pool_*_total families are absent.");
    sb_printf(&b, "xfer_instrumentation_enabled %d\n", mi->per_call ? 1 : 0);
    if (mi->per_call) write_per_call(&b);

    header(&b, "xfer_connections", "gauge", "Open frame connections (of both listeners, TLS handshakes included).");
    sb_printf(&b, "xfer_connections %lld\n", (long long)atomic_load(&stats_connections));
    header(&b, "xfer_connections_accepted_total", "counter",
           "Frame connections admitted since start, of both listeners (refused ones over --max-conns are not).");
    sb_printf(&b, "xfer_connections_accepted_total %llu\n", (unsigned long long)atomic_load(&stats_accepted));
    if (mi->tls) {
        header(&b, "xfer_tls_connections", "gauge",
               "Open TLS connections past their handshake (xfer_connections counts handshakes in progress too).");
        sb_printf(&b, "xfer_tls_connections{transport=\"frame\"} %lld\n", (long long)tlsstats_open());
        if (mi->per_call) write_tls_counted(&b);
    }
    header(&b, "xfer_inflight_requests", "gauge", "Calls received and not yet answered.");
    sb_printf(&b, "xfer_inflight_requests %lld\n", (long long)atomic_load(&stats_inflight));

    header(&b, "xfer_build_info", "gauge", "Build and configuration; the value is 1.");
    sb_printf(&b,
              "xfer_build_info{server=\"xferd-c\",version=\"%s\",allocator=\"%s\",pool=\"%s\",gogc=\"\",memlimit=\"\"} 1\n",
              mi->version, mi->alloc_label, mi->pool ? "on" : "off");

    write_allocator_stats(&b, mi);
    if (mi->pool) write_pool_traffic(&b);

    header(&b, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.");
    sb_printf(&b, "process_resident_memory_bytes %llu\n", (unsigned long long)rss_bytes());
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
                 (double)ru.ru_stime.tv_usec / 1e6;
    header(&b, "process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.");
    sb_printf(&b, "process_cpu_seconds_total %.6f\n", cpu);
    if (b.oom) {
        free(b.buf);
        return NULL;
    }
    *len = b.len;
    return b.buf;
}

