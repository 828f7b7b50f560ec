/* metrics: exposition and HTTP. */
#include "metrics.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mem.h"
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

char *metrics_render(const metrics_info *mi, size_t *len) {
    sbuf b = {.buf = malloc(16384), .cap = 16384};
    if (!b.buf) return NULL;
    stats_block *s = malloc(sizeof *s); /* large: keep it off the stack */
    if (!s) {
        free(b.buf);
        return NULL;
    }
    stats_sum(s);

    header(&b, "xfer_requests_total", "counter", "Calls handled, by transport, method and outcome code.");
    for (int m = 0; m < M__COUNT; m++)
        for (int c = 0; c < XERR__COUNT; c++) {
            uint64_t v = s->requests[m][c];
            if (v || (c == XERR_OK && m != M_UNKNOWN))
                sb_printf(&b, "xfer_requests_total{transport=\"frame\",method=\"%s\",code=\"%s\"} %llu\n",
                          method_label((method_id)m), xerr_name((xerr_code)c), (unsigned long long)v);
        }
    header(&b, "xfer_request_duration_seconds", "histogram", "Time from a whole request frame to its response.");
    for (int m = 0; m < M__COUNT; m++) {
        uint64_t cum = 0;
        const char *ml = method_label((method_id)m);
        for (int k = 0; k < STATS_NBUCKETS; k++) {
            cum += s->hist[m][k];
            sb_printf(&b, "xfer_request_duration_seconds_bucket{transport=\"frame\",method=\"%s\",le=\"%s\"} %llu\n",
                      ml, stats_bound_text[k], (unsigned long long)cum);
        }
        cum += s->hist[m][STATS_NBUCKETS];
        sb_printf(&b, "xfer_request_duration_seconds_bucket{transport=\"frame\",method=\"%s\",le=\"+Inf\"} %llu\n", ml,
                  (unsigned long long)cum);
        sb_printf(&b, "xfer_request_duration_seconds_sum{transport=\"frame\",method=\"%s\"} %.9f\n", ml,
                  (double)s->sum_ns[m] / 1e9);
        sb_printf(&b, "xfer_request_duration_seconds_count{transport=\"frame\",method=\"%s\"} %llu\n", ml,
                  (unsigned long long)cum);
    }
    header(&b, "xfer_transfer_bytes_total", "counter", "File bytes moved, by direction.");
    sb_printf(&b, "xfer_transfer_bytes_total{direction=\"upload\"} %llu\n", (unsigned long long)s->bytes_upload);
    sb_printf(&b, "xfer_transfer_bytes_total{direction=\"download\"} %llu\n", (unsigned long long)s->bytes_download);
    free(s);

    header(&b, "xfer_connections", "gauge", "Open frame connections.");
    sb_printf(&b, "xfer_connections %lld\n", (long long)atomic_load(&stats_connections));
    header(&b, "xfer_inflight_requests", "gauge", "Calls received and not yet answered.");
    sb_printf(&b, "xfer_inflight_requests %lld\n", (long long)atomic_load(&stats_inflight));

    mem_counts mc;
    mem_counts_get(&mc);
    header(&b, "xfer_buffer_pool_gets_total", "counter",
           "Buffers asked of the allocator layer (frames, responses, protobuf-c decoding).");
    sb_printf(&b, "xfer_buffer_pool_gets_total %llu\n", (unsigned long long)mc.gets);
    header(&b, "xfer_buffer_pool_news_total", "counter", "Of those, buffers freshly allocated (all without the pool).");
    sb_printf(&b, "xfer_buffer_pool_news_total %llu\n", (unsigned long long)mc.news);

    header(&b, "xfer_build_info", "gauge", "Build and configuration; the value is 1.");
    sb_printf(&b,
              "xfer_build_info{server=\"xferd-c\",version=\"%s\",allocator=\"%s\",pool=\"%s\",gogc=\"\",memlimit=\"\"} 1\n",
              mi->version, mi->alloc_label, mi->pool ? "on" : "off");

    write_allocator_stats(&b, mi);

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

struct metrics_server {
    int fd, stop_fd;
    pthread_t th;
    metrics_info mi;
};

static int write_all(int fd, const char *p, size_t n) {
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static void serve_one(metrics_server *ms, int fd) {
    struct timeval tv = {.tv_sec = METRICS_IO_TIMEOUT_MS / 1000, .tv_usec = (METRICS_IO_TIMEOUT_MS % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    char req[METRICS_REQ_MAX + 1];
    size_t n = 0;
    while (n < METRICS_REQ_MAX) {
        ssize_t r = recv(fd, req + n, METRICS_REQ_MAX - n, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        n += (size_t)r;
        req[n] = '\0';
        if (strstr(req, "\r\n\r\n") || strstr(req, "\n\n")) break;
    }
    req[n] = '\0';
    char hdr[256];
    if (strncmp(req, "GET /metrics", 12) == 0 && (req[12] == ' ' || req[12] == '?' || req[12] == '\r')) {
        size_t len;
        char *body = metrics_render(&ms->mi, &len);
        if (!body) {
            const char *e = "HTTP/1.0 500 Internal Server Error\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
            write_all(fd, e, strlen(e));
            return;
        }
        int hl = snprintf(hdr, sizeof hdr,
                          "HTTP/1.0 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
                          "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                          len);
        if (write_all(fd, hdr, (size_t)hl) == 0 && strncmp(req, "HEAD", 4) != 0) write_all(fd, body, len);
        free(body);
    } else {
        const char *e = "HTTP/1.0 404 Not Found\r\nContent-Type: text/plain\r\nContent-Length: 23\r\n"
                        "Connection: close\r\n\r\nnot found: try /metrics";
        write_all(fd, e, strlen(e));
    }
}

static void *metrics_main(void *arg) {
    metrics_server *ms = arg;
    struct pollfd pf[2] = {{.fd = ms->fd, .events = POLLIN}, {.fd = ms->stop_fd, .events = POLLIN}};
    for (;;) {
        int n = poll(pf, 2, -1);
        if (n < 0) {
            if (errno == EINTR) continue;
            break;
        }
        if (pf[1].revents) break;
        int c = accept4(ms->fd, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0) continue;
        /* accepted sockets don't inherit O_NONBLOCK from the listener with accept4 flags = CLOEXEC */
        serve_one(ms, c);
        shutdown(c, SHUT_WR);
        close(c);
    }
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
    ms->stop_fd = eventfd(0, EFD_CLOEXEC);
    if (ms->stop_fd < 0 || pthread_create(&ms->th, NULL, metrics_main, ms) != 0) {
        snprintf(err, errlen, "starting the metrics thread: %s", strerror(errno));
        if (ms->stop_fd >= 0) close(ms->stop_fd);
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
    close(ms->fd);
    free(ms);
}
