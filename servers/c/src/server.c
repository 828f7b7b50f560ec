/* server: acceptor, event loops, workers. */
#include "server.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "frame.h"
#include "mem.h"
#include "net.h"
#include "stats.h"
#include "xfer/v1/frame.pb-c.h"

#define WRITE_IOV_MAX 64
#define REPLY_OVERHEAD 512 /* a response's prefix and header, at most (PROTOCOL.md "Quoting") */

typedef struct loop loop;

typedef struct out_buf {
    struct out_buf *next;
    uint8_t *data; /* mem_alloc'd (by a worker, usually) */
    size_t len, off;
} out_buf;

typedef struct conn {
    int fd;
    uint64_t id; /* owner of the uploads begun on it; never reused */
    loop *lp;
    int refs; /* loop thread only: 1 while open + 1 per call in flight */
    bool closed, closing, paused, want_out, eof; /* closing: after a connection error; eof: peer half-closed */
    uint8_t *rbuf;
    size_t rcap, rlen, rpos;
    uint64_t frame_start_ms; /* when the pending partial frame began, 0 when none */
    uint64_t stall_ms;       /* since when unwritten output has met a full send buffer, 0 when not */
    out_buf *out_head, *out_tail;
    size_t out_bytes;
    size_t reserved; /* answer bytes expected from the calls in flight, counted against max_conn_unsent */
    int pending;
    struct conn *prev, *next;
} conn;

typedef struct job {
    struct job *next;
    conn *c;
    uint8_t *frame; /* request frame: allocated on the loop thread, freed on the worker */
    size_t len;
    reqhdr hdr; /* its method points into frame */
    method_id m;
    size_t reserve; /* what this call's answer is expected to take, until it is queued */
    uint64_t t0_ns;
    handler_result res;
} job;

typedef struct newconn {
    struct newconn *next;
    int fd;
} newconn;

struct loop {
    server *srv;
    pthread_t th;
    int epfd, evfd;
    pthread_mutex_t mu; /* guards the two queues below */
    newconn *incoming;
    job *done_head, *done_tail;
    conn *conns;
    size_t nconns;
};

struct server {
    server_config cfg;
    int listen_fd, stop_fd; /* stop_fd wakes the acceptor */
    int spare_fd;           /* released when accept runs out of descriptors (net_accept) */
    uint8_t *nofd_frame;    /* the seq-0 "out of file descriptors" response, encoded once */
    size_t nofd_len;
    _Atomic int64_t unsent; /* response bytes queued on every connection, for the drain */
    pthread_t acceptor;
    loop *loops;
    pthread_t *workers;
    pthread_mutex_t wmu;
    pthread_cond_t wcv;
    job *work_head, *work_tail;
    bool workers_stop;
    _Atomic bool loops_stop, draining;
    unsigned rr;
};

static uint64_t now_ms(void) { return stats_now_ns() / 1000000u; }

static void wake(int evfd) {
    uint64_t one = 1;
    ssize_t n = write(evfd, &one, sizeof one);
    (void)n; /* a full counter still wakes the reader */
}

/* ---------------- connections (loop thread) ---------------- */

static void conn_update_events(conn *c) {
    if (c->closed) return;
    struct epoll_event ev = {.events = 0, .data.ptr = c};
    if (!c->paused && !c->closing && !c->eof) ev.events |= EPOLLIN | EPOLLRDHUP;
    if (c->want_out) ev.events |= EPOLLOUT;
    epoll_ctl(c->lp->epfd, EPOLL_CTL_MOD, c->fd, &ev);
}

/* An upload belongs to its connection (PROTOCOL.md "Connections and uploads"): aborted when it closes. */
static void conn_abort_uploads(conn *c) {
    if (c->lp) store_upload_abort_owner(c->lp->srv->cfg.hc.st, c->id);
}

static void conn_free(conn *c) {
    conn_abort_uploads(c); /* again: an UploadBegin in flight at close may have opened one since */
    mem_free(c->rbuf);
    free(c);
}

static void conn_unref(conn *c) {
    if (--c->refs == 0) conn_free(c);
}

