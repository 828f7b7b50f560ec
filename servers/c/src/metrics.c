/* metrics: exposition and HTTP. */
#include "metrics.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "allocstat.h"
#include "mem.h"
#include "net.h"
#include "pool.h"
#include "stats.h"

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

char *metrics_render(const metrics_info *mi, size_t *len) {
    sbuf b = {.buf = malloc(16384), .cap = 16384};
    if (!b.buf) return NULL;
    header(&b, "xfer_instrumentation_enabled", "gauge",
           "1: per-call counters and histograms are recorded (--metrics on); 0: --metrics off, and the "
           "xfer_requests_total, xfer_request_duration_seconds, xfer_transfer_bytes_total and "
           "xfer_buffer_pool_*_total families are absent.");
    sb_printf(&b, "xfer_instrumentation_enabled %d\n", mi->per_call ? 1 : 0);
    if (mi->per_call) write_per_call(&b);

    header(&b, "xfer_connections", "gauge", "Open frame connections.");
    sb_printf(&b, "xfer_connections %lld\n", (long long)atomic_load(&stats_connections));
    header(&b, "xfer_connections_accepted_total", "counter",
           "Frame connections admitted since start (refused ones over --max-conns are not).");
    sb_printf(&b, "xfer_connections_accepted_total %llu\n", (unsigned long long)atomic_load(&stats_accepted));
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

/* One scrape in progress: reading its request, then writing its response; either ends at deadline_ms. */
typedef struct {
    int fd; /* -1: free slot */
    uint64_t deadline_ms;
    char req[METRICS_REQ_MAX + 1];
    size_t rlen;
    char *out; /* malloc'd response (head and body), NULL while reading */
    size_t olen, ooff;
} scrape;

struct metrics_server {
    int fd, stop_fd, spare_fd;
    pthread_t th;
    metrics_info mi;
    scrape clients[METRICS_MAX_CLIENTS];
};

static uint64_t mono_ms(void) { return stats_now_ns() / 1000000u; }

static char *dup_text(const char *t, size_t *len) {
    *len = strlen(t);
    char *p = malloc(*len + 1);
    if (p) memcpy(p, t, *len + 1);
    return p;
}

/* The whole HTTP/1.0 response to one request, or NULL when out of memory. */
static char *respond(const metrics_server *ms, const char *req, size_t *len) {
    if (!(strncmp(req, "GET /metrics", 12) == 0 || strncmp(req, "HEAD /metrics", 13) == 0))
        return dup_text("HTTP/1.0 404 Not Found\r\nContent-Type: text/plain\r\nContent-Length: 23\r\n"
                        "Connection: close\r\n\r\nnot found: try /metrics",
                        len);
    const char *after = req + (req[0] == 'G' ? 12 : 13);
    if (*after != ' ' && *after != '?' && *after != '\r')
        return dup_text("HTTP/1.0 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", len);
    size_t blen;
    char *body = metrics_render(&ms->mi, &blen);
    if (!body)
        return dup_text("HTTP/1.0 500 Internal Server Error\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                        len);
    char hdr[256];
    int hl = snprintf(hdr, sizeof hdr,
                      "HTTP/1.0 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
                      "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                      blen);
    if (req[0] == 'H') blen = 0;
    char *out = malloc((size_t)hl + blen);
    if (out) {
        memcpy(out, hdr, (size_t)hl);
        memcpy(out + hl, body, blen);
        *len = (size_t)hl + blen;
    }
    free(body);
    return out;
}

static void scrape_end(scrape *c) {
    shutdown(c->fd, SHUT_WR);
    close(c->fd);
    free(c->out);
    c->out = NULL;
    c->fd = -1;
}

/* Reads what arrived; once the request is whole (or the peer stops sending) the response is built. */
static void scrape_read(const metrics_server *ms, scrape *c) {
    ssize_t r = recv(c->fd, c->req + c->rlen, METRICS_REQ_MAX - c->rlen, MSG_DONTWAIT);
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
    if (r > 0) c->rlen += (size_t)r;
    c->req[c->rlen] = '\0';
    bool whole = strstr(c->req, "\r\n\r\n") || strstr(c->req, "\n\n") || c->rlen == METRICS_REQ_MAX;
    if (r < 0 || (r == 0 && c->rlen == 0)) {
        scrape_end(c);
        return;
    }
    if (!whole && r > 0) return;
    c->out = respond(ms, c->req, &c->olen);
    c->ooff = 0;
    if (!c->out) scrape_end(c);
}

static void scrape_write(scrape *c) {
    ssize_t w = send(c->fd, c->out + c->ooff, c->olen - c->ooff, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
    if (w > 0) c->ooff += (size_t)w;
    if (w <= 0 || c->ooff == c->olen) scrape_end(c);
}

static void accept_scrapes(metrics_server *ms, bool *pause) {
    for (int i = 0; i < METRICS_MAX_CLIENTS; i++) {
        if (ms->clients[i].fd >= 0) continue;
        int fd = net_accept(ms->fd, &ms->spare_fd, NULL, 0);
        if (fd == NET_ACCEPT_SHED) continue;
        if (fd < 0) {
            *pause = fd == NET_ACCEPT_PAUSE;
            return;
        }
        scrape *c = &ms->clients[i];
        c->fd = fd;
        c->rlen = 0;
        c->deadline_ms = mono_ms() + METRICS_IO_TIMEOUT_MS;
    }
}

/* Serves up to METRICS_MAX_CLIENTS scrapes at once, each within METRICS_IO_TIMEOUT_MS, from one poll
 * loop: a slow client delays nobody and stopping never waits for one. */
static void *metrics_main(void *arg) {
    metrics_server *ms = arg;
    struct pollfd pf[2 + METRICS_MAX_CLIENTS];
    int slot[METRICS_MAX_CLIENTS];
    bool pause = false;
    for (;;) {
        uint64_t now = mono_ms();
        int n = 0, timeout = pause ? NET_ACCEPT_PAUSE_MS : -1, free_slots = 0;
        pf[n++] = (struct pollfd){.fd = ms->stop_fd, .events = POLLIN};
        for (int i = 0; i < METRICS_MAX_CLIENTS; i++) {
            scrape *c = &ms->clients[i];
            if (c->fd < 0) {
                free_slots++;
                continue;
            }
            if (now >= c->deadline_ms) {
                scrape_end(c);
                free_slots++;
                continue;
            }
            int left = (int)(c->deadline_ms - now);
            if (timeout < 0 || left < timeout) timeout = left;
            slot[n - 1] = i;
            pf[n++] = (struct pollfd){.fd = c->fd, .events = c->out ? POLLOUT : POLLIN};
        }
        int nclients = n - 1;
        if (free_slots && !pause) pf[n++] = (struct pollfd){.fd = ms->fd, .events = POLLIN};
        pause = false;
        int r = poll(pf, (nfds_t)n, timeout);
        if (r < 0 && errno != EINTR) break;
        if (r <= 0) continue;
        if (pf[0].revents) break;
        for (int k = 1; k <= nclients; k++) {
            if (!pf[k].revents) continue;
            scrape *c = &ms->clients[slot[k - 1]];
            if (c->out) scrape_write(c);
            else scrape_read(ms, c);
            if (c->fd >= 0 && c->out && c->ooff == 0) scrape_write(c); /* usually goes out at once */
        }
        if (n > nclients + 1 && pf[n - 1].revents) accept_scrapes(ms, &pause);
    }
    for (int i = 0; i < METRICS_MAX_CLIENTS; i++)
        if (ms->clients[i].fd >= 0) scrape_end(&ms->clients[i]);
    return NULL;
}

metrics_server *metrics_start(int fd, const metrics_info *mi, char *err, size_t errlen) {
    metrics_server *ms = calloc(1, sizeof *ms);
    if (!ms) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    ms->fd = fd;
    ms->mi = *mi;
    for (int i = 0; i < METRICS_MAX_CLIENTS; i++) ms->clients[i].fd = -1;
    ms->spare_fd = net_spare_open();
    ms->stop_fd = eventfd(0, EFD_CLOEXEC);
    if (ms->stop_fd < 0 || ms->spare_fd < 0 || pthread_create(&ms->th, NULL, metrics_main, ms) != 0) {
        snprintf(err, errlen, "starting the metrics thread: %s", strerror(errno));
        if (ms->stop_fd >= 0) close(ms->stop_fd);
        if (ms->spare_fd >= 0) close(ms->spare_fd);
        free(ms);
        return NULL;
    }
    return ms;
}

void metrics_stop(metrics_server *ms) {
    if (!ms) return;
    uint64_t one = 1;
    ssize_t w = write(ms->stop_fd, &one, sizeof one);
    (void)w;
    pthread_join(ms->th, NULL);
    close(ms->stop_fd);
    close(ms->spare_fd);
    close(ms->fd);
    free(ms);
}
