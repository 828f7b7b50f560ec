/* tlsstats: the TLS listener's figures (PROTOCOL.md, "xferd-c over TLS"), named and labelled as xferd-go's:
 * handshakes completed and resumed, handshakes failed by reason, the handshake duration histogram on the
 * request latency's bucket bounds (stats.h), and the TLS connections open past their handshake. A handshake
 * happens once per connection, not per call, so plain shared counters do (relaxed atomic adds), not stats.h's
 * per-thread blocks. Under --metrics off only the open connections are counted (stats_enabled). */
#ifndef XFERD_TLSSTATS_H
#define XFERD_TLSSTATS_H

#include <stdbool.h>
#include <stdint.h>

#include "stats.h"

/* Why a handshake failed: the label `reason`. */
typedef enum {
    TLS_FAIL_TIMEOUT = 0,  /* not ended within --tls-handshake-timeout */
    TLS_FAIL_NOT_TLS,      /* the first byte is not a TLS handshake record (a plaintext frame, garbage) */
    TLS_FAIL_EOF,          /* the client closed or reset the connection before the end */
    TLS_FAIL_CLIENT_ALERT, /* the client ended it with an alert (it does not trust the certificate, ...) */
    TLS_FAIL_PROTOCOL,     /* OpenSSL refused the records or messages: malformed, no common version or cipher */
    TLS_FAIL_INTERNAL,     /* the server's own failure (out of memory); xferd-go has no such reason */
    TLS_FAIL__COUNT
} tls_fail_reason;

typedef struct {
    uint64_t handshakes, resumed;
    uint64_t failures[TLS_FAIL__COUNT];
    uint64_t hist[STATS_NBUCKETS + 1]; /* per bucket, not cumulative */
    uint64_t sum_ns;
} tlsstats_totals;

const char *tlsstats_reason_name(tls_fail_reason r);

/* A handshake ended: counted, and its connection open (until tlsstats_closed). */
void tlsstats_handshake_done(uint64_t dur_ns, bool resumed);
void tlsstats_handshake_failed(tls_fail_reason r);
/* A connection counted open by tlsstats_handshake_done closed. */
void tlsstats_closed(void);
/* TLS connections open past their handshake. */
int64_t tlsstats_open(void);

void tlsstats_sum(tlsstats_totals *out);

#endif