static void conn_close(conn *c) {
    if (c->closed) return;
    c->closed = true;
    epoll_ctl(c->lp->epfd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    for (out_buf *o = c->out_head; o;) {
        out_buf *n = o->next;
        mem_free(o->data);
        free(o);
        o = n;
    }
    c->out_head = c->out_tail = NULL;
    atomic_fetch_sub(&c->lp->srv->unsent, (int64_t)c->out_bytes);
    c->out_bytes = 0;
    mem_free(c->rbuf);
    c->rbuf = NULL;
    c->rcap = c->rlen = c->rpos = 0;
    if (c->prev) c->prev->next = c->next;
    else c->lp->conns = c->next;
    if (c->next) c->next->prev = c->prev;
    c->lp->nconns--;
    atomic_fetch_sub(&stats_connections, 1);
    conn_abort_uploads(c); /* at once: its slots and staged bytes are free for others */
    conn_unref(c);
}

/* After the last byte of a closing connection went out: half-close, drop unread input, close. */
static void conn_finish(conn *c) {
    shutdown(c->fd, SHUT_WR);
    char sink[4096];
    for (int i = 0; i < 16 && recv(c->fd, sink, sizeof sink, MSG_DONTWAIT) > 0; i++) {}
    conn_close(c);
}

static void conn_parse(conn *c);

/* At a backpressure bound (PROTOCOL.md "Backpressure"): neither read nor dispatch more. */
static bool conn_full(const conn *c) {
    const server_config *cfg = &c->lp->srv->cfg;
    return c->pending >= (int)cfg->max_conn_calls || c->out_bytes + c->reserved >= cfg->max_conn_unsent;
}

static void conn_pause(conn *c) {
    if (!c->paused) {
        c->paused = true;
        conn_update_events(c);
    }
}

static void conn_maybe_resume(conn *c) {
    if (c->paused && !conn_full(c)) {
        c->paused = false;
        if (c->rlen > c->rpos) c->frame_start_ms = now_ms(); /* the client wasn't the slow one */
        conn_update_events(c);
        conn_parse(c); /* frames read before the pause go first */
    }
}

static void conn_flush(conn *c) {
    while (c->out_head && !c->closed) {
        struct iovec iov[WRITE_IOV_MAX];
        int n = 0;
        for (out_buf *o = c->out_head; o && n < WRITE_IOV_MAX; o = o->next, n++) {
            iov[n].iov_base = o->data + o->off;
            iov[n].iov_len = o->len - o->off;
        }
        ssize_t w = writev(c->fd, iov, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                if (!c->stall_ms) c->stall_ms = now_ms();
                if (!c->want_out) {
                    c->want_out = true;
                    conn_update_events(c);
                }
                return;
            }
            conn_close(c); /* peer gone */
            return;
        }
        size_t left = (size_t)w;
        c->stall_ms = 0; /* the client is taking its answers */
        atomic_fetch_sub(&c->lp->srv->unsent, (int64_t)w);
        while (left && c->out_head) {
            out_buf *o = c->out_head;
            size_t k = o->len - o->off < left ? o->len - o->off : left;
            o->off += k;
            left -= k;
            c->out_bytes -= k;
            if (o->off == o->len) {
                c->out_head = o->next;
                if (!c->out_head) c->out_tail = NULL;
                mem_free(o->data); /* a worker allocated it: the cross-thread free */
                free(o);
            }
        }
    }
    if (c->closed) return;
    if (c->want_out) {
        c->want_out = false;
        conn_update_events(c);
    }
    if (c->closing) {
        conn_finish(c);
        return;
    }
    if (c->eof) {
        if (c->pending == 0) conn_close(c); /* every answer to a half-closed peer is out */
        return;
    }
    conn_maybe_resume(c);
}

static void conn_queue(conn *c, uint8_t *data, size_t len) {
    out_buf *o = malloc(sizeof *o);
    if (!o) {
        mem_free(data);
        conn_close(c);
        return;
    }
    o->next = NULL;
    o->data = data;
    o->len = len;
    o->off = 0;
    if (c->out_tail) c->out_tail->next = o;
    else c->out_head = o;
    c->out_tail = o;
    c->out_bytes += len;
    atomic_fetch_add(&c->lp->srv->unsent, (int64_t)len);
}

