/* server: the frame transport's threads. One acceptor hands connections round-robin to N event-loop
 * threads (epoll, woken through an eventfd, memcached-style); a loop reads frames into blocks it
 * allocates, decodes the request header and queues the call, referencing its frame in place, on its own
 * work queue (min(N, M) queues, each served by its share of the M workers); a worker decodes the body in
 * place, runs the handler, drops the request's block (freeing it when it held the last reference: allocated
 * on the loop thread) and passes the answer back to the connection's loop, which writes it with writev
 * (header plus bulk bytes where they are) and frees it. Pipelined calls run concurrently and are answered
 * in completion order; clients match by seq. */
#ifndef XFERD_SERVER_H
#define XFERD_SERVER_H

#include <stdbool.h>
#include <stdint.h>

#include "handlers.h"

#define CONN_RBUF_SIZE (64 * 1024)          /* a connection's first read buffer; it grows as a larger frame arrives */
#define FRAME_EXACT_FRACTION 16             /* once this fraction of a frame arrived, its buffer takes its whole size */
#define LOOP_TICK_MS 100                    /* how often loops check read and write timeouts */
#define STOP_WORKER_GRACE_MS 300            /* after the drain deadline, what the workers get to end their calls */
#define LOOP_MAX_EVENTS 128
#define LOOP_READS_PER_EVENT 16             /* recv calls per readiness event, so one client can't starve others */

typedef struct {
    handler_ctx hc;
    uint32_t max_frame;
    uint32_t max_conns;
    uint64_t read_timeout_ms;
    uint32_t io_threads;
    uint32_t workers;
    uint32_t max_conn_calls;   /* outstanding calls per connection before it stops being read */
    uint64_t max_conn_unsent;  /* unwritten response bytes per connection before it stops being read */
    uint64_t write_timeout_ms; /* output that meets a full send buffer this long closes the connection */
    uint64_t drain_timeout_ms; /* calls in flight at shutdown get this long */
} server_config;

typedef struct server server;

/* Starts every thread on the bound, listening frame_fd (owned by the server from now on). */
server *server_start(const server_config *cfg, int frame_fd, char *err, size_t errlen);

/* Graceful stop, called as soon as the signal comes: closes the listener, stops reading new calls, lets calls
 * in flight finish and their responses be written (up to drain_timeout_ms from the call), then cuts the rest:
 * tells the handlers to stop long work (handler_ctx.cancel), drops queued calls, stops the loops and closes
 * every connection at once. Then it waits up to STOP_WORKER_GRACE_MS for the workers, joins every thread,
 * frees everything and returns true. false: a worker was still busy in a call nothing can cut (a read from a
 * hung disk); nothing was freed, no thread but the workers still runs, and the caller must exit at once
 * (_exit) rather than free what the worker may still touch. */
bool server_stop(server *s);

#endif
