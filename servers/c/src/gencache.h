/* gencache: generated content (PROTOCOL.md "Generated content") kept in blocks of GEN_BLOCK bytes per
 * (seed, block index). A byte's value depends on the seed and its offset only, never on the file's size, so
 * every gen:<size>:<seed> name shares its seed's blocks: a Read answers from them with writev (no generating,
 * no copy), and the whole-file CRC-32 is combined from per-block CRC-32s kept per seed, so a new size of a
 * known seed costs at most one block's work. Bounded: GENCACHE_BLOCKS blocks (least recently used evicted),
 * dropped once unused for GENCACHE_IDLE_MS, so an idle server holds none of it; and GENCACHE_SEEDS seeds'
 * block CRC-32s (4 bytes per MiB). Thread-safe. */
#ifndef XFERD_GENCACHE_H
#define XFERD_GENCACHE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "blk.h"

#define GEN_BLOCK (1u << 20)
#define GENCACHE_BLOCKS 32 /* 32 MiB of content at most */
#define GENCACHE_SEEDS 16
#define GENCACHE_IDLE_MS 2000

/* Bytes [offset, offset+len) (len > 0) of seed's stream as at most max spans of cached blocks (references
 * taken). Returns how many, or -1 (nothing held) when more would be needed or memory ran out. */
int gencache_spans(uint64_t seed, uint64_t offset, size_t len, blk_span *out, int max);

/* CRC-32 of the first size bytes of seed's stream, from the seed's block CRC-32s. */
uint32_t gencache_crc(uint64_t size, uint64_t seed);

/* The same into *out, returning 0; or -1 (*out untouched) as soon as *cancel (when not NULL) is seen true: it
 * is looked at before every block, so a pass over a new seed's stream stops within one block's work (the
 * server's drain deadline). The block CRC-32s computed so far stay cached: they are right. */
int gencache_crc_until(uint64_t size, uint64_t seed, const atomic_bool *cancel, uint32_t *out);

/* Drops the blocks unused since now_ms - GENCACHE_IDLE_MS (now_ms: monotime_ms()). */
void gencache_expire(uint64_t now_ms);

/* Cached blocks held by more than one slot (tests: always 0, a racing miss keeps one entry). */
int gencache_duplicates(void);

/* Drops every cached block and CRC (tests; shutdown, so LeakSanitizer sees nothing left). */
void gencache_reset(void);

#endif