/* A connection error: one response with seq 0 and method "", then close. */
static void conn_error(conn *c, const char *msg) {
    size_t len;
    uint8_t *f = encode_error_frame("", 0, msg, &len);
    c->closing = true;
    conn_update_events(c);
    if (!f) {
        conn_close(c);
        return;
    }
    conn_queue(c, f, len);
    if (!c->closed) conn_flush(c);
}

/* The size a call's answer will have at most, known from the request alone: Read and Echo carry data
 * back, the rest a few fields. Counting it at dispatch keeps the answers of calls already running
 * inside --max-conn-unsent too. */
static size_t expected_reply(method_id m, const frame_parts *p, uint32_t max_chunk) {
    size_t n = REPLY_OVERHEAD;
    if (m == M_ECHO) return n + p->body_len;
    if (m != M_READ) return n;
    Xfer__V1__ReadRequest *r = xfer__v1__read_request__unpack(mem_pb_allocator(), p->body_len, p->body);
    if (!r) return n; /* malformed: answered with a short error */
    n += r->length < max_chunk ? r->length : max_chunk;
    xfer__v1__read_request__free_unpacked(r, mem_pb_allocator());
    return n;
}

/* Hands one complete frame (ownership passes) to the workers; -1 when the connection errored. */
static int conn_dispatch(conn *c, uint8_t *frame, size_t len) {
    server *s = c->lp->srv;
    frame_parts p;
    frame_split(frame, len, &p);
    reqhdr hdr;
    const char *herr = reqhdr_decode(p.header, p.header_len, &hdr);
    if (herr) {
        mem_free(frame);
        conn_error(c, herr);
        return -1;
    }
    job *j = malloc(sizeof *j);
    if (!j) {
        mem_free(frame);
        conn_error(c, "internal: out of memory queueing a call");
        return -1;
    }
    memset(j, 0, sizeof *j);
    j->c = c;
    j->frame = frame;
    j->len = len;
    j->hdr = hdr;
    j->m = method_lookup(hdr.method, hdr.method_len);
    j->reserve = expected_reply(j->m, &p, s->cfg.hc.max_chunk);
    c->reserved += j->reserve;
    j->t0_ns = stats_now_ns();
    c->refs++;
    c->pending++;
    atomic_fetch_add(&stats_inflight, 1);
    pthread_mutex_lock(&s->wmu);
    if (s->work_tail) s->work_tail->next = j;
    else s->work_head = j;
    s->work_tail = j;
    pthread_cond_signal(&s->wcv);
    pthread_mutex_unlock(&s->wmu);
    if (conn_full(c)) conn_pause(c);
    return 0;
}

/* Makes room for more of the frame at rpos (`total` bytes, 0 while unknown): moves it to the front when
 * it would not fit where it is, and grows the buffer only once received bytes fill it: doubling until a
 * FRAME_EXACT_FRACTION of the frame has arrived, then to the frame's size at once. A length prefix alone
 * never costs a whole frame, a stalled frame costs at most FRAME_EXACT_FRACTION times what was sent, and a
 * 1 MiB chunk is copied once (64 KiB) instead of at every doubling: doubling all the way cost 1.34x the
 * CPU per request on 1 MiB chunks (copies, and fresh pages faulted in for every step). -1 after a
 * connection error. */
static int conn_make_room(conn *c, size_t total) {
    size_t have = c->rlen - c->rpos;
    if (c->rpos && (total > c->rcap - c->rpos || c->rcap - c->rlen < FRAME_PREFIX_LEN)) {
        memmove(c->rbuf, c->rbuf + c->rpos, have);
        c->rpos = 0;
        c->rlen = have;
    }
    if (c->rlen < c->rcap || total <= c->rcap) return 0;
    size_t ncap = c->rcap * 2 < total ? c->rcap * 2 : total;
    if (have >= total / FRAME_EXACT_FRACTION) ncap = total;
    uint8_t *nb = mem_alloc(ncap);
    if (!nb) {
        conn_error(c, "internal: out of memory for a frame");
        return -1;
    }
    memcpy(nb, c->rbuf, c->rlen);
    mem_free(c->rbuf);
    c->rbuf = nb;
    c->rcap = ncap;
    return 0;
}

