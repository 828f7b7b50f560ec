/* tlsmem: OpenSSL's malloc, realloc and free on the allocator layer, sized and counted. */
#include "tlsmem.h"

#include <openssl/crypto.h>
#include <stdatomic.h>
#include <string.h>

#include "mem.h"
#include "perthread.h"
#include "stats.h"

#define TLSMEM_HDR 16 /* the block's size, padded to malloc's alignment */

typedef struct {
    perthread_link link; /* first: the block is perthread.h's */
    _Atomic uint64_t allocations;
    _Atomic int64_t live_bytes; /* a thread may free what another allocated: only the sum means anything */
} counter_block;

static perthread_reg reg = PERTHREAD_REG_INIT(0);
static _Thread_local counter_block *mine;

static void count(uint64_t allocations, int64_t bytes) {
    if (!stats_enabled) return; /* --metrics off: no allocation count on the request path */
    if (!mine && !(mine = perthread_join(&reg, sizeof *mine))) return;
    perthread_add(&mine->allocations, allocations);
    perthread_add_signed(&mine->live_bytes, bytes);
}

static size_t size_of(const void *p) {
    size_t n;
    memcpy(&n, (const uint8_t *)p - TLSMEM_HDR, sizeof n);
    return n;
}

void *tlsmem_malloc(size_t n, const char *file, int line) {
    (void)file;
    (void)line;
    if (n > SIZE_MAX - TLSMEM_HDR) return NULL;
    uint8_t *b = mem_alloc(n + TLSMEM_HDR);
    if (!b) return NULL;
    memcpy(b, &n, sizeof n);
    count(1, (int64_t)n);
    return b + TLSMEM_HDR;
}

void tlsmem_free(void *p, const char *file, int line) {
    (void)file;
    (void)line;
    if (!p) return;
    count(0, -(int64_t)size_of(p));
    mem_free((uint8_t *)p - TLSMEM_HDR);
}

/* The layer has no realloc: a new block, the bytes copied, the old one freed (OpenSSL reallocs few buffers, and
 * rarely). realloc's contract otherwise: NULL p allocates, size 0 frees; on failure p is left as it was. */
void *tlsmem_realloc(void *p, size_t n, const char *file, int line) {
    if (!p) return tlsmem_malloc(n, file, line);
    if (n == 0) {
        tlsmem_free(p, file, line);
        return NULL;
    }
    size_t old = size_of(p);
    void *q = tlsmem_malloc(n, file, line);
    if (!q) return NULL;
    memcpy(q, p, old < n ? old : n);
    tlsmem_free(p, file, line);
    return q;
}

int tlsmem_install(void) { return CRYPTO_set_mem_functions(tlsmem_malloc, tlsmem_realloc, tlsmem_free) ? 0 : -1; }

static void add_counts(void *block, void *sum) {
    counter_block *b = block;
    tlsmem_counts *out = sum;
    out->allocations += perthread_load(&b->allocations);
    out->live_bytes += atomic_load_explicit(&b->live_bytes, memory_order_relaxed);
}

void tlsmem_counts_get(tlsmem_counts *out) {
    memset(out, 0, sizeof *out);
    perthread_each(&reg, add_counts, out);
}

void tlsmem_shutdown(void) {
    perthread_clear(&reg, NULL);
    mine = NULL;
}
