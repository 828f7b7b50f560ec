/* server: the frame transport's threads, started and stopped together, and its acceptor. One acceptor thread
 * hands connections round-robin to --io-threads event loops (loop.h: epoll, woken through an eventfd,
 * memcached-style); a loop's connections (conn.h) read frames into blocks, decode request headers and queue
 * the calls, referencing their frames in place, on the loop's work queue, served by its share of the
 * --workers workers (worker.h), which run the handlers and pass the answers back to the loop to write with
 * writev. Pipelined calls run concurrently and are answered in completion order; clients match by seq. A
 * second listener may serve the same frames over TLS: its connections go to the same loops with the TLS
 * transport (transport.h), and --max-conns bounds each listener apart. The stop is the drain of PROTOCOL.md
 * "Shutdown". */
#ifndef XFERD_SERVER_H
#define XFERD_SERVER_H

#include <stdbool.h>
#include <stdint.h>

#include "handlers.h"
#include "transport.h"

#define STOP_WORKER_GRACE_MS 300 /* after the drain deadline, what the workers get to end their calls */

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
    const transport *tls;          /* the TLS listener's transport (tls.h); NULL: no TLS listener */
    uint64_t handshake_timeout_ms; /* a handshake must end within this from the connection's accept */
} server_config;

typedef struct server server;

/* Starts every thread on the bound, listening frame_fd and tls_fd (-1: none; cfg->tls set when not), owned by
 * the server from now on. */
server *server_start(const server_config *cfg, int frame_fd, int tls_fd, char *err, size_t errlen);

/* Graceful stop, called as soon as the signal comes: closes the listener, stops reading new calls, lets calls
 * in flight finish and their responses be written (up to drain_timeout_ms from the call), then cuts the rest:
 * tells the handlers to stop long work (handler_ctx.cancel), drops queued calls, stops the loops and closes
 * every connection at once. Then it waits up to STOP_WORKER_GRACE_MS for the workers, joins every thread,
 * frees everything and returns true. false: a worker was still busy in a call nothing can cut (a read from a
 * hung disk); nothing was freed, no thread but the workers still runs, and the caller must exit at once
 * (_exit) rather than free what the worker may still touch. */
bool server_stop(server *s);

#endif
