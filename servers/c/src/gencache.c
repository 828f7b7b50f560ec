/* gencache: cached generated blocks and per-seed block CRC-32s. */
#include "gencache.h"

#include <libdeflate.h>
#include <pthread.h>
#include <string.h>
#include <zlib.h>

#include "gen.h"
#include "mem.h"
#include "monotime.h"

typedef struct {
    uint64_t seed, index, last_use, last_ms;
    blk *b; /* NULL: free slot */
} block_entry;

typedef struct {
    uint64_t seed, last_use;
    size_t n;       /* blocks the arrays cover */
    uint32_t *crc;  /* per block */
    uint8_t *known; /* per block: crc[k] computed */
} seed_entry;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static block_entry blocks[GENCACHE_BLOCKS];
static seed_entry seeds[GENCACHE_SEEDS];
static uint64_t clock_;

/* A reference to block `index` of seed's stream, generated on a miss; NULL when out of memory. */
static blk *block_get(uint64_t seed, uint64_t index) {
    pthread_mutex_lock(&mu);
    for (int i = 0; i < GENCACHE_BLOCKS; i++)
        if (blocks[i].b && blocks[i].seed == seed && blocks[i].index == index) {
            blocks[i].last_use = ++clock_;
            blocks[i].last_ms = monotime_ms();
            blk *b = blk_ref(blocks[i].b);
            pthread_mutex_unlock(&mu);
            return b;
        }
    pthread_mutex_unlock(&mu);

    blk *nb = blk_new(GEN_BLOCK); /* generated outside the lock: another thread may race us, both correct */
    if (!nb) return NULL;
    gen_fill(seed, index * GEN_BLOCK, nb->data, GEN_BLOCK);
    pthread_mutex_lock(&mu);
    /* Another thread may have cached it meanwhile: keep one entry per block. A duplicate would take a slot,
     * and a scan as large as the cache would then miss on every block (LRU evicts the next one it needs). */
    for (int i = 0; i < GENCACHE_BLOCKS; i++)
        if (blocks[i].b && blocks[i].seed == seed && blocks[i].index == index) {
            blocks[i].last_use = ++clock_;
            blocks[i].last_ms = monotime_ms();
            pthread_mutex_unlock(&mu);
            return nb;
        }
    int victim = 0;
    for (int i = 0; i < GENCACHE_BLOCKS; i++) {
        if (!blocks[i].b) { victim = i; break; }
        if (blocks[i].last_use < blocks[victim].last_use) victim = i;
    }
    blk *old = blocks[victim].b;
    blocks[victim] = (block_entry){seed, index, ++clock_, monotime_ms(), blk_ref(nb)};
    pthread_mutex_unlock(&mu);
    blk_unref(old);
    return nb;
}

int gencache_spans(uint64_t seed, uint64_t offset, size_t len, blk_span *out, int max) {
    uint64_t first = offset / GEN_BLOCK, last = (offset + len - 1) / GEN_BLOCK;
    if (last - first >= (uint64_t)max) return -1;
    int n = 0;
    for (uint64_t k = first; k <= last; k++) {
        blk *b = block_get(seed, k);
        if (!b) {
            while (n) blk_unref(out[--n].ref);
            return -1;
        }
        uint64_t from = k == first ? offset % GEN_BLOCK : 0;
        uint64_t to = k == last ? (offset + len - 1) % GEN_BLOCK + 1 : GEN_BLOCK;
        out[n++] = (blk_span){b->data + from, (size_t)(to - from), b};
    }
    return n;
}

/* The seed's CRC table covering nblocks blocks (grown or taken over as needed); mu held. NULL: out of memory. */
static seed_entry *seed_get(uint64_t seed, size_t nblocks) {
    seed_entry *e = NULL;
    for (int i = 0; i < GENCACHE_SEEDS && !e; i++)
        if (seeds[i].crc && seeds[i].seed == seed) e = &seeds[i];
    if (!e) {
        e = &seeds[0];
        for (int i = 0; i < GENCACHE_SEEDS; i++) {
            if (!seeds[i].crc) { e = &seeds[i]; break; }
            if (seeds[i].last_use < e->last_use) e = &seeds[i];
        }
        mem_free(e->crc);
        mem_free(e->known);
        *e = (seed_entry){.seed = seed};
    }
    e->last_use = ++clock_;
    if (e->n < nblocks) {
        uint32_t *crc = mem_calloc(nblocks, sizeof *crc);
        uint8_t *known = mem_calloc(nblocks, 1);
        if (!crc || !known) {
            mem_free(crc);
            mem_free(known);
            return e->crc ? e : NULL; /* keep what it had */
        }
        if (e->n) {
            memcpy(crc, e->crc, e->n * sizeof *crc);
            memcpy(known, e->known, e->n);
        }
        mem_free(e->crc);
        mem_free(e->known);
        e->crc = crc;
        e->known = known;
        e->n = nblocks;
    }
    return e->n >= nblocks ? e : NULL;
}