/* Parses every complete frame in the read buffer. */
static void conn_parse(conn *c) {
    server *s = c->lp->srv;
    while (!c->closed && !c->closing && c->rpos < c->rlen) {
        if (atomic_load(&s->draining)) { /* shutting down: frames not yet parsed are not served */
            c->rpos = c->rlen = 0;
            break;
        }
        if (conn_full(c)) {
            conn_pause(c);
            return;
        }
        size_t total;
        xerr e;
        frame_status st = frame_parse(c->rbuf + c->rpos, c->rlen - c->rpos, s->cfg.max_frame, &total, &e);
        if (st == FRAME_ERROR) {
            conn_error(c, e.msg);
            return;
        }
        if (st == FRAME_NEED_MORE) {
            if (!c->frame_start_ms) c->frame_start_ms = now_ms();
            conn_make_room(c, total);
            return;
        }
        uint8_t *frame;
        if (c->rpos == 0 && total == c->rlen && total == c->rcap && c->rcap > CONN_RBUF_SIZE) {
            frame = c->rbuf; /* zero copy: the buffer grown to exactly this frame becomes the request */
            c->rbuf = mem_alloc(CONN_RBUF_SIZE);
            c->rcap = c->rbuf ? CONN_RBUF_SIZE : 0;
            c->rlen = c->rpos = 0;
            if (!c->rbuf) {
                mem_free(frame);
                conn_error(c, "internal: out of memory for a read buffer");
                return;
            }
        } else {
            frame = mem_alloc(total);
            if (!frame) {
                conn_error(c, "internal: out of memory for a frame");
                return;
            }
            memcpy(frame, c->rbuf + c->rpos, total);
            c->rpos += total;
        }
        c->frame_start_ms = 0;
        if (conn_dispatch(c, frame, total) != 0) return;
    }
    if (!c->closed && c->rpos == c->rlen) {
        c->rpos = c->rlen = 0;
        c->frame_start_ms = 0;
    }
}

static void conn_read(conn *c) {
    for (int r = 0; r < LOOP_READS_PER_EVENT && !c->closed && !c->closing && !c->paused && !c->eof; r++) {
        if (c->rlen == c->rcap) { /* full of complete frames waiting? parse first */
            conn_parse(c);
            if (c->closed || c->closing || c->paused || c->rlen == c->rcap) return;
        }
        ssize_t n = recv(c->fd, c->rbuf + c->rlen, c->rcap - c->rlen, 0);
        if (n == 0) { /* the peer is done sending: answer what it sent, then close */
            c->eof = true;
            if (c->pending == 0 && !c->out_head) conn_close(c);
            else conn_update_events(c);
            return;
        }
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK) conn_close(c);
            return;
        }
        c->rlen += (size_t)n;
        if (atomic_load(&c->lp->srv->draining)) { /* shutting down: take no new calls */
            c->rpos = c->rlen = 0;
            continue;
        }
        conn_parse(c);
    }
}

/* ---------------- loop thread ---------------- */

