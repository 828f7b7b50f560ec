/* varint: protobuf's base-128 integers, written and read. The one codec behind the hand-written response
 * headers and bodies (handlers.c), the request header and body decoders (reqhdr.c, reqbody.c) and the wire
 * checks (pbwire.c, meta.c). Inline: every call decodes a few of them on the request path. */
#ifndef XFERD_VARINT_H
#define XFERD_VARINT_H

#include <stddef.h>
#include <stdint.h>

#define VARINT_MAX_BYTES 10 /* a 64-bit value */

/* Bytes the encoding of v takes. */
static inline size_t varint_size(uint64_t v) {
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

/* Writes v at p; returns the byte after it. */
static inline uint8_t *varint_put(uint8_t *p, uint64_t v) {
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

/* Reads a varint of at most max_bytes (<= VARINT_MAX_BYTES) bytes at *p, bounded by end, into *out and
 * advances *p. 0 on success; -1 when it is truncated, longer than max_bytes, or (at 10 bytes) its value does
 * not fit 64 bits. A shorter max_bytes is a decoder's own limit: protobuf-c reads no tag or length prefix
 * longer than 5 bytes. */
static inline int varint_read_max(const uint8_t **p, const uint8_t *end, unsigned max_bytes, uint64_t *out) {
    uint64_t v = 0;
    for (unsigned i = 0; i < max_bytes && *p < end; i++) {
        uint8_t b = *(*p)++;
        if (i == VARINT_MAX_BYTES - 1 && b > 1) return -1; /* bits past the 64th */
        v |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            *out = v;
            return 0;
        }
    }
    return -1;
}

/* A varint of up to VARINT_MAX_BYTES bytes whose value fits 64 bits, as varint_read_max. */
static inline int varint_read(const uint8_t **p, const uint8_t *end, uint64_t *out) {
    return varint_read_max(p, end, VARINT_MAX_BYTES, out);
}

#endif
