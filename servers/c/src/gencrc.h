/* gencrc: whole-file CRC-32s of generated content, gen:<size>:<seed> (PROTOCOL.md "Generated content"), as
 * Read and Stat answer them: combined from the seed's block CRC-32s (gencache.h), and the last GEN_CRC_CACHE
 * results kept, so a name asked for again costs a lookup. Thread-safe. Sits on gencache, which sits on gen:
 * nothing below calls back up. */
#ifndef XFERD_GENCRC_H
#define XFERD_GENCRC_H

#include <stdatomic.h>
#include <stdint.h>

#define GEN_CRC_CACHE 64 /* results kept */

/* CRC-32 of the whole file gen:<size>:<seed>. */
uint32_t gen_crc(uint64_t size, uint64_t seed);

/* The same into *out, returning 0; or -1 (*out untouched, nothing cached) when *cancel (when not NULL) turned
 * true during the computation (gencache_crc_until): the first Read of a new seed of 64 GiB is a minute's pass,
 * which the drain deadline must be able to cut. */
int gen_crc_until(uint64_t size, uint64_t seed, const atomic_bool *cancel, uint32_t *out);

/* Empties the results and gencache.h's blocks and block CRC-32s; for tests and shutdown. */
void gen_crc_cache_reset(void);

#endif
