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
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "blk.h"
#include "frame.h"
#include "gen.h"
#include "gencache.h"
#include "mem.h"
#include "net.h"
#include "stats.h"
#include "reqbody.h"

#define WRITE_IOV_MAX 64
#define REPLY_OVERHEAD 512 /* a response's prefix and header, at most (PROTOCOL.md "Quoting") */

typedef struct loop loop;
typedef struct job job;

typedef struct conn {
    int fd;
    uint64_t id; /* owner of the uploads begun on it; never reused */
    loop *lp;
    int refs; /* loop thread only: 1 while open + 1 per call in flight */
    bool closed, closing, paused, want_out, eof; /* closing: after a connection error; eof: peer half-closed */
    bool big; /* the last frame outgrew the read buffer: peek at the next one's length first */
    blk *rb;    /* read buffer; calls parsed from it hold references to it */
    blk *spare; /* an empty CONN_RBUF_SIZE block kept while a large frame has a block of its own */
    size_t rlen, rpos;
    uint64_t frame_start_ms; /* when the pending partial frame began, 0 when none */
    uint64_t stall_ms;       /* since when unwritten output has met a full send buffer, 0 when not */
    job *out_head, *out_tail; /* answers to write, in order */
    size_t out_bytes;
    size_t reserved; /* answer bytes expected from the calls in flight, counted against max_conn_unsent */
    int pending;
    struct conn *prev, *next;
} conn;

/* One call, from dispatch to its answer written (or an answer of the server's own: a connection error). */
struct job {
    job *next;
    conn *c;
    blk *req;           /* a reference to the block the request frame lies in, until the handler is done */
    const uint8_t *frame;
    size_t len;
    reqhdr hdr; /* its method points into frame */
    method_id m;
    size_t reserve; /* what this call's answer is expected to take, until it is queued */
    uint64_t t0_ns;
    handler_result res;
    size_t sent; /* bytes of the answer already written */
};

typedef struct newconn {
    struct newconn *next;
    int fd;
} newconn;

/* A work queue: its loops' calls for its workers (memcached's model: loops and workers are paired, so no
 * queue is shared by every thread). */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    job *head, *tail;
    int idle; /* workers waiting on cv */
    bool stop;
} work_queue;

struct loop {
    server *srv;
    pthread_t th;
    int epfd, evfd;
    work_queue *wq;
    job *batch_head, *batch_tail; /* calls parsed in this round, queued at once */
    size_t batch_n;
    pthread_mutex_t mu; /* guards the two queues below */
    newconn *incoming;
    job *done_head, *done_tail;
    conn *conns;
    size_t nconns;
};

typedef struct {
    server *srv;
    work_queue *wq;
} worker_arg;

