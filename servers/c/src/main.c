/* xferd-c: flags -> config; allocator choice and detection; store, listeners, threads; signals. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "allocdet.h"
#include "config.h"
#include "mem.h"
#include "metrics.h"
#include "net.h"
#include "server.h"
#include "stats.h"
#include "store.h"

#ifndef XFERD_VERSION /* set by the Makefile from `git describe --always --dirty` */
#define XFERD_VERSION "unknown"
#endif
#define MAIN_TICK_MS 250 /* how often idle uploads are expired */
#define ERR_LEN 1024
#define FD_HEADROOM 64      /* descriptors kept out of --max-conns auto: store, listeners, metrics */
#define AUTO_CONNS_MAX 65536

static int fail(int status, const char *fmt, const char *what) {
    fprintf(stderr, "xferd-c: error: ");
    fprintf(stderr, fmt, what);
    fputc('\n', stderr);
    return status;
}

static void fmt_ms(char *out, size_t cap, uint64_t ms) {
    if (ms % 1000 == 0) snprintf(out, cap, "%llus", (unsigned long long)(ms / 1000));
    else snprintf(out, cap, "%llums", (unsigned long long)ms);
}

int main(int argc, char **argv) {
    static config cfg;
    char err[ERR_LEN];
    int pc = config_parse(&cfg, argc, argv, err, sizeof err);
    if (pc < 0) return fail(2, "%s", err);
    if (pc == CONFIG_VERSION) {
        printf("xferd-c %s\n", XFERD_VERSION);
        return 0;
    }
    if (pc == CONFIG_HELP) return 0;

    /* 1. the allocator: preload (re-exec) when asked, then detect what really serves malloc */
    if (allocdet_preload(cfg.alloc, argv, err, sizeof err) != 0) return fail(1, "%s", err);
    unsetenv(ALLOCDET_MARKER_ENV);
    char lib[512];
    malloc_impl impl = allocdet_detect(lib, sizeof lib);
    malloc_impl want = allocdet_expected(cfg.alloc);
    if (impl != want) {
        snprintf(err, sizeof err, "--alloc %s asked for %s, but malloc is served by %s (%s); refusing to start",
                 cfg.alloc, allocdet_name(want), allocdet_name(impl), lib);
        return fail(1, "%s", err);
    }
    int pool = strcmp(cfg.alloc, "pool") == 0;
    mem_init(pool ? MEM_POOL : MEM_SYSTEM);
    stats_enabled = strcmp(cfg.metrics, "on") == 0;
    mem_set_counting(stats_enabled);
    mem_set_sampling(stats_enabled ? cfg.alloc_sample : 0);

    /* 2. signals: handled by this thread only (sigtimedwait); every thread inherits the mask */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    /* 3. descriptors: the hard limit, and --max-conns auto from it (one connection listener) */
    unsigned long long soft = net_raise_nofile();
    if (cfg.max_conns == CONFIG_CONNS_AUTO) {
        unsigned long long n = soft > FD_HEADROOM ? soft - FD_HEADROOM : 1;
        cfg.max_conns = (uint32_t)(n > AUTO_CONNS_MAX ? AUTO_CONNS_MAX : n);
    }

    /* 4. store and listeners */
    store_config sc = {.kind = cfg.store, .max_file_size = cfg.max_file_size, .max_chunk = cfg.max_chunk,
                       .max_uploads = cfg.max_uploads, .max_uploads_per_conn = cfg.max_uploads_per_conn,
                       .max_staged_bytes = cfg.max_staged_bytes, .min_chunk = cfg.min_chunk,
                       .upload_idle_timeout_ms = cfg.upload_idle_timeout_ms};
    snprintf(sc.dir, sizeof sc.dir, "%s", cfg.store_dir);
    store *st = store_open(&sc, err, sizeof err);
    if (!st) return fail(1, "store: %s", err);
    char frame_bound[64], metrics_bound[64];
    int ffd = net_listen(cfg.frame_addr, frame_bound, sizeof frame_bound, err, sizeof err);
    if (ffd < 0) return fail(1, "frame listener: %s", err);
    int mfd = net_listen(cfg.metrics_addr, metrics_bound, sizeof metrics_bound, err, sizeof err);
    if (mfd < 0) return fail(1, "metrics listener: %s", err);

    server_config svc = {.hc = {.st = st, .max_file_size = cfg.max_file_size, .max_chunk = cfg.max_chunk,
                                .max_meta_entries = cfg.max_meta_entries},
                         .max_frame = cfg.max_frame, .max_conns = cfg.max_conns,
                         .read_timeout_ms = cfg.read_timeout_ms, .io_threads = cfg.io_threads,
                         .workers = cfg.workers, .max_conn_calls = cfg.max_conn_calls,
                         .max_conn_unsent = cfg.max_conn_unsent, .write_timeout_ms = cfg.write_timeout_ms,
                         .drain_timeout_ms = cfg.drain_timeout_ms};
    server *srv = server_start(&svc, ffd, err, sizeof err);
    if (!srv) return fail(1, "%s", err);
    metrics_info mi = {.version = XFERD_VERSION, .impl = impl, .pool = pool,
                       .alloc_label = pool ? "pool" : allocdet_name(impl), .per_call = stats_enabled};
    metrics_server *ms = metrics_start(mfd, &mi, err, sizeof err);
    if (!ms) return fail(1, "%s", err);

    /* 5. the one startup line */
    char env[2048], rt[32], it[32], wt[32], dt[32];
    allocdet_env(env, sizeof env);
    fmt_ms(rt, sizeof rt, cfg.read_timeout_ms);
    fmt_ms(it, sizeof it, cfg.upload_idle_timeout_ms);
    fmt_ms(wt, sizeof wt, cfg.write_timeout_ms);
    fmt_ms(dt, sizeof dt, cfg.drain_timeout_ms);
    fprintf(stderr,
            "xferd-c ready frame=%s metrics=%s store=%s alloc=%s instrumentation=%s alloc_sample=%u io_threads=%u workers=%u max_frame=%u "
            "max_chunk=%u max_file_size=%llu max_conns=%u max_uploads=%u max_uploads_per_conn=%u "
            "max_staged_bytes=%llu min_chunk=%u read_timeout=%s upload_idle_timeout=%s "
            "max_conn_calls=%u max_conn_unsent=%llu write_timeout=%s drain_timeout=%s max_meta_entries=%u "
            "malloc=%s malloc_lib=%s version=%s env=%s\n",
            frame_bound, metrics_bound, cfg.store_spec, pool ? "pool" : allocdet_name(impl), cfg.metrics,
            stats_enabled ? (unsigned)cfg.alloc_sample : 0u, cfg.io_threads,
            cfg.workers, cfg.max_frame, cfg.max_chunk, (unsigned long long)cfg.max_file_size, cfg.max_conns,
            cfg.max_uploads, cfg.max_uploads_per_conn, (unsigned long long)cfg.max_staged_bytes, cfg.min_chunk,
            rt, it, cfg.max_conn_calls, (unsigned long long)cfg.max_conn_unsent, wt, dt, cfg.max_meta_entries,
            allocdet_name(impl), lib, XFERD_VERSION, env);
    fflush(stderr);

    /* 6. wait for SIGTERM/SIGINT, expiring idle uploads meanwhile */
    struct timespec tick = {.tv_sec = 0, .tv_nsec = MAIN_TICK_MS * 1000000L};
    for (;;) {
        int sig = sigtimedwait(&set, NULL, &tick);
        if (sig == SIGINT || sig == SIGTERM) break;
        store_expire(st, store_now_ms());
    }

    /* 7. graceful stop; free everything so LeakSanitizer has nothing to report */
    metrics_stop(ms);
    if (!server_stop(srv)) { /* PROTOCOL.md "Shutdown": exit within the bound whatever a call is doing */
        fprintf(stderr, "xferd-c: warning: a call still running %u ms after the drain deadline was abandoned\n",
                STOP_WORKER_GRACE_MS);
        fflush(stderr);
        _exit(0);
    }
    store_close(st);
    stats_shutdown();
    mem_shutdown();
    return 0;
}
