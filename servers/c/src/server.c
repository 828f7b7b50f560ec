/* server: the acceptor thread; starting every thread; the drain and the stop. */
#include "server.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "gencrc.h"
#include "loop.h"
#include "mem.h"
#include "monotime.h"
#include "net.h"
#include "stats.h"
#include "worker.h"

#define ACCEPTS_PER_WAKE 64 /* connections taken per readiness of the listener */

/* A listening socket and what its connections go through. */
typedef struct {
    int fd; /* -1: none */
    const transport *tp;
    bool refuses_in_frames; /* its clients read a plaintext seq-0 frame: a refusal can be explained */
} listener;

struct server {
    server_config cfg;
    loop_shared sh;     /* what the loops and connections see of the server */
    listener listeners[LISTENER__COUNT];
    int stop_fd;        /* wakes the acceptor */
    int spare_fd;           /* released when accept runs out of descriptors (net_accept) */
    uint8_t *nofd_frame;    /* the seq-0 "out of file descriptors" response, encoded once */
    size_t nofd_len;
    pthread_t acceptor;
    loop *loops;
    work_queue *queues;
    uint32_t nqueues; /* min(io_threads, workers): loop i feeds queue i % nqueues, worker j serves j % nqueues */
    pthread_t *worker_threads;
    worker *workers;
    _Atomic bool cut;                  /* the drain deadline passed: handlers stop long work (handler_ctx.cancel) */
    _Atomic uint32_t workers_returned; /* so server_stop can wait for the workers with a deadline */
    unsigned rr;
};

/* ---------------- acceptor ---------------- */

/* Over --max-conns: the connection error, then close. A TLS client would read a plaintext frame as a broken
 * record, so it is only closed. */
static void refuse(const listener *l, int fd, uint32_t limit) {
    if (!l->refuses_in_frames) {
        net_drop(fd, NULL, 0);
        return;
    }
    char msg[96];
    snprintf(msg, sizeof msg, "resource_exhausted: too many connections (limit %u)", limit);
    size_t len = 0;
    uint8_t *f = encode_error_frame("", 0, msg, &len);
    net_drop(fd, f, len);
    mem_free(f);
}

/* Takes up to ACCEPTS_PER_WAKE waiting connections of listener l and hands each to the next loop; *pause when
 * out of descriptors even with the spare. */
static void accept_waiting(server *s, const listener *l, bool *pause) {
    for (int k = 0; k < ACCEPTS_PER_WAKE; k++) {
        int fd = l->refuses_in_frames ? net_accept(l->fd, &s->spare_fd, s->nofd_frame, s->nofd_len)
                                      : net_accept(l->fd, &s->spare_fd, NULL, 0);
        if (fd == NET_ACCEPT_SHED) continue;
        *pause = fd == NET_ACCEPT_PAUSE;
        if (fd < 0) return;
        /* a handshake in progress holds a descriptor like any connection: it counts */
        if (atomic_load(&stats_listener_connections[l->tp->listener]) >= (int64_t)s->cfg.max_conns) {
            refuse(l, fd, s->cfg.max_conns);
            continue;
        }
        net_set_nodelay(fd);
        if (loop_hand_conn(&s->loops[s->rr % s->cfg.io_threads], fd, l->tp) != 0) close(fd);
        else s->rr++;
    }
}

static void *acceptor_main(void *arg) {
    server *s = arg;
    /* the stop first, then each listener; a listener that is not there (fd -1) is ignored by poll */
    struct pollfd pf[1 + LISTENER__COUNT] = {{.fd = s->stop_fd, .events = POLLIN}};
    for (int i = 0; i < LISTENER__COUNT; i++) pf[1 + i] = (struct pollfd){.fd = s->listeners[i].fd, .events = POLLIN};
    bool pause = false;
    for (;;) {
        mem_thread_flush();
        /* out of descriptors: wait only for the stop signal, since the listeners stay readable */
        int n = pause ? poll(pf, 1, NET_ACCEPT_PAUSE_MS) : poll(pf, 1 + LISTENER__COUNT, -1);
        pause = false;
        if (n < 0) {
            if (errno == EINTR) continue;
            break;
        }
        if (pf[0].revents) break;
        for (int i = 0; i < LISTENER__COUNT && !pause; i++)
            if (pf[1 + i].revents) accept_waiting(s, &s->listeners[i], &pause);
        for (int i = 0; i < LISTENER__COUNT; i++) pf[1 + i].revents = 0; /* not all polled after a pause */
    }
    mem_thread_flush();
    return NULL;
}

/* ---------------- start ---------------- */

/* The server's descriptors and arrays. */
static int server_alloc(server *s, char *err, size_t errlen) {
    const server_config *cfg = &s->cfg;
    s->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    s->spare_fd = net_spare_open();
    s->nofd_frame = encode_error_frame("", 0, "resource_exhausted: out of file descriptors", &s->nofd_len);
    s->nqueues = cfg->io_threads < cfg->workers ? cfg->io_threads : cfg->workers;
    s->loops = calloc(cfg->io_threads, sizeof *s->loops);
    s->queues = calloc(s->nqueues, sizeof *s->queues);
    s->worker_threads = calloc(cfg->workers, sizeof *s->worker_threads);
    s->workers = calloc(cfg->workers, sizeof *s->workers);
    if (s->stop_fd < 0 || !s->loops || !s->queues || !s->worker_threads || !s->workers || s->spare_fd < 0 ||
        !s->nofd_frame) {
        snprintf(err, errlen, "out of memory or eventfd: %s", strerror(errno));
        return -1;
    }
    for (uint32_t i = 0; i < s->nqueues; i++) workq_init(&s->queues[i]);
    for (uint32_t i = 0; i < cfg->io_threads; i++)
        if (loop_init(&s->loops[i], &s->sh, &s->queues[i % s->nqueues], i == 0, err, errlen) != 0) return -1;
    return 0;
}

