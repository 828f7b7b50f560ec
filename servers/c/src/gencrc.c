/* gencrc: the last GEN_CRC_CACHE whole-file CRC-32s, in front of gencache's block CRC-32s. */
#include "gencrc.h"

#include <pthread.h>
#include <string.h>

#include "gencache.h"

static struct {
    pthread_mutex_t mu;
    unsigned next;
    struct { uint64_t size, seed; uint32_t crc; int used; } e[GEN_CRC_CACHE];
} cache = {.mu = PTHREAD_MUTEX_INITIALIZER};

void gen_crc_cache_reset(void) {
    gencache_reset();
    pthread_mutex_lock(&cache.mu);
    memset(cache.e, 0, sizeof cache.e);
    cache.next = 0;
    pthread_mutex_unlock(&cache.mu);
}

uint32_t gen_crc(uint64_t size, uint64_t seed) {
    uint32_t c = 0;
    gen_crc_until(size, seed, NULL, &c);
    return c;
}

/* A kept result for (size, seed) into *out: 0, or -1 when there is none. */
static int cached(uint64_t size, uint64_t seed, uint32_t *out) {
    int found = -1;
    pthread_mutex_lock(&cache.mu);
    for (unsigned k = 0; k < GEN_CRC_CACHE && found != 0; k++)
        if (cache.e[k].used && cache.e[k].size == size && cache.e[k].seed == seed) {
            *out = cache.e[k].crc;
            found = 0;
        }
    pthread_mutex_unlock(&cache.mu);
    return found;
}

int gen_crc_until(uint64_t size, uint64_t seed, const atomic_bool *cancel, uint32_t *out) {
    if (cached(size, seed, out) == 0) return 0;
    uint32_t crc;
    if (gencache_crc_until(size, seed, cancel, &crc) != 0) return -1; /* cut short: nothing cached */
    pthread_mutex_lock(&cache.mu);
    unsigned k = cache.next++ % GEN_CRC_CACHE;
    cache.e[k].size = size;
    cache.e[k].seed = seed;
    cache.e[k].crc = crc;
    cache.e[k].used = 1;
    pthread_mutex_unlock(&cache.mu);
    *out = crc;
    return 0;
}
