/* xferd-c-allocbench: the latency of single 64-byte allocations per allocator, the measure of the C
 * memory-pool report (P99 ns of one allocation under N threads with cross-thread frees, failures,
 * contention events).
 *
 * --alloc glibc|jemalloc|tcmalloc|mimalloc: malloc/free, the library preloaded exactly as xferd-c's --alloc
 * does it (allocdet: re-exec with LD_PRELOAD, then detection must name the library asked for);
 * --alloc pool: xferd-c's built-in pool (pool_alloc/pool_free) on glibc.
 *
 * Each of --threads threads keeps --live blocks alive in a ring; every allocation is timed alone with
 * CLOCK_MONOTONIC and the block it replaces in the ring is freed, by this thread or, for a --cross fraction
 * of them, handed through a single-producer ring to the next thread, which frees it (a cross-thread free).
 * The timer's own cost (median of back-to-back clock reads) is measured first and subtracted from every
 * sample. Bounded by --ops allocations per thread and --seconds.
 * Prints one line of key=value: percentiles in ns, failures, cross-thread frees, pool lock contention. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "allocdet.h"
#include "monotime.h"
#include "pool.h"

#define AB_SIZE 64
#define AB_MAX_THREADS 16
#define AB_RING 16384         /* cross-thread hand-off ring per thread (power of two) */
#define AB_TIMER_PAIRS 200000 /* clock-read pairs timing the timer */
#define AB_MAX_LIVE 65536

typedef struct {
    void *slot[AB_RING];
    _Atomic unsigned head, tail; /* one producer (the previous thread), one consumer (this one) */
    _Atomic int done;            /* the consumer has left its loop and drains no more until the end */
} handoff;

typedef struct {
    int id;
    uint64_t ops;
    uint32_t *samples;
    uint64_t n, failures, cross_frees, ring_full;
} worker;

static int use_pool;
static unsigned nthreads, live_n;
static double cross_frac, deadline_s;
static uint64_t timer_ns;
static handoff rings[AB_MAX_THREADS];
static pthread_barrier_t start_bar, end_bar;


static inline void *ab_alloc(size_t n) { return use_pool ? pool_alloc(n) : malloc(n); }
static inline void ab_free(void *p) {
    if (use_pool) pool_free(p);
    else free(p);
}

static int ring_push(handoff *r, void *p) {
    unsigned h = atomic_load_explicit(&r->head, memory_order_relaxed);
    if (h - atomic_load_explicit(&r->tail, memory_order_acquire) == AB_RING) return -1;
    r->slot[h % AB_RING] = p;
    atomic_store_explicit(&r->head, h + 1, memory_order_release);
    return 0;
}

/* Frees what the previous thread handed over: each one a cross-thread free. */
static uint64_t ring_drain(handoff *r) {
    unsigned t = atomic_load_explicit(&r->tail, memory_order_relaxed);
    unsigned h = atomic_load_explicit(&r->head, memory_order_acquire);
    for (unsigned i = t; i != h; i++) ab_free(r->slot[i % AB_RING]);
    atomic_store_explicit(&r->tail, h, memory_order_release);
    return h - t;
}

/* Hands p to the next thread; while its ring is full, frees what this thread was handed (so a cycle of
 * full rings cannot stall) and yields (two cores carry more threads). Gives up when the consumer has
 * stopped or the run's time is over: the caller frees p itself. Not timed. */
static int hand_over(handoff *out, handoff *in, void *p, uint64_t *cross_frees) {
    while (ring_push(out, p) != 0) {
        if (atomic_load_explicit(&out->done, memory_order_acquire) || (double)monotime_ns() / 1e9 > deadline_s) return -1;
        *cross_frees += ring_drain(in);
        sched_yield();
    }
    return 0;
}