struct server {
    server_config cfg;
    int listen_fd, stop_fd; /* stop_fd wakes the acceptor */
    int spare_fd;           /* released when accept runs out of descriptors (net_accept) */
    uint8_t *nofd_frame;    /* the seq-0 "out of file descriptors" response, encoded once */
    size_t nofd_len;
    _Atomic int64_t unsent; /* response bytes queued on every connection, for the drain */
    pthread_t acceptor;
    loop *loops;
    work_queue *queues;
    uint32_t nqueues; /* min(io_threads, workers): loop i feeds queue i % nqueues, worker j serves j % nqueues */
    pthread_t *workers;
    worker_arg *wargs;
    _Atomic bool loops_stop, draining;
    _Atomic bool cut;               /* the drain deadline passed: handlers stop long work (handler_ctx.cancel) */
    _Atomic uint32_t workers_done;  /* workers that returned, so server_stop can wait for them with a deadline */
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

/* Frees a job and whatever it still holds: its request block reference, its answer. */
static void job_free(job *j) {
    blk_unref(j->req);
    handler_result_release(&j->res);
    mem_free(j);
}

static void conn_free(conn *c) {
    conn_abort_uploads(c); /* again: an UploadBegin in flight at close may have opened one since */
    blk_unref(c->rb);
    blk_unref(c->spare);
    mem_free(c);
}

static void conn_unref(conn *c) {
    if (--c->refs == 0) conn_free(c);
}

static void conn_close(conn *c) {
    if (c->closed) return;
    c->closed = true;
    epoll_ctl(c->lp->epfd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    for (job *o = c->out_head; o;) {
        job *n = o->next;
        job_free(o);
        o = n;
    }
    c->out_head = c->out_tail = NULL;
    atomic_fetch_sub(&c->lp->srv->unsent, (int64_t)c->out_bytes);
    c->out_bytes = 0;
    blk_unref(c->rb);
    blk_unref(c->spare);
    c->rb = c->spare = NULL;
    c->rlen = c->rpos = 0;
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

/* The parts of j's answer not yet written, as iovecs (at most max); returns how many. */
static int job_iov(const job *j, struct iovec *iov, int max) {
    const handler_result *r = &j->res;
    struct iovec all[RESULT_SPANS + 2];
    int n = 0;
    all[n++] = (struct iovec){r->frame, r->len};
    for (int k = 0; k < r->nspan; k++) all[n++] = (struct iovec){(void *)r->span[k].p, r->span[k].len};
    if (r->tail_len) all[n++] = (struct iovec){r->frame + r->len, r->tail_len};
    size_t skip = j->sent;
    int out = 0;
    for (int k = 0; k < n && out < max; k++) {
        if (skip >= all[k].iov_len) {
            skip -= all[k].iov_len;
            continue;
        }
        iov[out++] = (struct iovec){(uint8_t *)all[k].iov_base + skip, all[k].iov_len - skip};
        skip = 0;
    }
    return out;
}

/* Writes queued answers with writev: header and bulk bytes straight from where they are. */
static void conn_flush(conn *c) {
    while (c->out_head && !c->closed) {
        struct iovec iov[WRITE_IOV_MAX];
        int n = 0;
        for (job *o = c->out_head; o && n < WRITE_IOV_MAX; o = o->next) n += job_iov(o, iov + n, WRITE_IOV_MAX - n);
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
        c->out_bytes -= left;
        while (left && c->out_head) {
            job *o = c->out_head;
            size_t rest = handler_result_size(&o->res) - o->sent;
            size_t k = rest < left ? rest : left;
            o->sent += k;
            left -= k;
            if (o->sent == handler_result_size(&o->res)) {
                c->out_head = o->next;
                if (!c->out_head) c->out_tail = NULL;
                job_free(o); /* a worker allocated the answer: the cross-thread free */
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

/* Appends j (its answer in j->res) to the connection's output. */
static void conn_queue(conn *c, job *j) {
    size_t len = handler_result_size(&j->res);
    j->next = NULL;
    j->sent = 0;
    if (c->out_tail) c->out_tail->next = j;
    else c->out_head = j;
    c->out_tail = j;
    c->out_bytes += len;
    atomic_fetch_add(&c->lp->srv->unsent, (int64_t)len);
}

/* A connection error: one response with seq 0 and method "", then close. */
static void conn_error(conn *c, const char *msg) {
    c->closing = true;
    conn_update_events(c);
    job *j = mem_calloc(1, sizeof *j);
    if (j) j->res.frame = encode_error_frame("", 0, msg, &j->res.len);
    if (!j || !j->res.frame) {
        if (j) mem_free(j);
        conn_close(c);
        return;
    }
    conn_queue(c, j);
    conn_flush(c);
}

/* The size a call's answer will have at most, known from the request alone: Read and Echo carry data
 * back, the rest a few fields. Counting it at dispatch keeps the answers of calls already running
 * inside --max-conn-unsent too. */
static size_t expected_reply(method_id m, const frame_parts *p, uint32_t max_chunk) {
    size_t n = REPLY_OVERHEAD;
    if (m == M_ECHO || m == M_META) return n + p->body_len; /* Meta answers its entries again */
    if (m != M_READ) return n;
    rb_read r;
    if (rb_read_decode(p->body, p->body_len, &r) != 0) return n; /* malformed: answered with a short error */
    return n + (r.length < max_chunk ? r.length : max_chunk);
}

/* Queues the calls parsed in this round for the workers: one lock and at most one wake-up per worker. */
static void loop_flush_batch(loop *lp) {
    if (!lp->batch_head) return;
    work_queue *q = lp->wq;
    pthread_mutex_lock(&q->mu);
    if (q->tail) q->tail->next = lp->batch_head;
    else q->head = lp->batch_head;
    q->tail = lp->batch_tail;
    int wake_n = q->idle < (int)lp->batch_n ? q->idle : (int)lp->batch_n;
    pthread_mutex_unlock(&q->mu);
    for (int k = 0; k < wake_n; k++) pthread_cond_signal(&q->cv);
    lp->batch_head = lp->batch_tail = NULL;
    lp->batch_n = 0;
}

/* Hands one complete frame (at frame, len bytes, inside block b, whose reference passes to the call) to the
 * workers; -1 when the connection errored. */
static int conn_dispatch(conn *c, blk *b, const uint8_t *frame, size_t len) {
    server *s = c->lp->srv;
    frame_parts p;
    frame_split(frame, len, &p);
    reqhdr hdr;
    const char *herr = reqhdr_decode(p.header, p.header_len, &hdr);
    job *j = herr ? NULL : mem_calloc(1, sizeof *j);
    if (!j) {
        blk_unref(b);
        conn_error(c, herr ? herr : "internal: out of memory queueing a call");
        return -1;
    }
    j->c = c;
    j->req = b;
    j->frame = frame;
    j->len = len;
    j->hdr = hdr;
    j->m = method_lookup(hdr.method, hdr.method_len);
    j->reserve = expected_reply(j->m, &p, s->cfg.hc.max_chunk);
    c->reserved += j->reserve;
    j->t0_ns = stats_enabled ? stats_now_ns() : 0;
    c->refs++;
    c->pending++;
    atomic_fetch_add(&stats_inflight, 1);
    loop *lp = c->lp;
    if (lp->batch_tail) lp->batch_tail->next = j;
    else lp->batch_head = j;
    lp->batch_tail = j;
    lp->batch_n++;
    if (conn_full(c)) conn_pause(c);
    return 0;
}

/* Replaces the read buffer by an empty block of cap bytes (the spare when it fits), keeping the unparsed
 * bytes [rpos, rlen). -1 after a connection error. */
static int conn_new_rbuf(conn *c, size_t cap) {
    size_t have = c->rlen - c->rpos;
    blk *nb;
    if (c->spare && c->spare->cap == cap) {
        nb = c->spare;
        c->spare = NULL;
    } else if (!(nb = blk_new(cap))) {
        conn_error(c, "internal: out of memory for a frame");
        return -1;
    }
    if (have) memcpy(nb->data, c->rb->data + c->rpos, have);
    if (!c->spare && c->rb->cap == CONN_RBUF_SIZE && blk_sole(c->rb)) c->spare = c->rb; /* keep one for later */
    else blk_unref(c->rb);
    c->rb = nb;
    c->rpos = 0;
    c->rlen = have;
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
    size_t have = c->rlen - c->rpos, cap = c->rb->cap;
    if (c->rpos && (total > cap - c->rpos || cap - c->rlen < FRAME_PREFIX_LEN)) {
        if (!blk_sole(c->rb)) return conn_new_rbuf(c, cap); /* calls still read the front: leave it to them */
        memmove(c->rb->data, c->rb->data + c->rpos, have);
        c->rpos = 0;
        c->rlen = have;
    }
    if (c->rlen < cap || total <= cap) return 0;
    size_t ncap = cap * 2 < total ? cap * 2 : total;
    if (have >= total / FRAME_EXACT_FRACTION) ncap = total;
    return conn_new_rbuf(c, ncap);
}

/* At a frame boundary with nothing buffered, after a large frame: peeks at the next frame's length, and when
 * the frame is larger than the read buffer and a FRAME_EXACT_FRACTION of it is already waiting in the socket,
 * gives it a block of its exact size before reading, so its bytes land where the call will use them (no
 * copy of its first part out of a smaller buffer). The bound of PROTOCOL.md holds: the block is at most
 * FRAME_EXACT_FRACTION times what arrived. */
static void conn_presize(conn *c) {
    uint8_t pre[FRAME_PREFIX_LEN];
    ssize_t n = recv(c->fd, pre, sizeof pre, MSG_PEEK | MSG_DONTWAIT);
    size_t total;
    xerr e;
    int avail = 0;
    if (n != (ssize_t)sizeof pre ||
        frame_parse(pre, sizeof pre, c->lp->srv->cfg.max_frame, &total, &e) != FRAME_NEED_MORE ||
        total <= c->rb->cap || ioctl(c->fd, FIONREAD, &avail) != 0 || (size_t)avail < total / FRAME_EXACT_FRACTION) {
        c->big = false;
        return;
    }
    conn_new_rbuf(c, total);
}

/* Parses every complete frame in the read buffer. */
static void conn_parse(conn *c) {
    server *s = c->lp->srv;
    while (!c->closed && !c->closing && c->rpos < c->rlen) {
        if (atomic_load(&s->draining)) { /* shutting down: frames not yet parsed are not served */
            c->rpos = c->rlen;
            break;
        }
        if (conn_full(c)) {
            conn_pause(c);
            return;
        }
        size_t total;
        xerr e;
        frame_status st = frame_parse(c->rb->data + c->rpos, c->rlen - c->rpos, s->cfg.max_frame, &total, &e);
        if (st == FRAME_ERROR) {
            conn_error(c, e.msg);
            return;
        }
        if (st == FRAME_NEED_MORE) {
            if (!c->frame_start_ms) c->frame_start_ms = now_ms();
            conn_make_room(c, total);
            return;
        }
        blk *b = c->rb;
        const uint8_t *frame = b->data + c->rpos;
        c->big = total > CONN_RBUF_SIZE;
        if (c->rpos == 0 && total == c->rlen && total == b->cap && b->cap > CONN_RBUF_SIZE) {
            /* the block sized to exactly this frame becomes the call's; the connection reads on into another */
            c->rb = c->spare;
            c->spare = NULL;
            c->rlen = c->rpos = 0;
            if (!c->rb && !(c->rb = blk_new(CONN_RBUF_SIZE))) {
                c->rb = b; /* conn_close frees it */
                conn_error(c, "internal: out of memory for a read buffer");
                return;
            }
        } else {
            blk_ref(b); /* the call reads its frame where it is */
            c->rpos += total;
        }
        c->frame_start_ms = 0;
        if (conn_dispatch(c, b, frame, total) != 0) return;
    }
    if (!c->closed && c->rpos == c->rlen) {
        c->frame_start_ms = 0;
        if (blk_sole(c->rb)) c->rpos = c->rlen = 0;
        else if (c->rb->cap - c->rlen < CONN_RBUF_SIZE / 4) conn_new_rbuf(c, CONN_RBUF_SIZE); /* calls read it */
    }
}

static void conn_read(conn *c) {
    for (int r = 0; r < LOOP_READS_PER_EVENT && !c->closed && !c->closing && !c->paused && !c->eof; r++) {
        if (c->rlen == c->rb->cap) { /* full of complete frames waiting? parse first */
            conn_parse(c);
            if (c->closed || c->closing || c->paused || c->rlen == c->rb->cap) return;
        }
        if (c->big && c->rpos == c->rlen) {
            conn_presize(c);
            if (c->closed || c->closing) return;
        }
        ssize_t n = recv(c->fd, c->rb->data + c->rlen, c->rb->cap - c->rlen, 0);
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
            c->rpos = c->rlen;
            if (blk_sole(c->rb)) c->rpos = c->rlen = 0;
            else if (conn_new_rbuf(c, CONN_RBUF_SIZE) != 0) return;
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
        conn *c = mem_calloc(1, sizeof *c);
        blk *rb = c ? blk_new(CONN_RBUF_SIZE) : NULL;
        if (!c || !rb) {
            mem_free(c);
            close(list->fd);
            atomic_fetch_sub(&stats_connections, 1);
        } else {
            static _Atomic uint64_t last_conn_id;
            c->fd = list->fd;
            c->id = atomic_fetch_add(&last_conn_id, 1) + 1;
            c->lp = lp;
            c->refs = 1;
            c->rb = rb;
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
        mem_free(list);
        list = n;
    }

    while (done) {
        job *n = done->next;
        conn *c = done->c;
        c->pending--;
        c->reserved -= done->reserve;
        if (c->closed || c->closing || !done->res.frame) {
            if (!done->res.frame && !c->closed) conn_close(c); /* no response could be built */
            job_free(done);
        } else {
            conn_queue(c, done);
            conn_flush(c);
        }
        /* after queueing: the drain sees a call in flight or its unsent answer, never neither */
        atomic_fetch_sub(&stats_inflight, 1);
        if (!c->closed && c->eof && c->pending == 0 && !c->out_head) conn_close(c);
        if (!c->closed && !c->closing && !c->eof) conn_maybe_resume(c);
        conn_unref(c);
        done = n;
    }
}

static void loop_sweep(loop *lp, uint64_t now) {
    if (lp == &lp->srv->loops[0]) gencache_expire(now); /* an idle server holds no generated content */
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
        loop_flush_batch(lp);
        loop_take_incoming(lp);
        loop_flush_batch(lp); /* frames a resumed connection had buffered */
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
    worker_arg *wa = arg;
    server *s = wa->srv;
    work_queue *q = wa->wq;
    for (;;) {
        pthread_mutex_lock(&q->mu);
        while (!q->head && !q->stop) {
            pthread_mutex_unlock(&q->mu);
            mem_thread_flush(); /* hand foreign frees back before sleeping */
            pthread_mutex_lock(&q->mu);
            if (q->head || q->stop) break;
            q->idle++;
            pthread_cond_wait(&q->cv, &q->mu);
            q->idle--;
        }
        job *j = q->head;
        if (!j || q->stop) { /* at the drain deadline, queued calls are dropped, not run */
            pthread_mutex_unlock(&q->mu);
            break;
        }
        q->head = j->next;
        if (!q->head) q->tail = NULL;
        pthread_mutex_unlock(&q->mu);
        j->next = NULL;

        frame_parts p;
        frame_split(j->frame, j->len, &p);
        handler_ctx hc = s->cfg.hc;
        hc.conn_id = j->c->id; /* immutable once the conn is created: safe to read here */
        hc.cancel = &s->cut;
        if (handle_request(&hc, j->m, &j->hdr, p.body, p.body_len, j->req, &j->res) != 0) {
            j->res.frame = NULL;
            j->res.code = XERR_INTERNAL;
        }
        /* done with the request (the header points into it); a block of its own, allocated on the loop
         * thread, is freed here */
        blk_unref(j->req);
        j->req = NULL;
        j->frame = NULL;
        if (stats_enabled)
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
    atomic_fetch_add(&s->workers_done, 1); /* last: nothing of the server is touched after this */
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
            newconn *nc = mem_alloc(sizeof *nc);
            if (!nc) {
                close(fd);
                continue;
            }
            atomic_fetch_add(&stats_connections, 1);
            atomic_fetch_add(&stats_accepted, 1);
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
    s->nqueues = cfg->io_threads < cfg->workers ? cfg->io_threads : cfg->workers;
    s->loops = calloc(cfg->io_threads, sizeof *s->loops);
    s->queues = calloc(s->nqueues, sizeof *s->queues);
    s->workers = calloc(cfg->workers, sizeof *s->workers);
    s->wargs = calloc(cfg->workers, sizeof *s->wargs);
    if (s->stop_fd < 0 || !s->loops || !s->queues || !s->workers || !s->wargs || s->spare_fd < 0 || !s->nofd_frame) {
        snprintf(err, errlen, "out of memory or eventfd: %s", strerror(errno));
        goto fail_early;
    }
    for (uint32_t i = 0; i < s->nqueues; i++) {
        pthread_mutex_init(&s->queues[i].mu, NULL);
        pthread_cond_init(&s->queues[i].cv, NULL);
    }
    for (uint32_t i = 0; i < cfg->io_threads; i++) {
        loop *lp = &s->loops[i];
        lp->srv = s;
        lp->wq = &s->queues[i % s->nqueues];
        pthread_mutex_init(&lp->mu, NULL);
        lp->epfd = epoll_create1(EPOLL_CLOEXEC);
        lp->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
        if (lp->epfd < 0 || lp->evfd < 0 || epoll_ctl(lp->epfd, EPOLL_CTL_ADD, lp->evfd, &ev) != 0) {
            snprintf(err, errlen, "epoll/eventfd: %s", strerror(errno));
            goto fail_early;
        }
    }
    for (uint32_t i = 0; i < cfg->workers; i++) {
        s->wargs[i] = (worker_arg){.srv = s, .wq = &s->queues[i % s->nqueues]};
        if (pthread_create(&s->workers[i], NULL, worker_main, &s->wargs[i]) != 0) {
            snprintf(err, errlen, "starting worker threads failed");
            goto fail_early; /* not reached in practice; threads started so far would leak */
        }
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

bool server_stop(server *s) {
    uint64_t deadline = now_ms() + s->cfg.drain_timeout_ms; /* main calls this as soon as the signal comes */
    /* 1. no new connections */
    wake(s->stop_fd);
    pthread_join(s->acceptor, NULL);
    close(s->listen_fd);
    /* 2. no new calls; wait for the ones in flight to finish and be written */
    atomic_store(&s->draining, true);
    while (atomic_load(&stats_inflight) > 0 || atomic_load(&s->unsent) > 0) {
        uint64_t now = now_ms();
        if (now >= deadline) break;
        usleep((useconds_t)(deadline - now < 10 ? deadline - now : 10) * 1000); /* never past the deadline */
    }
    /* 3. the deadline (or nothing left): cut what remains, without waiting for any of it. Handlers stop their
     * long work (s->cut), queued calls are dropped, the loops stop (they never block), and every connection is
     * closed now, whatever its calls in the workers are doing; their answers are discarded. */
    atomic_store(&s->cut, true);
    for (uint32_t i = 0; i < s->nqueues; i++) {
        work_queue *q = &s->queues[i];
        pthread_mutex_lock(&q->mu);
        q->stop = true;
        pthread_cond_broadcast(&q->cv);
        pthread_mutex_unlock(&q->mu);
    }
    atomic_store(&s->loops_stop, true);
    for (uint32_t i = 0; i < s->cfg.io_threads; i++) {
        wake(s->loops[i].evfd);
        pthread_join(s->loops[i].th, NULL);
    }
    /* the loops are gone: their connections are this thread's; calls still held by workers keep theirs
     * allocated (a reference each) until step 5 */
    for (uint32_t i = 0; i < s->cfg.io_threads; i++) {
        loop *lp = &s->loops[i];
        for (newconn *nc = lp->incoming, *n; nc; nc = n) {
            n = nc->next;
            close(nc->fd);
            mem_free(nc);
            atomic_fetch_sub(&stats_connections, 1);
        }
        lp->incoming = NULL;
        while (lp->conns) conn_close(lp->conns);
    }
    /* 4. the workers end their current call within a block of gen: work; one stuck where nothing can cut
     * it (a read from a hung disk) must not hold the exit past the bound: after STOP_WORKER_GRACE_MS the
     * caller exits without freeing (the connections are closed already). */
    uint64_t grace = now_ms() + STOP_WORKER_GRACE_MS;
    while (atomic_load(&s->workers_done) < s->cfg.workers && now_ms() < grace) usleep(1000);
    if (atomic_load(&s->workers_done) < s->cfg.workers) return false;
    for (uint32_t i = 0; i < s->cfg.workers; i++) pthread_join(s->workers[i], NULL);
    /* 5. single-threaded from here: free what is left */
    for (uint32_t i = 0; i < s->nqueues; i++) {
        work_queue *q = &s->queues[i];
        for (job *j = q->head, *n; j; j = n) {
            n = j->next;
            conn_unref(j->c);
            job_free(j);
        }
        pthread_mutex_destroy(&q->mu);
        pthread_cond_destroy(&q->cv);
    }
    for (uint32_t i = 0; i < s->cfg.io_threads; i++) {
        loop *lp = &s->loops[i];
        for (job *j = lp->done_head, *n; j; j = n) {
            n = j->next;
            conn_unref(j->c);
            job_free(j);
        }
        for (job *j = lp->batch_head, *n; j; j = n) { /* not reached: batches are queued before loops block */
            n = j->next;
            conn_unref(j->c);
            job_free(j);
        }
        close(lp->epfd);
        close(lp->evfd);
        pthread_mutex_destroy(&lp->mu);
    }
    gen_crc_cache_reset(); /* the generated blocks handlers cached (gencache.h) */
    close(s->stop_fd);
    close(s->spare_fd);
    mem_free(s->nofd_frame);
    free(s->loops);
    free(s->queues);
    free(s->workers);
    free(s->wargs);
    free(s);
    return true;
}
