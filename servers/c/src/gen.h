/* gen: synthetic content "gen:<size>:<seed>" (PROTOCOL.md "Generated content"). */
#ifndef XFERD_GEN_H
#define XFERD_GEN_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "xerr.h"

/* Word i of the stream for seed: splitmix64's output function of seed + (i+1)*golden gamma. */
uint64_t gen_word(uint64_t seed, uint64_t i);

/* Writes the content bytes [offset, offset+len) of any gen file with this seed. */
void gen_fill(uint64_t seed, uint64_t offset, uint8_t *dst, size_t len);

/* Parses a name that begins with "gen:". Returns 0 with *size and *seed set, or -1 with err set to
 * invalid_argument (malformed, leading zeros, overflow, or size above max_size). */
int gen_parse_name(const char *name, size_t len, uint64_t max_size, uint64_t *size, uint64_t *seed, xerr *err);

/* CRC-32 of the whole file gen:<size>:<seed>, from the seed's block CRC-32s (gencache.h); the last 64 results
 * are kept as well (thread-safe). */
uint32_t gen_crc(uint64_t size, uint64_t seed);

/* The same into *out, returning 0; or -1 (*out untouched, nothing cached) when *cancel (when not NULL) turned
 * true during the computation (gencache_crc_until): the first Read of a new seed of 64 GiB is a minute's pass,
 * which the drain deadline must be able to cut. */
int gen_crc_until(uint64_t size, uint64_t seed, const atomic_bool *cancel, uint32_t *out);

/* Empties the caches (gencache.h's included); for tests and shutdown. */
void gen_crc_cache_reset(void);

#endif