static void loop_take_incoming(loop *lp) {
    pthread_mutex_lock(&lp->mu);
    newconn *list = lp->incoming;
    lp->incoming = NULL;
    job *done = lp->done_head;
    lp->done_head = lp->done_tail = NULL;
    pthread_mutex_unlock(&lp->mu);

    while (list) {
        newconn *n = list->next;
        conn *c = calloc(1, sizeof *c);
        uint8_t *rb = c ? mem_alloc(CONN_RBUF_SIZE) : NULL;
        if (!c || !rb) {
            free(c);
            close(list->fd);
            atomic_fetch_sub(&stats_connections, 1);
        } else {
            static _Atomic uint64_t last_conn_id;
            c->fd = list->fd;
            c->id = atomic_fetch_add(&last_conn_id, 1) + 1;
            c->lp = lp;
            c->refs = 1;
            c->rbuf = rb;
            c->rcap = CONN_RBUF_SIZE;
            struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.ptr = c};
            if (epoll_ctl(lp->epfd, EPOLL_CTL_ADD, c->fd, &ev) != 0) {
                close(c->fd);
                conn_free(c);
                atomic_fetch_sub(&stats_connections, 1);
            } else {
                c->next = lp->conns;
                if (lp->conns) lp->conns->prev = c;
                lp->conns = c;
                lp->nconns++;
            }
        }
        free(list);
        list = n;
    }

    while (done) {
        job *n = done->next;
        conn *c = done->c;
        c->pending--;
        c->reserved -= done->reserve;
        if (c->closed || c->closing || !done->res.frame) {
            mem_free(done->res.frame);
            if (!done->res.frame && !c->closed) conn_close(c); /* no response could be built */
        } else {
            conn_queue(c, done->res.frame, done->res.len);
            if (!c->closed) conn_flush(c);
        }
        /* after queueing: the drain sees a call in flight or its unsent answer, never neither */
        atomic_fetch_sub(&stats_inflight, 1);
        if (!c->closed && c->eof && c->pending == 0 && !c->out_head) conn_close(c);
        if (!c->closed && !c->closing && !c->eof) conn_maybe_resume(c);
        conn_unref(c);
        free(done);
        done = n;
    }
}

static void loop_sweep(loop *lp, uint64_t now) {
    uint64_t limit = lp->srv->cfg.read_timeout_ms, wlimit = lp->srv->cfg.write_timeout_ms;
    for (conn *c = lp->conns, *n; c; c = n) {
        n = c->next;
        if (!c->paused && c->frame_start_ms && now - c->frame_start_ms >= limit) conn_close(c);
        else if (c->out_head && c->stall_ms && now - c->stall_ms >= wlimit) conn_close(c); /* --write-timeout */
    }
}

static void *loop_main(void *arg) {
    loop *lp = arg;
    struct epoll_event evs[LOOP_MAX_EVENTS];
    uint64_t last_sweep = now_ms();
    while (!atomic_load(&lp->srv->loops_stop)) {
        mem_thread_flush();
        int n = epoll_wait(lp->epfd, evs, LOOP_MAX_EVENTS, LOOP_TICK_MS);
        if (n < 0 && errno != EINTR) break;
        /* Each conn in evs[] was registered, so alive, when epoll_wait returned, and appears there once.
         * While the batch is handled nothing may free a conn but its own event (under the reference taken
         * below). Completed calls (loop_take_incoming) can drop a closed conn's last reference, so they
         * are taken after the batch, never on the eventfd's event in the middle of it: a conn freed there
         * could still have an entry later in evs[] (a use after free; with glibc, "double free or
         * corruption" in conn_close). */
        for (int i = 0; i < n; i++) {
            if (evs[i].data.ptr == NULL) {
                uint64_t v;
                ssize_t r = read(lp->evfd, &v, sizeof v);
                (void)r;
                continue;
            }
            conn *c = evs[i].data.ptr;
            if (c->closed) continue;
            c->refs++; /* keep c valid across this event */
            if (evs[i].events & EPOLLOUT) conn_flush(c);
            if (!c->closed && (evs[i].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))) conn_read(c);
            if (!c->closed && (evs[i].events & (EPOLLHUP | EPOLLERR)) && !c->out_head) conn_close(c);
            conn_unref(c);
        }
        loop_take_incoming(lp);
        uint64_t now = now_ms();
        if (now - last_sweep >= LOOP_TICK_MS) {
            loop_sweep(lp, now);
            last_sweep = now;
        }
    }
    mem_thread_flush();
    return NULL;
}

/* ---------------- workers ---------------- */

