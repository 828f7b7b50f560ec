/* metrics: Prometheus text format 0.0.4 on its own port, from a tiny HTTP/1.0 responder thread that
 * multiplexes concurrent scrapes, each under a deadline. */
#ifndef XFERD_METRICS_H
#define XFERD_METRICS_H

#include <stddef.h>

#include "allocdet.h"

#define METRICS_REQ_MAX 8192     /* bytes of an HTTP request we read */
#define METRICS_IO_TIMEOUT_MS 5000 /* a scrape's whole exchange must end within this */
#define METRICS_MAX_CLIENTS 32     /* scrapes served at once; more wait in the listen backlog */

typedef struct {
    const char *version;
    malloc_impl impl; /* what serves malloc */
    int pool;         /* --alloc pool: the gauges describe the pool */
    const char *alloc_label; /* xfer_build_info's allocator label */
    int per_call;            /* --metrics on: the per-call families are exported */
} metrics_info;

/* Renders the whole exposition into a malloc'd string (*len bytes). NULL when out of memory. */
char *metrics_render(const metrics_info *mi, size_t *len);

typedef struct metrics_server metrics_server;
/* Serves GET /metrics on the listening fd (owned from now on). */
metrics_server *metrics_start(int fd, const metrics_info *mi, char *err, size_t errlen);
void metrics_stop(metrics_server *ms);

#endif