/* CRC-32 of the first len bytes of block k of seed (len <= GEN_BLOCK), generating it through the cache. */
static uint32_t block_crc(uint64_t seed, uint64_t k, size_t len) {
    blk *b = block_get(seed, k);
    if (b) {
        uint32_t c = libdeflate_crc32(0, b->data, len);
        blk_unref(b);
        return c;
    }
    static _Thread_local uint8_t part[64 * 1024]; /* out of memory: generate piecewise */
    uint32_t c = 0;
    for (size_t off = 0; off < len;) {
        size_t n = len - off < sizeof part ? len - off : sizeof part;
        gen_fill(seed, k * GEN_BLOCK + off, part, n);
        c = libdeflate_crc32(c, part, n);
        off += n;
    }
    return c;
}

int gencache_crc_until(uint64_t size, uint64_t seed, const atomic_bool *cancel, uint32_t *out) {
    size_t full = (size_t)(size / GEN_BLOCK), rest = (size_t)(size % GEN_BLOCK);
    uLong op = crc32_combine_gen(GEN_BLOCK);
    uLong c = 0;
    for (size_t k = 0; k < full; k++) {
        /* one block (1 MiB, about a millisecond) between looks: a pass over a large new seed takes seconds */
        if (cancel && atomic_load_explicit(cancel, memory_order_relaxed)) return -1;
        pthread_mutex_lock(&mu);
        seed_entry *e = seed_get(seed, full);
        bool have = e && e->known[k];
        uint32_t bc = have ? e->crc[k] : 0;
        pthread_mutex_unlock(&mu);
        if (!have) {
            bc = block_crc(seed, k, GEN_BLOCK);
            pthread_mutex_lock(&mu);
            if ((e = seed_get(seed, full)) != NULL) {
                e->crc[k] = bc;
                e->known[k] = 1;
            }
            pthread_mutex_unlock(&mu);
        }
        c = crc32_combine_op(c, bc, op);
    }
    if (rest) c = crc32_combine(c, block_crc(seed, full, rest), (z_off_t)rest);
    *out = (uint32_t)c;
    return 0;
}

uint32_t gencache_crc(uint64_t size, uint64_t seed) {
    uint32_t c = 0;
    gencache_crc_until(size, seed, NULL, &c);
    return c;
}

void gencache_expire(uint64_t now_ms) {
    blk *drop[GENCACHE_BLOCKS];
    int n = 0;
    pthread_mutex_lock(&mu);
    for (int i = 0; i < GENCACHE_BLOCKS; i++)
        if (blocks[i].b && now_ms - blocks[i].last_ms >= GENCACHE_IDLE_MS && now_ms >= blocks[i].last_ms) {
            drop[n++] = blocks[i].b;
            blocks[i] = (block_entry){0};
        }
    pthread_mutex_unlock(&mu);
    while (n) blk_unref(drop[--n]); /* outside the lock: a free may take a while */
}

int gencache_duplicates(void) {
    int d = 0;
    pthread_mutex_lock(&mu);
    for (int i = 0; i < GENCACHE_BLOCKS; i++)
        for (int j = i + 1; j < GENCACHE_BLOCKS && blocks[i].b; j++)
            d += blocks[j].b && blocks[j].seed == blocks[i].seed && blocks[j].index == blocks[i].index;
    pthread_mutex_unlock(&mu);
    return d;
}

void gencache_reset(void) {
    pthread_mutex_lock(&mu);
    for (int i = 0; i < GENCACHE_BLOCKS; i++) {
        blk_unref(blocks[i].b);
        blocks[i] = (block_entry){0};
    }
    for (int i = 0; i < GENCACHE_SEEDS; i++) {
        mem_free(seeds[i].crc);
        mem_free(seeds[i].known);
        seeds[i] = (seed_entry){0};
    }
    pthread_mutex_unlock(&mu);
}
