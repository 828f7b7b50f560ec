/* conn: reading, dispatching, writing and closing a connection. */
#include "conn.h"

#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "frame.h"
#include "loop.h"
#include "mem.h"
#include "monotime.h"
#include "net.h"
#include "reqbody.h"
#include "stats.h"

#define WRITE_IOV_MAX 64
#define REPLY_OVERHEAD 512 /* a response's prefix and header, at most (PROTOCOL.md "Quoting") */

static const server_config *cfg_of(const conn *c) { return c->lp->sh->cfg; }

/* Whether the frame code wants to read c now. */
static bool conn_reading(const conn *c) { return !c->closed && !c->paused && !c->closing && !c->eof; }

static void conn_update_events(conn *c) {
    if (c->closed) return;
    uint32_t want = 0;
    if (conn_reading(c)) want |= EPOLLIN | EPOLLRDHUP;
    if (c->want_out) want |= EPOLLOUT;
    uint32_t events = c->tp->interest(c, want);
    if (events == c->events) return; /* called after every event: a system call only for a change */
    c->events = events;
    struct epoll_event ev = {.events = events, .data.ptr = c};
    epoll_ctl(c->lp->epfd, EPOLL_CTL_MOD, c->fd, &ev);
}

/* Input the transport took off the socket (decrypted, part of a record) is not an epoll event: c goes on its
 * loop's list to be read again this round, holding a reference until then. */
static void conn_again_if_buffered(conn *c) {
    if (c->again || !conn_reading(c) || !c->tp->buffered(c)) return;
    c->again = true;
    c->refs++;
    c->again_next = c->lp->again;
    c->lp->again = c;
}

/* ---------------- lifetime ---------------- */

/* An upload belongs to its connection (PROTOCOL.md "Connections and uploads"): aborted when it closes. */
static void conn_abort_uploads(conn *c) {
    if (c->lp) store_upload_abort_owner(cfg_of(c)->hc.st, c->id);
}

/* Frees a job and whatever it still holds: its request block reference, its answer. */
static void job_free(job *j) {
    blk_unref(j->req);
    handler_result_release(&j->res);
    mem_free(j);
}

static void conn_free(conn *c) {
    conn_abort_uploads(c); /* again: an UploadBegin in flight at close may have opened one since */
    c->tp->close(c);       /* a connection that never opened still has its transport's state */
    blk_unref(c->rb);
    blk_unref(c->spare);
    mem_free(c);
}

static void conn_unref(conn *c) {
    if (--c->refs == 0) conn_free(c);
}

void job_drop(job *j) {
    conn_unref(j->c);
    job_free(j);
}

void conn_open(loop *lp, int fd, const transport *tp) {
    static _Atomic uint64_t last_conn_id;
    conn *c = mem_calloc(1, sizeof *c);
    blk *rb = c ? blk_new(CONN_RBUF_SIZE) : NULL;
    if (!c || !rb) {
        mem_free(c);
        close(fd);
        stats_conn_closed(tp->listener);
        return;
    }
    c->fd = fd;
    c->id = atomic_fetch_add(&last_conn_id, 1) + 1;
    c->lp = lp;
    c->tp = tp;
    c->refs = 1;
    c->rb = rb;
    c->handshaking = tp->handshake != NULL;
    c->opened_ms = monotime_ms();
    struct epoll_event ev = {.events = 0, .data.ptr = c};
    if (tp->open(c) != 0 || (ev.events = c->events = tp->interest(c, EPOLLIN | EPOLLRDHUP),
                             epoll_ctl(lp->epfd, EPOLL_CTL_ADD, c->fd, &ev) != 0)) {
        close(c->fd);
        conn_free(c);
        stats_conn_closed(tp->listener);
        return;
    }
    c->next = lp->conns;
    if (lp->conns) lp->conns->prev = c;
    lp->conns = c;
    lp->nconns++;
}

void conn_close(conn *c) {
    if (c->closed) return;
    c->closed = true;
    epoll_ctl(c->lp->epfd, EPOLL_CTL_DEL, c->fd, NULL);
    c->tp->close(c); /* its goodbye (TLS close_notify) before the descriptor goes */
    close(c->fd);
    for (job *o = c->out_head; o;) {
        job *n = o->next;
        job_free(o);
        o = n;
    }
    c->out_head = c->out_tail = NULL;
    atomic_fetch_sub(&c->lp->sh->unsent, (int64_t)c->out_bytes);
    c->out_bytes = 0;
    blk_unref(c->rb);
    blk_unref(c->spare);
    c->rb = c->spare = NULL;
    c->rlen = c->rpos = 0;
    if (c->prev) c->prev->next = c->next;
    else c->lp->conns = c->next;
    if (c->next) c->next->prev = c->prev;
    c->lp->nconns--;
    stats_conn_closed(c->tp->listener);
    conn_abort_uploads(c); /* at once: its slots and staged bytes are free for others */
    conn_unref(c);
}

/* After the last byte of a closing connection went out: the transport's goodbye, half-close, drop unread
 * input, close. */
static void conn_finish(conn *c) {
    c->tp->close(c);
    net_half_close(c->fd);
    conn_close(c);
}

