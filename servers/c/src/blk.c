/* blk: reference-counted blocks on the allocator layer. */
#include "blk.h"

#include "mem.h"

blk *blk_new(size_t cap) {
    if (cap > SIZE_MAX - sizeof(blk)) return NULL;
    blk *b = mem_alloc(sizeof(blk) + cap);
    if (!b) return NULL;
    atomic_init(&b->refs, 1);
    b->cap = cap;
    return b;
}

blk *blk_ref(blk *b) {
    atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed);
    return b;
}

void blk_unref(blk *b) {
    if (b && atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) == 1) mem_free(b);
}
