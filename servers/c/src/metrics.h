/* metrics: the Prometheus text exposition (format 0.0.4) of every family xferd-c exports (PROTOCOL.md
 * "Metrics"), rendered at scrape time from the per-thread counters (stats.h, allocstat.h, mem.h), the gauges
 * and the allocator's own figures. Serving it over HTTP is metricshttp.h's. */
#ifndef XFERD_METRICS_H
#define XFERD_METRICS_H

#include <stddef.h>

#include "allocdet.h"

typedef struct {
    const char *version;
    malloc_impl impl; /* what serves malloc */
    int pool;         /* --alloc pool: the gauges describe the pool */
    const char *alloc_label; /* xfer_build_info's allocator label */
    int per_call;            /* --metrics on: the per-call families are exported */
    int tls;                 /* a TLS listener: its families are exported */
} metrics_info;

/* Renders the whole exposition into a malloc'd string (*len bytes). NULL when out of memory. */
char *metrics_render(const metrics_info *mi, size_t *len);

#endif
