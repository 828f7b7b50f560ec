/* gen: synthetic content "gen:<size>:<seed>" (PROTOCOL.md "Generated content"): its bytes and its name. The
 * bytes' cache is gencache.h's, the whole-file CRC-32s gencrc.h's; this file depends on neither. */
#ifndef XFERD_GEN_H
#define XFERD_GEN_H

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

#endif
