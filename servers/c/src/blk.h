/* blk: a reference-counted byte block from the allocator layer (mem.h). A connection reads into one; the
 * calls parsed from it, the mem store's chunks and the responses that send those bytes back hold
 * references, so a chunk's bytes are never copied in user space between the socket and the store, nor from
 * the store to the socket. The last reference frees it, on whichever thread drops it. */
#ifndef XFERD_BLK_H
#define XFERD_BLK_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct blk {
    _Atomic long refs;
    size_t cap;
    _Alignas(16) uint8_t data[];
} blk;

/* Bytes inside a block, with a reference to it held by whoever holds the span. */
typedef struct {
    const uint8_t *p;
    size_t len;
    struct blk *ref;
} blk_span;

/* A block of cap bytes with one reference, or NULL. */
blk *blk_new(size_t cap);
blk *blk_ref(blk *b);
void blk_unref(blk *b); /* NULL is fine */

/* Whether a holder should keep bytes of length len by referencing their block b rather than copying them:
 * only when they fill at least half of it, so a small chunk never pins a whole read buffer. */
static inline bool blk_worth_keeping(const blk *b, size_t len) { return b && len && len >= b->cap / 2; }

/* Whether the caller holds the only reference (then nobody else reads the block and it may be rewritten). */
static inline bool blk_sole(blk *b) { return atomic_load_explicit(&b->refs, memory_order_acquire) == 1; }

#endif
