/* server: the frame transport's threads. One acceptor hands connections round-robin to N event-loop
 * threads (epoll, woken through an eventfd, memcached-style); a loop reads frames into buffers it
 * allocates, decodes the request header and queues the call to M workers; a worker decodes the body,
 * runs the handler, frees the request buffer (allocated on the loop thread) and passes the response
 * buffer back to the connection's loop, which writes and frees it. Pipelined calls run concurrently
 * and are answered in completion order; clients match by seq. */
#ifndef XFERD_SERVER_H
#define XFERD_SERVER_H

#include <stdint.h>

#include "handlers.h"

#define CONN_RBUF_SIZE (64 * 1024)          /* a connection's read buffer; larger frames get an exact one */
#define CONN_MAX_PENDING 256                /* calls in flight per connection before reading pauses */
#define CONN_MAX_OUT_BYTES (32u << 20)      /* unwritten response bytes per connection before reading pauses */
#define LOOP_TICK_MS 100                    /* how often loops check read timeouts */
#define LOOP_MAX_EVENTS 128
#define LOOP_READS_PER_EVENT 16             /* recv calls per readiness event, so one client can't starve others */
#define SERVER_DRAIN_MS 5000                /* calls in flight get this long to finish on shutdown */

typedef struct {
    handler_ctx hc;
    uint32_t max_frame;
    uint32_t max_conns;
    uint64_t read_timeout_ms;
    uint32_t io_threads;
    uint32_t workers;
} server_config;

typedef struct server server;

/* Starts every thread on the bound, listening frame_fd (owned by the server from now on). */
server *server_start(const server_config *cfg, int frame_fd, char *err, size_t errlen);

/* Graceful stop: closes the listener, stops reading new calls, lets calls in flight finish (up to
 * SERVER_DRAIN_MS) and flushes their responses, then joins every thread and frees everything. */
void server_stop(server *s);

#endif