/* ---------------- backpressure ---------------- */

static void conn_parse(conn *c);

/* At a backpressure bound (PROTOCOL.md "Backpressure"): neither read nor dispatch more. */
static bool conn_full(const conn *c) {
    const server_config *cfg = cfg_of(c);
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
        if (c->rlen > c->rpos) c->frame_start_ms = monotime_ms(); /* the client wasn't the slow one */
        conn_update_events(c);
        conn_parse(c); /* frames read before the pause go first */
        conn_again_if_buffered(c);
    }
}

/* ---------------- writing ---------------- */

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

/* Counts w bytes as written: every answer now wholly out is freed. */
static void conn_consume(conn *c, size_t w) {
    size_t left = w;
    c->stall_ms = 0; /* the client is taking its answers */
    atomic_fetch_sub(&c->lp->sh->unsent, (int64_t)w);
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

/* The send buffer is full: wait for EPOLLOUT, and time the stall (--write-timeout). */
static void conn_wait_writable(conn *c) {
    if (!c->stall_ms) c->stall_ms = monotime_ms();
    c->want_out = true;
    conn_update_events(c); /* also when already waiting: a TLS write may now wait for input instead */
}

/* Every queued answer is out: stop waiting to write, then close or read on. */
static void conn_flushed(conn *c) {
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

/* Writes queued answers with writev: header and bulk bytes straight from where they are. */
static void conn_flush(conn *c) {
    while (c->out_head && !c->closed) {
        struct iovec iov[WRITE_IOV_MAX];
        int n = 0;
        for (job *o = c->out_head; o && n < WRITE_IOV_MAX; o = o->next) n += job_iov(o, iov + n, WRITE_IOV_MAX - n);
        ssize_t w = c->tp->writev(c, iov, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) conn_wait_writable(c);
            else conn_close(c); /* peer gone */
            return;
        }
        conn_consume(c, (size_t)w);
    }
    if (!c->closed) conn_flushed(c);
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
    atomic_fetch_add(&c->lp->sh->unsent, (int64_t)len);
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

void conn_call_done(job *j) {
    conn *c = j->c;
    c->pending--;
    c->reserved -= j->reserve;
    if (c->closed || c->closing || !j->res.frame) {
        if (!j->res.frame && !c->closed) conn_close(c); /* no response could be built */
        job_free(j);
    } else {
        conn_queue(c, j);
        conn_flush(c);
    }
    /* after queueing: the drain sees a call in flight or its unsent answer, never neither */
    atomic_fetch_sub(&stats_inflight, 1);
    if (!c->closed && c->eof && c->pending == 0 && !c->out_head) conn_close(c);
    if (!c->closed && !c->closing && !c->eof) conn_maybe_resume(c);
    conn_unref(c);
}

/* ---------------- dispatching ---------------- */

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

/* Hands one complete frame (at frame, len bytes, inside block b, whose reference passes to the call) to the
 * loop's batch for the workers; -1 when the connection errored. */
static int conn_dispatch(conn *c, blk *b, const uint8_t *frame, size_t len) {
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
    j->reserve = expected_reply(j->m, &p, cfg_of(c)->hc.max_chunk);
    c->reserved += j->reserve;
    j->t0_ns = stats_enabled ? monotime_ns() : 0;
    c->refs++;
    c->pending++;
    atomic_fetch_add(&stats_inflight, 1);
    loop_queue_call(c->lp, j);
    if (conn_full(c)) conn_pause(c);
    return 0;
}

/* ---------------- reading ---------------- */

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
        frame_parse(pre, sizeof pre, cfg_of(c)->max_frame, &total, &e) != FRAME_NEED_MORE ||
        total <= c->rb->cap || ioctl(c->fd, FIONREAD, &avail) != 0 || (size_t)avail < total / FRAME_EXACT_FRACTION) {
        c->big = false;
        return;
    }
    conn_new_rbuf(c, total);
}

/* The complete frame of `total` bytes at rpos, for a call: a block sized to exactly this frame passes to the
 * call whole and the connection reads on into another; otherwise the call takes a reference and reads the
 * frame where it is. Returns the block (its reference the call's), or NULL after a connection error. */
static blk *conn_take_frame(conn *c, size_t total) {
    blk *b = c->rb;
    c->big = total > CONN_RBUF_SIZE;
    if (c->rpos == 0 && total == c->rlen && total == b->cap && b->cap > CONN_RBUF_SIZE) {
        c->rb = c->spare;
        c->spare = NULL;
        c->rlen = c->rpos = 0;
        if (!c->rb && !(c->rb = blk_new(CONN_RBUF_SIZE))) {
            c->rb = b; /* conn_close frees it */
            conn_error(c, "internal: out of memory for a read buffer");
            return NULL;
        }
    } else {
        blk_ref(b);
        c->rpos += total;
    }
    return b;
}

