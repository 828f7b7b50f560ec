/* stats: per-thread blocks in the perthread registry. */
#include "stats.h"

#include <string.h>

const double stats_bounds[STATS_NBUCKETS] = {0.00001, 0.000015, 0.00002, 0.00003, 0.00005, 0.00007, 0.0001,
                                             0.00015, 0.0002,   0.0003,  0.0005,  0.0007,  0.001,   0.0015,
                                             0.002,   0.003,    0.005,   0.007,   0.01,    0.015,   0.02,
                                             0.03,    0.05,     0.07,    0.1,     0.15,    0.2,     0.3,
                                             0.5,     0.7,      1,       1.5,     2,       3,       5,
                                             7,       10};
const char *const stats_bound_text[STATS_NBUCKETS] = {
    /* as Go's client and Python's prometheus_client print them (%g), so that every `le` agrees */
    "1e-05", "1.5e-05", "2e-05", "3e-05", "5e-05", "7e-05", "0.0001", "0.00015", "0.0002", "0.0003",
    "0.0005",  "0.0007",   "0.001",   "0.0015",  "0.002",   "0.003",   "0.005",  "0.007",   "0.01",   "0.015",
    "0.02",    "0.03",     "0.05",    "0.07",    "0.1",     "0.15",    "0.2",    "0.3",     "0.5",    "0.7",
    "1",       "1.5",      "2",       "3",       "5",       "7",       "10"};

bool stats_enabled = true;
_Atomic int64_t stats_connections;
_Atomic int64_t stats_listener_connections[LISTENER__COUNT];
_Atomic int64_t stats_inflight;
_Atomic uint64_t stats_accepted;

static perthread_reg reg = PERTHREAD_REG_INIT(0);
static _Thread_local stats_block *mine;

int stats_bucket(uint64_t dur_ns) {
    double s = (double)dur_ns / 1e9;
    int b = 0;
    while (b < STATS_NBUCKETS && s > stats_bounds[b]) b++;
    return b;
}

void stats_record(method_id m, xerr_code code, uint64_t dur_ns, uint64_t up_bytes, uint64_t down_bytes) {
    if (!mine && !(mine = perthread_join(&reg, sizeof *mine))) return; /* out of memory: this call goes uncounted */
    if ((unsigned)m >= M__COUNT) m = M_UNKNOWN;
    if ((unsigned)code >= XERR__COUNT) code = XERR_INTERNAL;
    perthread_add(&mine->requests[m][code], 1);
    perthread_add(&mine->hist[m][stats_bucket(dur_ns)], 1);
    perthread_add(&mine->sum_ns[m], dur_ns);
    if (up_bytes) perthread_add(&mine->bytes_upload, up_bytes);
    if (down_bytes) perthread_add(&mine->bytes_download, down_bytes);
}

static void add_block(void *block, void *sum) {
    stats_block *b = block, *out = sum;
    for (int m = 0; m < M__COUNT; m++) {
        for (int c = 0; c < XERR__COUNT; c++) out->requests[m][c] += perthread_load(&b->requests[m][c]);
        for (int k = 0; k <= STATS_NBUCKETS; k++) out->hist[m][k] += perthread_load(&b->hist[m][k]);
        out->sum_ns[m] += perthread_load(&b->sum_ns[m]);
    }
    out->bytes_upload += perthread_load(&b->bytes_upload);
    out->bytes_download += perthread_load(&b->bytes_download);
}

void stats_sum(stats_block *out) {
    memset(out, 0, sizeof *out);
    perthread_each(&reg, add_block, out);
}

void stats_shutdown(void) {
    perthread_clear(&reg, NULL);
    mine = NULL;
}
