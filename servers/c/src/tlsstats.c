/* tlsstats: shared counters of the TLS handshakes. */
#include "tlsstats.h"

#include <stdatomic.h>
#include <string.h>

static _Atomic uint64_t handshakes, resumed, failures[TLS_FAIL__COUNT], hist[STATS_NBUCKETS + 1], sum_ns;

static _Atomic int64_t open_conns; /* kept under --metrics off too, like xfer_connections */

static const char *const reason_names[TLS_FAIL__COUNT] = {"timeout", "not_tls", "eof", "client_alert", "protocol",
                                                          "internal"};

const char *tlsstats_reason_name(tls_fail_reason r) {
    return (unsigned)r < TLS_FAIL__COUNT ? reason_names[r] : "internal";
}

static void add(_Atomic uint64_t *c, uint64_t d) { atomic_fetch_add_explicit(c, d, memory_order_relaxed); }
static uint64_t load(_Atomic uint64_t *c) { return atomic_load_explicit(c, memory_order_relaxed); }

void tlsstats_handshake_done(uint64_t dur_ns, bool was_resumed) {
    atomic_fetch_add_explicit(&open_conns, 1, memory_order_relaxed);
    if (!stats_enabled) return;
    add(&handshakes, 1);
    if (was_resumed) add(&resumed, 1);
    add(&hist[stats_bucket(dur_ns)], 1);
    add(&sum_ns, dur_ns);
}

void tlsstats_handshake_failed(tls_fail_reason r) {
    if (!stats_enabled) return;
    add(&failures[(unsigned)r < TLS_FAIL__COUNT ? r : TLS_FAIL_INTERNAL], 1);
}

void tlsstats_sum(tlsstats_totals *out) {
    memset(out, 0, sizeof *out);
    out->handshakes = load(&handshakes);
    out->resumed = load(&resumed);
    for (int r = 0; r < TLS_FAIL__COUNT; r++) out->failures[r] = load(&failures[r]);
    for (int k = 0; k <= STATS_NBUCKETS; k++) out->hist[k] = load(&hist[k]);
    out->sum_ns = load(&sum_ns);
}

void tlsstats_closed(void) { atomic_fetch_sub_explicit(&open_conns, 1, memory_order_relaxed); }

int64_t tlsstats_open(void) { return atomic_load_explicit(&open_conns, memory_order_relaxed); }
