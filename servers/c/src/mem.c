/* mem: malloc or the pool, counted per thread. */
#include "mem.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "allocstat.h"
#include "monotime.h"
#include "perthread.h"
#include "pool.h"

typedef struct {
    perthread_link link; /* first: the block is perthread.h's */
    _Atomic uint64_t gets;
} counter_block;

static mem_mode mode = MEM_SYSTEM;
static int counting = 1;
static perthread_reg reg = PERTHREAD_REG_INIT(0); /* every thread's counters, kept after the thread ends */
static _Atomic uint64_t orphan_gets; /* counts of threads that could not get a block */
static _Thread_local counter_block *mine;
static uint32_t sample_every;              /* 0: no allocation is timed */
static _Thread_local uint32_t since_sample; /* this thread's allocations since its last timed one */

void mem_init(mem_mode m) { mode = m; }
mem_mode mem_get_mode(void) { return mode; }
void mem_set_counting(int on) { counting = on; }
void mem_set_sampling(uint32_t every) { sample_every = every; }

static void count_get(void) {
    if (!mine && !(mine = perthread_join(&reg, sizeof *mine))) {
        atomic_fetch_add_explicit(&orphan_gets, 1, memory_order_relaxed);
        return;
    }
    perthread_add(&mine->gets, 1);
}

static inline void *raw_alloc(size_t n) {
    if (mode == MEM_POOL) return pool_alloc(n);
    if (counting) count_get();
    return malloc(n ? n : 1);
}

/* The sampled path, out of line so the common one stays a counter increment and a compare. */
static __attribute__((noinline)) void *timed_alloc(size_t n) {
    since_sample = 0;
    uint64_t t0 = monotime_ns();
    void *p = raw_alloc(n);
    allocstat_record(monotime_ns() - t0);
    return p;
}

void *mem_alloc(size_t n) {
    void *p = sample_every && ++since_sample >= sample_every ? timed_alloc(n) : raw_alloc(n);
    if (__builtin_expect(!p, 0) && counting) allocstat_failed();
    return p;
}

void *mem_calloc(size_t n, size_t size) {
    if (size && n > SIZE_MAX / size) return NULL;
    void *p = mem_alloc(n * size);
    if (p) memset(p, 0, n * size);
    return p;
}

void mem_free(void *p) {
    if (mode == MEM_POOL) pool_free(p);
    else free(p);
}

static void *pb_alloc(void *data, size_t n) {
    (void)data;
    return mem_alloc(n);
}
static void pb_free(void *data, void *p) {
    (void)data;
    mem_free(p);
}
static ProtobufCAllocator pb_allocator = {.alloc = pb_alloc, .free = pb_free, .allocator_data = NULL};

ProtobufCAllocator *mem_pb_allocator(void) { return &pb_allocator; }

void mem_thread_flush(void) {
    if (mode == MEM_POOL) pool_thread_flush();
}

static void add_gets(void *block, void *sum) { *(uint64_t *)sum += perthread_load(&((counter_block *)block)->gets); }

void mem_counts_get(mem_counts *out) {
    if (mode == MEM_POOL) {
        pool_stats ps;
        pool_stats_get(&ps);
        out->gets = ps.gets;
        out->news = ps.news;
        return;
    }
    uint64_t g = atomic_load_explicit(&orphan_gets, memory_order_relaxed);
    perthread_each(&reg, add_gets, &g);
    out->gets = g;
    out->news = g;
}

void mem_shutdown(void) {
    perthread_clear(&reg, NULL);
    mine = NULL;
    allocstat_shutdown();
    if (mode == MEM_POOL) pool_destroy();
}
