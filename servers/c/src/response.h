/* response: a call's answer on the wire (PROTOCOL.md "Frames", "Requests and responses"). The prefix
 * (frame_len, header_len, ResponseHeader{method, seq, error}) is written by hand in its canonical encoding,
 * because an echoed method may hold a NUL that protobuf-c's char* fields cannot carry. A body is packed by
 * protobuf-c, or written in place around bulk bytes that already exist (an Echo's payload in the request's
 * block, a mem store file's chunks, cached generated content), which the answer sends as spans referencing
 * their blocks, with writev, never copied. */
#ifndef XFERD_RESPONSE_H
#define XFERD_RESPONSE_H

#include <protobuf-c/protobuf-c.h>
#include <stddef.h>
#include <stdint.h>

#include "blk.h"
#include "reqhdr.h"
#include "varint.h"
#include "xerr.h"

#define RESULT_SPANS 4 /* bulk spans one response may send uncopied; past that its bytes are copied */

/* A response frame: frame[0..len), then the spans, then frame[len..len+tail_len). */
typedef struct {
    uint8_t *frame; /* from mem_alloc */
    size_t len, tail_len;
    blk_span span[RESULT_SPANS]; /* each holds a reference to its block */
    int nspan;
    xerr_code code; /* outcome for metrics */
    uint64_t in_bytes, out_bytes; /* file bytes uploaded / downloaded by this call */
} handler_result;

/* The response's size in bytes (head, spans and tail). */
size_t handler_result_size(const handler_result *r);
/* Frees the head buffer and drops the spans' references. */
void handler_result_release(handler_result *r);
/* Copies the whole response into one buffer (for tests and the fuzzer): afterwards frame[0..len) is all of
 * it. Returns 0, or -1 when out of memory (r unchanged). */
int handler_result_flatten(handler_result *r);

/* Encodes a response frame carrying only an error (seq 0 and method "" for connection errors).
 * Returns the mem_alloc'd frame or NULL. */
uint8_t *encode_error_frame(const char *method, uint64_t seq, const char *error, size_t *len);

/* The same for a method of method_len bytes, which may hold a NUL. */
uint8_t *response_error_frame(const char *method, size_t method_len, uint64_t seq, const char *error, size_t *len);

/* The answer to h with msg packed as its body, into out. 0, or -1 when out of memory. */
int response_msg(const reqhdr *h, const ProtobufCMessage *msg, handler_result *out);

/* Starts the answer to h: a body of body_len bytes that begins with `lead` bytes the caller writes at the
 * returned pointer, then has bulk bytes (as spans, or bulk_inline bytes the caller writes right after the lead:
 * copied, read or generated), then `tail` bytes the caller writes at out->frame + out->len. NULL when out of
 * memory. */
uint8_t *response_begin(const reqhdr *h, size_t body_len, size_t lead, size_t bulk_inline, size_t tail,
                        handler_result *out);

/* The tag and length of a bytes field 1 of dlen bytes, the lead of a body whose first field is the bulk data
 * (nothing when dlen is 0: proto3 omits an empty field). Returns the bytes written. */
static inline size_t response_bytes_lead(uint8_t *dst, size_t dlen) {
    if (!dlen) return 0;
    dst[0] = 0x0a;
    return (size_t)(varint_put(dst + 1, dlen) - dst);
}
static inline size_t response_bytes_lead_size(size_t dlen) { return dlen ? 1 + varint_size(dlen) : 0; }

#endif
