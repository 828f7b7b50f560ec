/* reqbody: in-place decoding of request bodies, driven by a field table per message. */
#include "reqbody.h"

#include <limits.h>
#include <stddef.h>
#include <string.h>

#include "pbwire.h"
#include "utf8.h"
#include "varint.h"

#define TAG_MAX_BYTES 5    /* protobuf-c reads no longer tag */
#define LENGTH_MAX_BYTES 5 /* nor a longer length prefix */

typedef enum { F_U64, F_U32, F_STRING, F_BYTES } field_kind;

typedef struct {
    uint32_t number;
    field_kind kind;
    size_t offset; /* of the uint64_t, uint32_t or rb_bytes in the output struct */
} field;

/* A tag as protobuf-c reads it: 1 to 5 bytes, the last without its high bit. */
static int read_tag(const uint8_t **p, const uint8_t *end, uint32_t *number, unsigned *wire) {
    uint64_t v;
    if (varint_read_max(p, end, TAG_MAX_BYTES, &v) != 0) return -1;
    *wire = (unsigned)(v & 7);
    *number = (uint32_t)(v >> 3);
    return *number == 0 ? -1 : 0;
}

/* A length prefix as protobuf-c reads it (at most 5 bytes, at most INT_MAX) that fits what is left. */
static int read_length(const uint8_t **p, const uint8_t *end, size_t *len) {
    uint64_t v;
    if (varint_read_max(p, end, LENGTH_MAX_BYTES, &v) != 0) return -1;
    if (v > INT_MAX || v > (uint64_t)(end - *p)) return -1;
    *len = (size_t)v;
    return 0;
}

static const field *find(const field *fs, size_t n, uint32_t number) {
    for (size_t i = 0; i < n; i++)
        if (fs[i].number == number) return &fs[i];
    return NULL;
}

static int decode(const uint8_t *body, size_t len, const field *fs, size_t nfs, void *out, size_t out_size) {
    memset(out, 0, out_size);
    const uint8_t *p = body, *end = body + len;
    while (p < end) {
        uint32_t number;
        unsigned wire;
        if (read_tag(&p, end, &number, &wire) != 0) return -1;
        const field *f = find(fs, nfs, number);
        char *dst = f ? (char *)out + f->offset : NULL;
        if (wire == PB_WIRE_VARINT) {
            uint64_t v;
            if (varint_read(&p, end, &v) != 0) return -1;
            if (!f) continue;
            if (f->kind == F_U64) memcpy(dst, &v, sizeof v);
            else if (f->kind == F_U32 && v <= UINT32_MAX) {
                uint32_t v32 = (uint32_t)v;
                memcpy(dst, &v32, sizeof v32);
            } else return -1; /* a 32-bit field out of range, or bytes sent as a varint */
        } else if (wire == PB_WIRE_LEN) {
            size_t n;
            if (read_length(&p, end, &n) != 0) return -1;
            const uint8_t *v = p;
            p += n;
            if (!f) continue;
            if (f->kind != F_STRING && f->kind != F_BYTES) return -1;
            if (f->kind == F_STRING && !utf8_valid((const char *)v, n)) return -1;
            rb_bytes b = {n ? v : NULL, n};
            memcpy(dst, &b, sizeof b);
        } else if (wire == PB_WIRE_I64 || wire == PB_WIRE_I32) {
            if (f) return -1; /* every known field is a varint or length-delimited */
            if (pbwire_skip(&p, end, wire) != 0) return -1;
        } else {
            return -1; /* groups and wire types 6, 7 */
        }
    }
    return 0;
}

#define F(type, member, num, kind) {num, kind, offsetof(type, member)}
#define DECODER(fn, type, ...)                                                        \
    int fn(const uint8_t *body, size_t len, type *out) {                              \
        static const field fs[] = {__VA_ARGS__};                                      \
        return decode(body, len, fs, sizeof fs / sizeof fs[0], out, sizeof *out);     \
    }

DECODER(rb_upload_begin_decode, rb_upload_begin, F(rb_upload_begin, name, 1, F_STRING),
        F(rb_upload_begin, size, 2, F_U64), F(rb_upload_begin, chunk_size, 3, F_U32))
DECODER(rb_upload_chunk_decode, rb_upload_chunk, F(rb_upload_chunk, upload_id, 1, F_U64),
        F(rb_upload_chunk, offset, 2, F_U64), F(rb_upload_chunk, data, 3, F_BYTES))
DECODER(rb_upload_commit_decode, rb_upload_commit, F(rb_upload_commit, upload_id, 1, F_U64),
        F(rb_upload_commit, crc32, 2, F_U32))
DECODER(rb_upload_abort_decode, rb_upload_abort, F(rb_upload_abort, upload_id, 1, F_U64))
DECODER(rb_read_decode, rb_read, F(rb_read, name, 1, F_STRING), F(rb_read, offset, 2, F_U64),
        F(rb_read, length, 3, F_U32))
DECODER(rb_echo_decode, rb_echo, F(rb_echo, payload, 1, F_BYTES))
DECODER(rb_stat_decode, rb_stat, F(rb_stat, name, 1, F_STRING))
