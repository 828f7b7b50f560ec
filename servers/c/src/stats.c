/* stats: per-thread blocks. */
#include "stats.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const double stats_bounds[STATS_NBUCKETS] = {0.0001, 0.00015, 0.0002, 0.0003, 0.0005, 0.0007, 0.001, 0.0015,
                                             0.002,  0.003,   0.005,  0.007,  0.01,   0.015,  0.02,  0.03,
                                             0.05,   0.07,    0.1,    0.15,   0.2,    0.3,    0.5,   0.7,
                                             1,      1.5,     2,      3,      5,      7,      10};
const char *const stats_bound_text[STATS_NBUCKETS] = {
    "0.0001", "0.00015", "0.0002", "0.0003", "0.0005", "0.0007", "0.001", "0.0015", "0.002", "0.003", "0.005",
    "0.007",  "0.01",    "0.015",  "0.02",   "0.03",   "0.05",   "0.07",  "0.1",    "0.15",  "0.2",   "0.3",
    "0.5",    "0.7",     "1",      "1.5",    "2",      "3",      "5",     "7",      "10"};

bool stats_enabled = true;
_Atomic int64_t stats_connections;
_Atomic int64_t stats_inflight;
_Atomic uint64_t stats_accepted;

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static stats_block *blocks;
static _Thread_local stats_block *mine;

static inline void bump(_Atomic uint64_t *c, uint64_t d) {
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + d, memory_order_relaxed);
}

uint64_t stats_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void stats_record(method_id m, xerr_code code, uint64_t dur_ns, uint64_t up_bytes, uint64_t down_bytes) {
    if (!mine) {
        stats_block *b = calloc(1, sizeof *b);
        if (!b) return; /* out of memory: this call goes uncounted */
        pthread_mutex_lock(&reg_mu);
        b->next = blocks;
        blocks = b;
        pthread_mutex_unlock(&reg_mu);
        mine = b;
    }
    if ((unsigned)m >= M__COUNT) m = M_UNKNOWN;
    if ((unsigned)code >= XERR__COUNT) code = XERR_INTERNAL;
    bump(&mine->requests[m][code], 1);
    double s = (double)dur_ns / 1e9;
    int b = 0;
    while (b < STATS_NBUCKETS && s > stats_bounds[b]) b++;
    bump(&mine->hist[m][b], 1);
    bump(&mine->sum_ns[m], dur_ns);
    if (up_bytes) bump(&mine->bytes_upload, up_bytes);
    if (down_bytes) bump(&mine->bytes_download, down_bytes);
}

void stats_sum(stats_block *out) {
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&reg_mu);
    for (stats_block *b = blocks; b; b = b->next) {
        for (int m = 0; m < M__COUNT; m++) {
            for (int c = 0; c < XERR__COUNT; c++)
                out->requests[m][c] += atomic_load_explicit(&b->requests[m][c], memory_order_relaxed);
            for (int k = 0; k <= STATS_NBUCKETS; k++)
                out->hist[m][k] += atomic_load_explicit(&b->hist[m][k], memory_order_relaxed);
            out->sum_ns[m] += atomic_load_explicit(&b->sum_ns[m], memory_order_relaxed);
        }
        out->bytes_upload += atomic_load_explicit(&b->bytes_upload, memory_order_relaxed);
        out->bytes_download += atomic_load_explicit(&b->bytes_download, memory_order_relaxed);
    }
    pthread_mutex_unlock(&reg_mu);
}

void stats_shutdown(void) {
    pthread_mutex_lock(&reg_mu);
    while (blocks) {
        stats_block *n = blocks->next;
        free(blocks);
        blocks = n;
    }
    pthread_mutex_unlock(&reg_mu);
    mine = NULL;
}
