/* xferd-c: flags -> config; allocator choice and detection; store, listeners, threads; the ready line;
 * signals; the stop. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "allocdet.h"
#include "config.h"
#include "mem.h"
#include "metricshttp.h"
#include "monotime.h"
#include "net.h"
#include "server.h"
#include "stats.h"
#include "store.h"
#include "tls.h"

#ifndef XFERD_VERSION /* set by the Makefile from `git describe --always --dirty` */
#define XFERD_VERSION "unknown"
#endif
#define MAIN_TICK_MS 250 /* how often idle uploads are expired */
#define ERR_LEN 1024
#define FD_HEADROOM 64      /* descriptors kept out of --max-conns auto: store, listeners, metrics */
#define AUTO_CONNS_MAX 65536

/* What main detected and started, for the ready line and the stop. */
typedef struct {
    malloc_impl impl; /* what serves malloc */
    char lib[512];    /* the object that defines it */
    int pool;         /* --alloc pool */
    store *st;
    int tls;          /* a TLS listener: OpenSSL set up (tls_setup), torn down at the stop */
    char frame_bound[64], tls_bound[64], metrics_bound[64];
    server *srv;
    metricshttp *ms;
} running;

static int fail(int status, const char *fmt, const char *what) {
    fprintf(stderr, "xferd-c: error: ");
    fprintf(stderr, fmt, what);
    fputc('\n', stderr);
    return status;
}

/* 1. The allocator: preload (re-exec) when asked, then detect what really serves malloc; the allocator layer
 * and the instrumentation set up. -1 with err: the process refuses to start. */
static int choose_allocator(const config *cfg, char **argv, running *r, char *err, size_t errlen) {
    if (allocdet_preload(cfg->alloc, argv, err, errlen) != 0) return -1;
    unsetenv(ALLOCDET_MARKER_ENV);
    r->impl = allocdet_detect(r->lib, sizeof r->lib);
    malloc_impl want = allocdet_expected(cfg->alloc);
    if (r->impl != want) {
        snprintf(err, errlen, "--alloc %s asked for %s, but malloc is served by %s (%s); refusing to start",
                 cfg->alloc, allocdet_name(want), allocdet_name(r->impl), r->lib);
        return -1;
    }
    r->pool = strcmp(cfg->alloc, "pool") == 0;
    mem_init(r->pool ? MEM_POOL : MEM_SYSTEM);
    stats_enabled = strcmp(cfg->metrics, "on") == 0;
    mem_set_counting(stats_enabled);
    mem_set_sampling(stats_enabled ? cfg->alloc_sample : 0);
    return 0;
}

/* 2. Signals: handled by this thread only (sigtimedwait); every thread inherits the mask. */
static void block_signals(sigset_t *set) {
    sigemptyset(set);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, set, NULL);
    signal(SIGPIPE, SIG_IGN);
}

/* 3. Descriptors: the hard limit, and --max-conns auto from it (per connection listener: one, or two with TLS). */
static void raise_descriptors(config *cfg) {
    unsigned long long soft = net_raise_nofile();
    if (cfg->max_conns == CONFIG_CONNS_AUTO) {
        unsigned long long listeners = cfg->tls_frame_addr[0] ? 2 : 1;
        unsigned long long n = soft > FD_HEADROOM ? (soft - FD_HEADROOM) / listeners : 1;
        cfg->max_conns = (uint32_t)(n > AUTO_CONNS_MAX ? AUTO_CONNS_MAX : n);
    }
}

static store *open_store(const config *cfg, char *err, size_t errlen) {
    store_config sc = {.kind = cfg->store, .max_file_size = cfg->max_file_size, .max_chunk = cfg->max_chunk,
                       .max_uploads = cfg->max_uploads, .max_uploads_per_conn = cfg->max_uploads_per_conn,
                       .max_staged_bytes = cfg->max_staged_bytes, .min_chunk = cfg->min_chunk,
                       .upload_idle_timeout_ms = cfg->upload_idle_timeout_ms};
    snprintf(sc.dir, sizeof sc.dir, "%s", cfg->store_dir);
    return store_open(&sc, err, errlen);
}

