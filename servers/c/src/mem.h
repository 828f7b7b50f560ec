/* mem: the allocator layer every buffer of the request path goes through (frame buffers, response
 * buffers, protobuf-c decoding). In MEM_SYSTEM mode it is malloc/free (whatever library serves them:
 * glibc or a preloaded one); in MEM_POOL mode it is the built-in per-thread pool (pool.h). */
#ifndef XFERD_MEM_H
#define XFERD_MEM_H

#include <protobuf-c/protobuf-c.h>
#include <stddef.h>
#include <stdint.h>

typedef enum { MEM_SYSTEM = 0, MEM_POOL = 1 } mem_mode;

/* Chooses the mode; call once before any other thread starts. */
void mem_init(mem_mode mode);
mem_mode mem_get_mode(void);

/* --metrics off: stop counting allocations (xfer_buffer_pool_*_total); call before any other thread starts.
 * The pool (MEM_POOL) keeps its own per-thread counts: they are its bookkeeping, not instrumentation. */
void mem_set_counting(int on);

/* Times one allocation in every `every` per thread into the allocstat histogram (0: none; --metrics off
 * passes 0, so no clock is read on the request path). Call before any other thread starts. */
void mem_set_sampling(uint32_t every);

void *mem_alloc(size_t n);
void *mem_calloc(size_t n, size_t size); /* zeroed; NULL when n * size overflows */
void mem_free(void *p);

/* The allocator handed to protobuf-c's __unpack / __free_unpacked. */
ProtobufCAllocator *mem_pb_allocator(void);

/* Before a thread blocks: return pending cross-thread frees to their owners (pool mode). */
void mem_thread_flush(void);

typedef struct {
    uint64_t gets; /* buffers asked for */
    uint64_t news; /* of which were freshly allocated (every one, without the pool) */
} mem_counts;

/* Sums every thread's counters. */
void mem_counts_get(mem_counts *out);

/* Frees the layer's own bookkeeping (and the pool); only once every other thread has stopped. */
void mem_shutdown(void);

#endif
