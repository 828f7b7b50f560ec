/* metricshttp: /metrics on its own port. One thread, a tiny HTTP/1.0 responder: it multiplexes up to
 * METRICSHTTP_MAX_CLIENTS scrapes with poll, each of which must send its request and take its answer (GET or
 * HEAD /metrics: metrics_render's exposition) within METRICSHTTP_IO_TIMEOUT_MS, so a client trickling a
 * request delays no other scrape and no shutdown. Out of descriptors, it sheds a connection with the spare
 * descriptor (net_accept) rather than spin. */
#ifndef XFERD_METRICSHTTP_H
#define XFERD_METRICSHTTP_H

#include <stddef.h>

#include "metrics.h"

#define METRICSHTTP_REQ_MAX 8192          /* bytes of an HTTP request we read */
#define METRICSHTTP_IO_TIMEOUT_MS 5000    /* a scrape's whole exchange must end within this */
#define METRICSHTTP_MAX_CLIENTS 32        /* scrapes served at once; more wait in the listen backlog */

typedef struct metricshttp metricshttp;

/* Serves GET /metrics on the listening fd (owned from now on). NULL with err on failure. */
metricshttp *metricshttp_start(int fd, const metrics_info *mi, char *err, size_t errlen);
/* Stops at once (scrapes in progress are dropped, never waited for) and frees everything. */
void metricshttp_stop(metricshttp *ms);

#endif