static server *start_server(const config *cfg, store *st, int frame_fd, int tls_fd, char *err, size_t errlen) {
    server_config svc = {.hc = {.st = st, .max_file_size = cfg->max_file_size, .max_chunk = cfg->max_chunk,
                                .max_meta_entries = cfg->max_meta_entries},
                         .max_frame = cfg->max_frame, .max_conns = cfg->max_conns,
                         .read_timeout_ms = cfg->read_timeout_ms, .io_threads = cfg->io_threads,
                         .workers = cfg->workers, .max_conn_calls = cfg->max_conn_calls,
                         .max_conn_unsent = cfg->max_conn_unsent, .write_timeout_ms = cfg->write_timeout_ms,
                         .drain_timeout_ms = cfg->drain_timeout_ms,
                         .tls = tls_fd >= 0 ? tls_transport() : NULL,
                         .handshake_timeout_ms = cfg->tls_handshake_timeout_ms};
    return server_start(&svc, frame_fd, tls_fd, err, errlen);
}

/* The TLS listener, when asked for: OpenSSL first (its allocations routed through the allocator layer before
 * anything else of it runs), then the socket. The listening fd, -1 when none, or -2 after the error. */
static int start_tls(const config *cfg, running *r) {
    if (!cfg->tls_frame_addr[0]) return -1;
    char err[ERR_LEN];
    tls_settings ts = {.cert = cfg->tls_cert, .key = cfg->tls_key, .tickets = strcmp(cfg->tls_tickets, "on") == 0};
    if (tls_setup(&ts, err, sizeof err) != 0) return fail(-2, "tls: %s", err);
    r->tls = 1;
    int fd = net_listen(cfg->tls_frame_addr, r->tls_bound, sizeof r->tls_bound, err, sizeof err);
    return fd < 0 ? fail(-2, "tls frame listener: %s", err) : fd;
}

/* 4. Store, listeners, the server's threads and /metrics. 0, or the exit status after the error. */
static int start(const config *cfg, running *r) {
    char err[ERR_LEN];
    if (!(r->st = open_store(cfg, err, sizeof err))) return fail(1, "store: %s", err);
    int tfd = start_tls(cfg, r);
    if (tfd == -2) return 1;
    int ffd = net_listen(cfg->frame_addr, r->frame_bound, sizeof r->frame_bound, err, sizeof err);
    if (ffd < 0) return fail(1, "frame listener: %s", err);
    int mfd = net_listen(cfg->metrics_addr, r->metrics_bound, sizeof r->metrics_bound, err, sizeof err);
    if (mfd < 0) return fail(1, "metrics listener: %s", err);
    if (!(r->srv = start_server(cfg, r->st, ffd, tfd, err, sizeof err))) return fail(1, "%s", err);
    metrics_info mi = {.version = XFERD_VERSION, .impl = r->impl, .pool = r->pool,
                       .alloc_label = r->pool ? "pool" : allocdet_name(r->impl), .per_call = stats_enabled,
                       .tls = r->tls};
    if (!(r->ms = metricshttp_start(mfd, &mi, err, sizeof err))) return fail(1, "%s", err);
    return 0;
}

/* The TLS listener's address and settings for the ready line, after metrics= as xferd-go writes them; "" without
 * one. */
static void tls_ready_fields(const config *cfg, const running *r, char *out, size_t cap) {
    out[0] = '\0';
    if (!r->tls) return;
    char ht[32];
    config_format_ms(ht, sizeof ht, cfg->tls_handshake_timeout_ms);
    snprintf(out, cap, " tls_frame=%s tls_tickets=%s tls_handshake_timeout=%s openssl=%s", r->tls_bound,
             cfg->tls_tickets, ht, tls_library_version());
}