/* Parses every complete frame in the read buffer. */
static void conn_parse(conn *c) {
    loop_shared *sh = c->lp->sh;
    while (!c->closed && !c->closing && c->rpos < c->rlen) {
        if (atomic_load(&sh->draining)) { /* shutting down: frames not yet parsed are not served */
            c->rpos = c->rlen;
            break;
        }
        if (conn_full(c)) {
            conn_pause(c);
            return;
        }
        size_t total;
        xerr e;
        frame_status st = frame_parse(c->rb->data + c->rpos, c->rlen - c->rpos, sh->cfg->max_frame, &total, &e);
        if (st == FRAME_ERROR) {
            conn_error(c, e.msg);
            return;
        }
        if (st == FRAME_NEED_MORE) {
            if (!c->frame_start_ms) c->frame_start_ms = monotime_ms();
            conn_make_room(c, total);
            return;
        }
        const uint8_t *frame = c->rb->data + c->rpos;
        blk *b = conn_take_frame(c, total);
        if (!b) return;
        c->frame_start_ms = 0;
        if (conn_dispatch(c, b, frame, total) != 0) return;
    }
    if (!c->closed && c->rpos == c->rlen) {
        c->frame_start_ms = 0;
        if (blk_sole(c->rb)) c->rpos = c->rlen = 0;
        else if (c->rb->cap - c->rlen < CONN_RBUF_SIZE / 4) conn_new_rbuf(c, CONN_RBUF_SIZE); /* calls read it */
    }
}

static void conn_read_some(conn *c) {
    for (int r = 0; r < LOOP_READS_PER_EVENT && !c->closed && !c->closing && !c->paused && !c->eof; r++) {
        if (c->rlen == c->rb->cap) { /* full of complete frames waiting? parse first */
            conn_parse(c);
            if (c->closed || c->closing || c->paused || c->rlen == c->rb->cap) return;
        }
        if (c->big && c->rpos == c->rlen && c->tp->peekable) {
            conn_presize(c);
            if (c->closed || c->closing) return;
        }
        ssize_t n = c->tp->read(c, c->rb->data + c->rlen, c->rb->cap - c->rlen);
        if (n == 0) { /* the peer is done sending: answer what it sent, then close */
            c->eof = true;
            if (c->pending == 0 && !c->out_head) conn_close(c);
            else conn_update_events(c);
            return;
        }
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK) conn_close(c);
            else if (!c->frame_start_ms && c->tp->partial(c)) c->frame_start_ms = monotime_ms(); /* a begun record */
            return;
        }
        c->rlen += (size_t)n;
        if (atomic_load(&c->lp->sh->draining)) { /* shutting down: take no new calls */
            c->rpos = c->rlen;
            if (blk_sole(c->rb)) c->rpos = c->rlen = 0;
            else if (conn_new_rbuf(c, CONN_RBUF_SIZE) != 0) return;
            continue;
        }
        conn_parse(c);
    }
}

static void conn_read(conn *c) {
    conn_read_some(c);
    if (c->closed) return;
    conn_update_events(c);     /* a TLS read may have to wait for the socket to take output */
    conn_again_if_buffered(c); /* the budget ran out, or a pause came, with input the transport holds */
}

/* One step of the transport's handshake; once it ends, frames flow. */
static void conn_handshake(conn *c) {
    switch (c->tp->handshake(c)) {
    case XPORT_HS_AGAIN: conn_update_events(c); return;
    case XPORT_HS_FAILED: conn_close(c); return;
    case XPORT_HS_DONE:
        c->handshaking = false;
        conn_update_events(c);
        conn_read(c); /* a request may have come with the handshake's last flight */
        return;
    }
}

void conn_on_event(conn *c, uint32_t events) {
    if (c->closed) return;
    c->refs++; /* keep c valid across this event */
    if (c->handshaking) {
        conn_handshake(c);
        conn_unref(c);
        return;
    }
    uint32_t can = c->tp->ready(c, events);
    if (can & EPOLLOUT) conn_flush(c);
    if (!c->closed && (can & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))) conn_read(c);
    if (!c->closed && (events & (EPOLLHUP | EPOLLERR)) && !c->out_head) conn_close(c);
    if (!c->closed) conn_update_events(c); /* what the transport waits for may have changed */
    conn_unref(c);
}

void conn_read_again(loop *lp) {
    conn *list = lp->again;
    lp->again = NULL; /* what this round's reads add waits for the next round */
    while (list) {
        conn *c = list, *n = c->again_next;
        c->again = false;
        c->again_next = NULL;
        if (!c->closed) conn_read(c);
        conn_unref(c);
        list = n;
    }
}

void conn_again_clear(loop *lp) {
    while (lp->again) {
        conn *c = lp->again;
        lp->again = c->again_next;
        c->again = false;
        conn_unref(c);
    }
}

void conn_check_timeouts(conn *c, uint64_t now) {
    const server_config *cfg = cfg_of(c);
    if (c->handshaking) {
        if (now - c->opened_ms >= cfg->handshake_timeout_ms) {
            c->tp->handshake_expired(c);
            conn_close(c);
        }
        return;
    }
    if (!c->paused && c->frame_start_ms && now - c->frame_start_ms >= cfg->read_timeout_ms) conn_close(c);
    else if (c->out_head && c->stall_ms && now - c->stall_ms >= cfg->write_timeout_ms) conn_close(c); /* --write-timeout */
}
