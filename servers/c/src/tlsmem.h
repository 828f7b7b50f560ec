/* tlsmem: OpenSSL's allocations routed through the allocator layer (mem.h), so the allocator a configuration
 * selects serves them too (the pool under --alloc pool; whatever serves malloc otherwise) and they count in
 * xfer_buffer_pool_gets_total and in the allocator's own figures like every other allocation of the request
 * path. OpenSSL asks for realloc, which the layer has not: each block carries its size in a 16-byte header
 * (malloc's alignment kept). Its own counts, per thread (perthread.h) and only under --metrics on, say how much
 * of that is OpenSSL's: xfer_tls_allocations_total and xfer_tls_allocated_bytes. */
#ifndef XFERD_TLSMEM_H
#define XFERD_TLSMEM_H

#include <stddef.h>
#include <stdint.h>

/* Hands OpenSSL the functions below (CRYPTO_set_mem_functions). It must come before OpenSSL allocates
 * anything, so before any other OpenSSL call; -1 when too late. */
int tlsmem_install(void);

/* The functions themselves (CRYPTO_set_mem_functions's signatures), for the unit tests. */
void *tlsmem_malloc(size_t n, const char *file, int line);
void *tlsmem_realloc(void *p, size_t n, const char *file, int line);
void tlsmem_free(void *p, const char *file, int line);

typedef struct {
    uint64_t allocations; /* blocks OpenSSL asked for (malloc and realloc) */
    int64_t live_bytes;   /* bytes of the blocks it holds now */
} tlsmem_counts;

/* Sums every thread's counts. */
void tlsmem_counts_get(tlsmem_counts *out);

/* Frees the counters; only once OpenSSL allocates no more (after OPENSSL_cleanup). */
void tlsmem_shutdown(void);

#endif