static void *worker_main(void *arg) {
    server *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->wmu);
        while (!s->work_head && !s->workers_stop) {
            pthread_mutex_unlock(&s->wmu);
            mem_thread_flush(); /* hand foreign frees back before sleeping */
            pthread_mutex_lock(&s->wmu);
            if (s->work_head || s->workers_stop) break;
            pthread_cond_wait(&s->wcv, &s->wmu);
        }
        job *j = s->work_head;
        if (!j || s->workers_stop) { /* at the drain deadline, queued calls are dropped, not run */
            pthread_mutex_unlock(&s->wmu);
            break;
        }
        s->work_head = j->next;
        if (!s->work_head) s->work_tail = NULL;
        pthread_mutex_unlock(&s->wmu);
        j->next = NULL;

        frame_parts p;
        frame_split(j->frame, j->len, &p);
        handler_ctx hc = s->cfg.hc;
        hc.conn_id = j->c->id; /* immutable once the conn is created: safe to read here */
        if (handle_request(&hc, j->m, &j->hdr, p.body, p.body_len, &j->res) != 0) {
            j->res.frame = NULL;
            j->res.code = XERR_INTERNAL;
        }
        /* the request buffer (which the header points into) was allocated on the loop thread */
        mem_free(j->frame);
        j->frame = NULL;
        stats_record(j->m, j->res.code, stats_now_ns() - j->t0_ns, j->res.in_bytes, j->res.out_bytes);

        loop *lp = j->c->lp;
        pthread_mutex_lock(&lp->mu);
        bool was_empty = lp->done_head == NULL;
        if (lp->done_tail) lp->done_tail->next = j;
        else lp->done_head = j;
        lp->done_tail = j;
        pthread_mutex_unlock(&lp->mu);
        if (was_empty) wake(lp->evfd);
    }
    mem_thread_flush();
    return NULL;
}

/* ---------------- acceptor ---------------- */

static void refuse(int fd, uint32_t limit) {
    char msg[96];
    snprintf(msg, sizeof msg, "resource_exhausted: too many connections (limit %u)", limit);
    size_t len;
    uint8_t *f = encode_error_frame("", 0, msg, &len);
    if (f) {
        ssize_t w = send(fd, f, len, MSG_DONTWAIT | MSG_NOSIGNAL);
        (void)w;
        mem_free(f);
    }
    shutdown(fd, SHUT_WR);
    char sink[4096];
    for (int i = 0; i < 16 && recv(fd, sink, sizeof sink, MSG_DONTWAIT) > 0; i++) {}
    close(fd);
}

static void *acceptor_main(void *arg) {
    server *s = arg;
    struct pollfd pf[2] = {{.fd = s->listen_fd, .events = POLLIN}, {.fd = s->stop_fd, .events = POLLIN}};
    bool pause = false;
    for (;;) {
        mem_thread_flush();
        /* out of descriptors: wait only for the stop signal, since the listener stays readable */
        int n = pause ? poll(&pf[1], 1, NET_ACCEPT_PAUSE_MS) : poll(pf, 2, -1);
        pause = false;
        if (n < 0) {
            if (errno == EINTR) continue;
            break;
        }
        if (pf[1].revents) break;
        for (int k = 0; k < 64; k++) {
            int fd = net_accept(s->listen_fd, &s->spare_fd, s->nofd_frame, s->nofd_len);
            if (fd == NET_ACCEPT_SHED) continue;
            pause = fd == NET_ACCEPT_PAUSE;
            if (fd < 0) break;
            if (atomic_load(&stats_connections) >= (int64_t)s->cfg.max_conns) {
                refuse(fd, s->cfg.max_conns);
                continue;
            }
            net_set_nodelay(fd);
            newconn *nc = malloc(sizeof *nc);
            if (!nc) {
                close(fd);
                continue;
            }
            atomic_fetch_add(&stats_connections, 1);
            nc->fd = fd;
            loop *lp = &s->loops[s->rr++ % s->cfg.io_threads];
            pthread_mutex_lock(&lp->mu);
            nc->next = lp->incoming;
            lp->incoming = nc;
            pthread_mutex_unlock(&lp->mu);
            wake(lp->evfd);
        }
    }
    mem_thread_flush();
    return NULL;
}

/* ---------------- start / stop ---------------- */

