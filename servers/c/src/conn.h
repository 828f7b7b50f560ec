/* conn: a frame connection's state and I/O, on its loop's thread only (what redis's networking.c is to ae).
 * It reads into blocks it allocates (a frame larger than the read buffer grows it as its bytes arrive, never
 * all at once from a length prefix), decodes each request header and dispatches the call (a job) to its loop's
 * batch, referencing the frame where it was read; it writes answers with writev (header plus bulk bytes where
 * they are), holds backpressure (--max-conn-calls, --max-conn-unsent), sends connection errors, and closes:
 * on request, on a peer gone or half-closed once answered, at a read or write timeout. */
#ifndef XFERD_CONN_H
#define XFERD_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "blk.h"
#include "handlers.h"
#include "reqhdr.h"
#include "transport.h"

#define CONN_RBUF_SIZE (64 * 1024) /* a connection's first read buffer; it grows as a larger frame arrives */
#define FRAME_EXACT_FRACTION 16    /* once this fraction of a frame arrived, its buffer takes its whole size */
#define LOOP_READS_PER_EVENT 16    /* recv calls per readiness event, so one client can't starve others */

typedef struct loop loop;
typedef struct job job;

typedef struct conn {
    int fd;
    uint64_t id; /* owner of the uploads begun on it; never reused */
    loop *lp;
    const transport *tp; /* how its bytes reach the socket: plain or TLS */
    void *xp;            /* the transport's own state (a TLS session), NULL for plain */
    int refs; /* loop thread only: 1 while open + 1 per call in flight */
    bool closed, closing, paused, want_out, eof; /* closing: after a connection error; eof: peer half-closed */
    bool handshaking; /* the transport's handshake has not ended: no frames yet */
    uint32_t events;  /* the epoll events registered for it */
    bool again;       /* on its loop's list of connections to read again (input the transport buffered) */
    struct conn *again_next;
    uint64_t opened_ms; /* when its loop took it: the handshake's deadline counts from here */
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
    struct conn *prev, *next; /* the loop's connections */
} conn;

/* One call, from dispatch to its answer written (or an answer of the server's own: a connection error). */
struct job {
    job *next;
    conn *c;
    blk *req; /* a reference to the block the request frame lies in, until the handler is done */
    const uint8_t *frame;
    size_t len;
    reqhdr hdr; /* its method points into frame */
    method_id m;
    size_t reserve; /* what this call's answer is expected to take, until it is queued */
    uint64_t t0_ns;
    handler_result res;
    size_t sent; /* bytes of the answer already written */
};

/* A connection the acceptor admitted through transport tp (counted open, stats_conn_opened): registered with
 * lp's epoll and linked into its connections. Out of memory or epoll refusing it, fd is closed and the count
 * given back. */
void conn_open(loop *lp, int fd, const transport *tp);

/* What epoll reported for c (its events bits): writes, reads, hang-ups. */
void conn_on_event(conn *c, uint32_t events);

/* A worker finished j (its answer in j->res, or none when none could be built): queued and written, or
 * dropped when c is closing; c resumes reading when it had paused. */
void conn_call_done(job *j);

/* Closes c when a partial frame is older than --read-timeout, its output has met a full send buffer for
 * --write-timeout, or its handshake has not ended within --tls-handshake-timeout (now: monotime_ms()). */
void conn_check_timeouts(conn *c, uint64_t now);

/* Reads again the connections whose transport holds input epoll will not report (conn_read stopped at its
 * per-event budget, or a paused connection resumed, with bytes already decrypted): lp->again, taken whole. */
void conn_read_again(loop *lp);

/* After the loop stopped: forgets lp->again (the list's references dropped). */
void conn_again_clear(loop *lp);

/* Closes at once: output dropped, uploads it began aborted; c stays allocated while calls hold it. */
void conn_close(conn *c);

/* Frees a call that will never be answered (the drain's cut), with its hold on its connection. */
void job_drop(job *j);

#endif
