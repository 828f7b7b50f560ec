/* reqbody: the frame methods' request bodies decoded in place (PROTOCOL.md "Methods"), the way xferd-go
 * decodes from its pooled frame: bytes and string fields point into the body, so a chunk's bytes are never
 * copied on their way into the store, and decoding allocates nothing.
 *
 * A body is accepted exactly when pbwire_check and protobuf-c's unpack together would accept it (the fuzz
 * target and the unit tests compare the two on every input): tags of at most 5 bytes with a non-zero field
 * number, varints of at most 10 bytes whose value fits 64 bits, length prefixes of at most 5 bytes (and at most
 * INT_MAX), wire types 0, 1, 2 and 5 only, a known field only with its own wire type, 32-bit fields within
 * 32 bits, strings valid UTF-8 in every occurrence. Unknown fields are skipped; a repeated field takes its
 * last value. */
#ifndef XFERD_REQBODY_H
#define XFERD_REQBODY_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    const uint8_t *p; /* into the body; NULL when the field is absent or empty */
    size_t len;
} rb_bytes;

typedef struct { rb_bytes name; uint64_t size; uint32_t chunk_size; } rb_upload_begin;
typedef struct { uint64_t upload_id, offset; rb_bytes data; } rb_upload_chunk;
typedef struct { uint64_t upload_id; uint32_t crc32; } rb_upload_commit;
typedef struct { uint64_t upload_id; } rb_upload_abort;
typedef struct { rb_bytes name; uint64_t offset; uint32_t length; } rb_read;
typedef struct { rb_bytes payload; } rb_echo;
typedef struct { rb_bytes name; } rb_stat;

/* Each returns 0 with *out filled (absent fields zero), or -1 when the body is malformed. */
int rb_upload_begin_decode(const uint8_t *body, size_t len, rb_upload_begin *out);
int rb_upload_chunk_decode(const uint8_t *body, size_t len, rb_upload_chunk *out);
int rb_upload_commit_decode(const uint8_t *body, size_t len, rb_upload_commit *out);
int rb_upload_abort_decode(const uint8_t *body, size_t len, rb_upload_abort *out);
int rb_read_decode(const uint8_t *body, size_t len, rb_read *out);
int rb_echo_decode(const uint8_t *body, size_t len, rb_echo *out);
int rb_stat_decode(const uint8_t *body, size_t len, rb_stat *out);

#endif