/* 5. The one startup line. */
static void print_ready(const config *cfg, const running *r) {
    char env[2048], rt[32], it[32], wt[32], dt[32], tls[256];
    tls_ready_fields(cfg, r, tls, sizeof tls);
    allocdet_env(env, sizeof env);
    config_format_ms(rt, sizeof rt, cfg->read_timeout_ms);
    config_format_ms(it, sizeof it, cfg->upload_idle_timeout_ms);
    config_format_ms(wt, sizeof wt, cfg->write_timeout_ms);
    config_format_ms(dt, sizeof dt, cfg->drain_timeout_ms);
    fprintf(stderr,
            "xferd-c ready frame=%s metrics=%s%s store=%s alloc=%s instrumentation=%s alloc_sample=%u io_threads=%u workers=%u max_frame=%u "
            "max_chunk=%u max_file_size=%llu max_conns=%u max_uploads=%u max_uploads_per_conn=%u "
            "max_staged_bytes=%llu min_chunk=%u read_timeout=%s upload_idle_timeout=%s "
            "max_conn_calls=%u max_conn_unsent=%llu write_timeout=%s drain_timeout=%s max_meta_entries=%u "
            "malloc=%s malloc_lib=%s version=%s env=%s\n",
            r->frame_bound, r->metrics_bound, tls, cfg->store_spec, r->pool ? "pool" : allocdet_name(r->impl), cfg->metrics,
            stats_enabled ? (unsigned)cfg->alloc_sample : 0u, cfg->io_threads,
            cfg->workers, cfg->max_frame, cfg->max_chunk, (unsigned long long)cfg->max_file_size, cfg->max_conns,
            cfg->max_uploads, cfg->max_uploads_per_conn, (unsigned long long)cfg->max_staged_bytes, cfg->min_chunk,
            rt, it, cfg->max_conn_calls, (unsigned long long)cfg->max_conn_unsent, wt, dt, cfg->max_meta_entries,
            allocdet_name(r->impl), r->lib, XFERD_VERSION, env);
    fflush(stderr);
}

/* 6. Waits for SIGTERM/SIGINT, expiring idle uploads meanwhile. */
static void wait_for_signal(const sigset_t *set, store *st) {
    struct timespec tick = {.tv_sec = 0, .tv_nsec = MAIN_TICK_MS * 1000000L};
    for (;;) {
        int sig = sigtimedwait(set, NULL, &tick);
        if (sig == SIGINT || sig == SIGTERM) break;
        store_expire(st, monotime_ms());
    }
}

/* 7. The graceful stop; everything freed, so LeakSanitizer has nothing to report. */
static int stop(running *r) {
    metricshttp_stop(r->ms);
    if (!server_stop(r->srv)) { /* PROTOCOL.md "Shutdown": exit within the bound whatever a call is doing */
        fprintf(stderr, "xferd-c: warning: a call still running %u ms after the drain deadline was abandoned\n",
                STOP_WORKER_GRACE_MS);
        fflush(stderr);
        _exit(0);
    }
    store_close(r->st);
    if (r->tls) tls_teardown(); /* every session is freed: OpenSSL's own state goes while the allocator stands */
    stats_shutdown();
    mem_shutdown();
    return 0;
}

int main(int argc, char **argv) {
    static config cfg;
    static running r;
    char err[ERR_LEN];
    int pc = config_parse(&cfg, argc, argv, err, sizeof err);
    if (pc < 0) return fail(2, "%s", err);
    if (pc == CONFIG_VERSION) {
        printf("xferd-c %s\n", XFERD_VERSION);
        return 0;
    }
    if (pc == CONFIG_HELP) return 0;
    if (choose_allocator(&cfg, argv, &r, err, sizeof err) != 0) return fail(1, "%s", err);
    sigset_t set;
    block_signals(&set);
    raise_descriptors(&cfg);
    int rc = start(&cfg, &r);
    if (rc != 0) return rc;
    print_ready(&cfg, &r);
    wait_for_signal(&set, r.st);
    return stop(&r);
}