/* xorshift: which frees cross, reproducibly per thread */
static inline uint64_t rnd(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void *run(void *arg) {
    worker *w = arg;
    void **live = calloc(live_n, sizeof *live);
    handoff *out = &rings[(w->id + 1) % nthreads], *in = &rings[w->id];
    uint64_t seed = 0x9e3779b97f4a7c15ull * (uint64_t)(w->id + 1);
    uint64_t cross_cut = (uint64_t)(cross_frac * (double)UINT64_MAX);
    /* warm-up, untimed: every thread's cache and the first pages exist before the clock starts */
    for (unsigned i = 0; i < live_n; i++) live[i] = ab_alloc(AB_SIZE);
    pthread_barrier_wait(&start_bar);
    for (uint64_t i = 0; i < w->ops; i++) {
        uint64_t t0 = monotime_ns();
        void *p = ab_alloc(AB_SIZE);
        uint64_t t1 = monotime_ns();
        if (!p) {
            w->failures++;
            continue;
        }
        *(volatile char *)p = (char)i; /* touched, as a real caller would */
        uint64_t d = t1 - t0 > timer_ns ? t1 - t0 - timer_ns : 0;
        w->samples[w->n++] = d > UINT32_MAX ? UINT32_MAX : (uint32_t)d;
        unsigned k = (unsigned)(i % live_n);
        void *victim = live[k];
        live[k] = p;
        if (victim) {
            int crosses = nthreads > 1 && rnd(&seed) < cross_cut;
            if (!crosses || hand_over(out, in, victim, &w->cross_frees) != 0) { /* handed over, or freed here */
                w->ring_full += crosses; /* the next thread stopped: freed here instead */
                ab_free(victim);
            }
        }
        w->cross_frees += ring_drain(in);
        if ((i & 1023) == 0 && (double)t1 / 1e9 > deadline_s) break;
    }
    atomic_store_explicit(&in->done, 1, memory_order_release);
    pthread_barrier_wait(&end_bar); /* every producer has stopped: what is left in the ring is final */
    w->cross_frees += ring_drain(in);
    for (unsigned i = 0; i < live_n; i++) ab_free(live[i]);
    if (use_pool) pool_thread_flush();
    free(live);
    return NULL;
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static uint32_t pct(const uint32_t *s, uint64_t n, double q) {
    if (!n) return 0;
    uint64_t i = (uint64_t)(q * (double)(n - 1));
    return s[i];
}

/* The timer's own cost: the median of AB_TIMER_PAIRS back-to-back reads. */
static uint64_t measure_timer(void) {
    uint32_t *d = malloc(AB_TIMER_PAIRS * sizeof *d);
    if (!d) return 0;
    for (int i = 0; i < AB_TIMER_PAIRS; i++) {
        uint64_t a = monotime_ns(), b = monotime_ns();
        d[i] = (uint32_t)(b - a);
    }
    qsort(d, AB_TIMER_PAIRS, sizeof *d, cmp_u32);
    uint64_t m = d[AB_TIMER_PAIRS / 2];
    free(d);
    return m;
}

static int usage(void) {
    fprintf(stderr, "usage: xferd-c-allocbench --alloc glibc|jemalloc|tcmalloc|mimalloc|pool [--threads 1..%d] "
                    "[--ops N] [--cross 0..1] [--live 1..%d] [--seconds S]\n",
            AB_MAX_THREADS, AB_MAX_LIVE);
    return 2;
}

typedef struct {
    const char *alloc;
    long threads, live;
    double seconds;
    unsigned long long ops;
} ab_options;

/* The flags into o (--cross into cross_frac). 0, or the exit status after the message. */
static int parse_args(int argc, char **argv, ab_options *o) {
    *o = (ab_options){.alloc = "glibc", .threads = 1, .live = 256, .seconds = 10, .ops = 200000};
    for (int i = 1; i < argc; i += 2) {
        if (i + 1 >= argc) return usage();
        const char *v = argv[i + 1];
        char *end = NULL;
        if (!strcmp(argv[i], "--alloc")) o->alloc = v, end = (char *)v + strlen(v);
        else if (!strcmp(argv[i], "--threads")) o->threads = strtol(v, &end, 10);
        else if (!strcmp(argv[i], "--ops")) o->ops = strtoull(v, &end, 10);
        else if (!strcmp(argv[i], "--cross")) cross_frac = strtod(v, &end);
        else if (!strcmp(argv[i], "--live")) o->live = strtol(v, &end, 10);
        else if (!strcmp(argv[i], "--seconds")) o->seconds = strtod(v, &end);
        else return usage();
        if (!*v || *end) {
            fprintf(stderr, "xferd-c-allocbench: %s %s: not a number\n", argv[i], v);
            return 2;
        }
    }
    if (o->threads < 1 || o->threads > AB_MAX_THREADS || o->live < 1 || o->live > AB_MAX_LIVE || o->ops < 1 ||
        o->ops > 100000000ull || !(cross_frac >= 0 && cross_frac <= 1) || !(o->seconds > 0 && o->seconds <= 600)) {
        fprintf(stderr, "xferd-c-allocbench: --threads 1..%d, --live 1..%d, --ops 1..1e8, --cross 0..1, "
                        "--seconds (0, 600]\n", AB_MAX_THREADS, AB_MAX_LIVE);
        return 2;
    }
    return 0;
}

/* Preloads the allocator asked for (re-exec), as xferd-c does, then checks what serves malloc. 0, or the exit
 * status after the message. */
static int choose_allocator(const char *alloc, char **argv, malloc_impl *impl) {
    char err[512], lib[512];
    int known = 0;
    const char *names[] = {"glibc", "jemalloc", "tcmalloc", "mimalloc", "pool"};
    for (int i = 0; i < 5; i++) known |= !strcmp(alloc, names[i]);
    if (!known) {
        fprintf(stderr, "xferd-c-allocbench: --alloc %s: want glibc, jemalloc, tcmalloc, mimalloc or pool\n", alloc);
        return 2;
    }
    if (allocdet_preload(alloc, argv, err, sizeof err) != 0) {
        fprintf(stderr, "xferd-c-allocbench: %s\n", err);
        return 1;
    }
    malloc_impl want = allocdet_expected(alloc);
    *impl = allocdet_detect(lib, sizeof lib);
    if (*impl != want) {
        fprintf(stderr, "xferd-c-allocbench: --alloc %s asked for %s, but malloc is served by %s (%s)\n", alloc,
                allocdet_name(want), allocdet_name(*impl), lib);
        return 1;
    }
    return 0;
}

/* What the threads measured, all together. */
typedef struct {
    uint32_t *samples; /* sorted */
    uint64_t n, failures, cross, ring_full;
    double seconds;
    pool_stats ps0, ps1; /* the pool's counters before and after (--alloc pool) */
} ab_result;

/* Runs nthreads threads of ops allocations each for at most seconds. 0, or 1 out of memory. */
static int run_threads(unsigned long long ops, double seconds, ab_result *res) {
    worker ws[AB_MAX_THREADS];
    pthread_t th[AB_MAX_THREADS];
    for (unsigned i = 0; i < nthreads; i++) {
        ws[i] = (worker){.id = (int)i, .ops = ops, .samples = malloc(ops * sizeof(uint32_t))};
        if (!ws[i].samples) {
            fprintf(stderr, "xferd-c-allocbench: out of memory for %llu samples\n", ops);
            return 1;
        }
    }
    pthread_barrier_init(&start_bar, NULL, nthreads + 1);
    pthread_barrier_init(&end_bar, NULL, nthreads);
    if (use_pool) pool_stats_get(&res->ps0);
    deadline_s = (double)monotime_ns() / 1e9 + seconds;
    for (unsigned i = 0; i < nthreads; i++) pthread_create(&th[i], NULL, run, &ws[i]);
    pthread_barrier_wait(&start_bar);
    uint64_t t0 = monotime_ns();
    for (unsigned i = 0; i < nthreads; i++) pthread_join(th[i], NULL);
    res->seconds = (double)(monotime_ns() - t0) / 1e9;
    if (use_pool) pool_stats_get(&res->ps1);
    for (unsigned i = 0; i < nthreads; i++) res->n += ws[i].n;
    res->samples = malloc((res->n ? res->n : 1) * sizeof *res->samples);
    if (!res->samples) {
        fprintf(stderr, "xferd-c-allocbench: out of memory for %llu samples\n", (unsigned long long)res->n);
        return 1;
    }
    uint64_t at = 0;
    for (unsigned i = 0; i < nthreads; i++) {
        memcpy(res->samples + at, ws[i].samples, ws[i].n * sizeof *res->samples);
        at += ws[i].n;
        res->failures += ws[i].failures;
        res->cross += ws[i].cross_frees;
        res->ring_full += ws[i].ring_full;
        free(ws[i].samples);
    }
    qsort(res->samples, res->n, sizeof *res->samples, cmp_u32);
    return 0;
}

/* The one line of key=value. */
static void report(const char *alloc, malloc_impl impl, const ab_result *r) {
    const uint32_t *all = r->samples;
    uint64_t n = r->n;
    char remote[32] = "n/a"; /* pool blocks freed by a thread other than their owner's */
    if (use_pool) snprintf(remote, sizeof remote, "%llu", (unsigned long long)(r->ps1.remote_frees - r->ps0.remote_frees));
    char news[32] = "n/a"; /* pool allocations that fell through to malloc: its free list was empty */
    if (use_pool) snprintf(news, sizeof news, "%llu", (unsigned long long)(r->ps1.news - r->ps0.news));
    char contended[32] = "n/a"; /* a library's internal locks are not observable from outside */
    if (use_pool)
        snprintf(contended, sizeof contended, "%llu", (unsigned long long)(r->ps1.lock_contended - r->ps0.lock_contended));
    printf("alloc=%s malloc=%s threads=%u cross=%.2f live=%u allocs=%llu seconds=%.3f timer_ns=%llu p50_ns=%u "
           "p99_ns=%u p999_ns=%u max_ns=%u failures=%llu cross_frees=%llu ring_full=%llu pool_cross_frees=%s pool_news=%s lock_contended=%s\n",
           alloc, allocdet_name(impl), nthreads, cross_frac, live_n, (unsigned long long)n, r->seconds,
           (unsigned long long)timer_ns, pct(all, n, 0.5), pct(all, n, 0.99), pct(all, n, 0.999), n ? all[n - 1] : 0,
           (unsigned long long)r->failures, (unsigned long long)r->cross, (unsigned long long)r->ring_full, remote,
           news, contended);
}

int main(int argc, char **argv) {
    ab_options o;
    int rc = parse_args(argc, argv, &o);
    malloc_impl impl = MALLOC_UNKNOWN;
    if (rc == 0) rc = choose_allocator(o.alloc, argv, &impl);
    if (rc != 0) return rc;
    use_pool = !strcmp(o.alloc, "pool");
    nthreads = (unsigned)o.threads;
    live_n = (unsigned)o.live;
    if (nthreads == 1) cross_frac = 0; /* no other thread to free on */
    timer_ns = measure_timer();
    ab_result res = {0};
    if (run_threads(o.ops, o.seconds, &res) != 0) return 1;
    report(o.alloc, impl, &res);
    free(res.samples);
    if (use_pool) pool_destroy();
    pthread_barrier_destroy(&start_bar);
    pthread_barrier_destroy(&end_bar);
    return 0; /* failed allocations are a figure of the run, not an error of it */
}