/* Workers first, then the loops that feed them, then the acceptor that feeds the loops. */
static int server_start_threads(server *s, char *err, size_t errlen) {
    for (uint32_t i = 0; i < s->cfg.workers; i++) {
        s->workers[i] = (worker){.wq = &s->queues[i % s->nqueues], .hc = &s->cfg.hc, .cancel = &s->cut,
                                 .returned = &s->workers_returned};
        if (pthread_create(&s->worker_threads[i], NULL, worker_main, &s->workers[i]) != 0) {
            snprintf(err, errlen, "starting worker threads failed");
            return -1; /* not reached in practice; threads started so far would leak */
        }
    }
    for (uint32_t i = 0; i < s->cfg.io_threads; i++)
        if (pthread_create(&s->loops[i].th, NULL, loop_main, &s->loops[i]) != 0) {
            snprintf(err, errlen, "starting io threads failed");
            return -1;
        }
    if (pthread_create(&s->acceptor, NULL, acceptor_main, s) != 0) {
        snprintf(err, errlen, "starting the acceptor failed");
        return -1;
    }
    return 0;
}

server *server_start(const server_config *cfg, int frame_fd, int tls_fd, char *err, size_t errlen) {
    server *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "out of memory");
        close(frame_fd);
        if (tls_fd >= 0) close(tls_fd);
        return NULL;
    }
    s->cfg = *cfg;
    s->sh.cfg = &s->cfg;
    s->listeners[LISTENER_FRAME] = (listener){.fd = frame_fd, .tp = &transport_plain, .refuses_in_frames = true};
    s->listeners[LISTENER_TLS] = (listener){.fd = tls_fd, .tp = cfg->tls ? cfg->tls : &transport_plain};
    if (server_alloc(s, err, errlen) != 0 || server_start_threads(s, err, errlen) != 0)
        return NULL; /* the process exits with status 1 right after; the OS reclaims */
    return s;
}

/* ---------------- stop ---------------- */

/* 1. No new connections. */
static void stop_accepting(server *s) {
    net_wake(s->stop_fd);
    pthread_join(s->acceptor, NULL);
    for (int i = 0; i < LISTENER__COUNT; i++)
        if (s->listeners[i].fd >= 0) close(s->listeners[i].fd);
}

/* 2. No new calls; waits for the ones in flight to finish and be written, until the deadline. */
static void drain(server *s, uint64_t deadline) {
    atomic_store(&s->sh.draining, true);
    while (atomic_load(&stats_inflight) > 0 || atomic_load(&s->sh.unsent) > 0) {
        uint64_t now = monotime_ms();
        if (now >= deadline) break;
        usleep((useconds_t)(deadline - now < 10 ? deadline - now : 10) * 1000); /* never past the deadline */
    }
}

/* 3. The deadline (or nothing left): cuts what remains, without waiting for any of it. Handlers stop their
 * long work (s->cut), queued calls are dropped, the loops stop (they never block), and every connection is
 * closed now, whatever its calls in the workers are doing; their answers are discarded. */
static void cut(server *s) {
    atomic_store(&s->cut, true);
    for (uint32_t i = 0; i < s->nqueues; i++) workq_stop(&s->queues[i]);
    atomic_store(&s->sh.stop, true);
    for (uint32_t i = 0; i < s->cfg.io_threads; i++) {
        loop_wake(&s->loops[i]);
        pthread_join(s->loops[i].th, NULL);
    }
    /* the loops are gone: their connections are this thread's; calls still held by workers keep theirs
     * allocated (a reference each) until server_free */
    for (uint32_t i = 0; i < s->cfg.io_threads; i++) loop_close_all(&s->loops[i]);
}

/* 4. The workers end their current call within a block of gen: work; one stuck where nothing can cut it (a
 * read from a hung disk) must not hold the exit past the bound: false after STOP_WORKER_GRACE_MS, and the
 * caller exits without freeing (the connections are closed already). */
static bool join_workers(server *s) {
    uint64_t grace = monotime_ms() + STOP_WORKER_GRACE_MS;
    while (atomic_load(&s->workers_returned) < s->cfg.workers && monotime_ms() < grace) usleep(1000);
    if (atomic_load(&s->workers_returned) < s->cfg.workers) return false;
    for (uint32_t i = 0; i < s->cfg.workers; i++) pthread_join(s->worker_threads[i], NULL);
    return true;
}

/* 5. Single-threaded from here: frees what is left. */
static void server_free(server *s) {
    for (uint32_t i = 0; i < s->nqueues; i++) workq_destroy(&s->queues[i]);
    for (uint32_t i = 0; i < s->cfg.io_threads; i++) loop_destroy(&s->loops[i]);
    gen_crc_cache_reset(); /* the generated blocks handlers cached (gencache.h) */
    close(s->stop_fd);
    close(s->spare_fd);
    mem_free(s->nofd_frame);
    free(s->loops);
    free(s->queues);
    free(s->worker_threads);
    free(s->workers);
    free(s);
}

bool server_stop(server *s) {
    uint64_t deadline = monotime_ms() + s->cfg.drain_timeout_ms; /* main calls this as soon as the signal comes */
    stop_accepting(s);
    drain(s, deadline);
    cut(s);
    if (!join_workers(s)) return false;
    server_free(s);
    return true;
}