server *server_start(const server_config *cfg, int frame_fd, char *err, size_t errlen) {
    server *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "out of memory");
        close(frame_fd);
        return NULL;
    }
    s->cfg = *cfg;
    s->listen_fd = frame_fd;
    s->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    s->spare_fd = net_spare_open();
    s->nofd_frame = encode_error_frame("", 0, "resource_exhausted: out of file descriptors", &s->nofd_len);
    pthread_mutex_init(&s->wmu, NULL);
    pthread_cond_init(&s->wcv, NULL);
    s->loops = calloc(cfg->io_threads, sizeof *s->loops);
    s->workers = calloc(cfg->workers, sizeof *s->workers);
    if (s->stop_fd < 0 || !s->loops || !s->workers || s->spare_fd < 0 || !s->nofd_frame) {
        snprintf(err, errlen, "out of memory or eventfd: %s", strerror(errno));
        goto fail_early;
    }
    for (uint32_t i = 0; i < cfg->io_threads; i++) {
        loop *lp = &s->loops[i];
        lp->srv = s;
        pthread_mutex_init(&lp->mu, NULL);
        lp->epfd = epoll_create1(EPOLL_CLOEXEC);
        lp->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
        if (lp->epfd < 0 || lp->evfd < 0 || epoll_ctl(lp->epfd, EPOLL_CTL_ADD, lp->evfd, &ev) != 0) {
            snprintf(err, errlen, "epoll/eventfd: %s", strerror(errno));
            goto fail_early;
        }
    }
    for (uint32_t i = 0; i < cfg->workers; i++)
        if (pthread_create(&s->workers[i], NULL, worker_main, s) != 0) {
            snprintf(err, errlen, "starting worker threads failed");
            goto fail_early; /* not reached in practice; threads started so far would leak */
        }
    for (uint32_t i = 0; i < cfg->io_threads; i++)
        if (pthread_create(&s->loops[i].th, NULL, loop_main, &s->loops[i]) != 0) {
            snprintf(err, errlen, "starting io threads failed");
            goto fail_early;
        }
    if (pthread_create(&s->acceptor, NULL, acceptor_main, s) != 0) {
        snprintf(err, errlen, "starting the acceptor failed");
        goto fail_early;
    }
    return s;
fail_early:
    return NULL; /* the process exits with status 1 right after; the OS reclaims */
}

static void free_job(job *j) {
    mem_free(j->frame);
    mem_free(j->res.frame);
    free(j);
}

void server_stop(server *s) {
    /* 1. no new connections */
    wake(s->stop_fd);
    pthread_join(s->acceptor, NULL);
    close(s->listen_fd);
    /* 2. no new calls; wait for the ones in flight to finish and be written */
    atomic_store(&s->draining, true);
    uint64_t deadline = now_ms() + s->cfg.drain_timeout_ms;
    while ((atomic_load(&stats_inflight) > 0 || atomic_load(&s->unsent) > 0) && now_ms() < deadline)
        usleep(10 * 1000);
    /* 3. stop workers, then loops */
    pthread_mutex_lock(&s->wmu);
    s->workers_stop = true;
    pthread_cond_broadcast(&s->wcv);
    pthread_mutex_unlock(&s->wmu);
    for (uint32_t i = 0; i < s->cfg.workers; i++) pthread_join(s->workers[i], NULL);
    atomic_store(&s->loops_stop, true);
    for (uint32_t i = 0; i < s->cfg.io_threads; i++) {
        wake(s->loops[i].evfd);
        pthread_join(s->loops[i].th, NULL);
    }
    /* 4. single-threaded from here: free what is left */
    for (job *j = s->work_head, *n; j; j = n) {
        n = j->next;
        conn_unref(j->c);
        free_job(j);
    }
    for (uint32_t i = 0; i < s->cfg.io_threads; i++) {
        loop *lp = &s->loops[i];
        for (job *j = lp->done_head, *n; j; j = n) {
            n = j->next;
            conn_unref(j->c);
            free_job(j);
        }
        for (newconn *nc = lp->incoming, *n; nc; nc = n) {
            n = nc->next;
            close(nc->fd);
            free(nc);
        }
        while (lp->conns) {
            conn_close(lp->conns); /* every job is gone: this drops the last reference */
        }
        close(lp->epfd);
        close(lp->evfd);
        pthread_mutex_destroy(&lp->mu);
    }
    close(s->stop_fd);
    close(s->spare_fd);
    mem_free(s->nofd_frame);
    pthread_mutex_destroy(&s->wmu);
    pthread_cond_destroy(&s->wcv);
    free(s->loops);
    free(s->workers);
    free(s);
}
