/* meta: the Meta call (PROTOCOL.md "Meta"): many small key/value entries. Unlike the other methods the body
 * is decoded by protobuf-c's unpack through the allocator layer (one allocation per message and string, as
 * a real service decoding metadata would), the keys go into a hash table (another allocation each), and
 * the answer is the entries sorted by key with a CRC-32 digest. The point is the allocator's work. */
#ifndef XFERD_META_H
#define XFERD_META_H

#include <stddef.h>
#include <stdint.h>

#include "xerr.h"
#include "xfer/v1/file_transfer.pb-c.h"

#define META_MAX_KEY 256
#define META_MAX_VALUE 4096
#define META_DEFAULT_MAX_ENTRIES 1024

typedef struct {
    Xfer__V1__MetaRequest *req;    /* unpacked through mem_pb_allocator */
    Xfer__V1__MetaEntry **sorted;  /* req's entries sorted by key (mem_alloc) */
    size_t n;
    uint32_t digest;
} meta_answer;

/* Decodes and checks body[0..len) against PROTOCOL.md "Meta". e->code must be XERR_OK on entry. Returns 0
 * with *out filled (call meta_release after), or 0 with the call error in e (out holds nothing to release),
 * or -1 when out of memory. */
int meta_prepare(const uint8_t *body, size_t len, uint32_t max_entries, meta_answer *out, xerr *e);
void meta_release(meta_answer *a);

/* CRC-32 over key NUL value NUL of each of the n entries, in order. */
uint32_t meta_digest(Xfer__V1__MetaEntry *const *entries, size_t n);

#endif
