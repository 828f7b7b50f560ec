/* frame: the framed TCP protocol's byte layout (PROTOCOL.md "Frames").
 *
 * The parser is stateless and does no I/O: given the bytes received so far it answers
 * FRAME_NEED_MORE, FRAME_OK (one frame of *total bytes at buf), or FRAME_ERROR (a connection
 * error in *err). That keeps it separate from the event loop and easy to fuzz. */
#ifndef XFERD_FRAME_H
#define XFERD_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include "xerr.h"

#define FRAME_PREFIX_LEN 8           /* frame_len (4) + header_len (4) */
#define FRAME_MIN_LEN 4              /* frame_len counts header_len's 4 bytes at least */
#define FRAME_HEADER_MAX 1024        /* header_len limit, fixed by the protocol */
#define FRAME_DEFAULT_MAX (8u << 20) /* --max-frame default: 8 MiB */

typedef enum { FRAME_ERROR = -1, FRAME_NEED_MORE = 0, FRAME_OK = 1 } frame_status;

/* Parses the start of buf[0..len). On FRAME_OK *total is 4 + frame_len. On FRAME_NEED_MORE *total is
 * the whole frame's size when the length prefix is already known and valid, else 0. On FRAME_ERROR
 * err holds the connection error (resource_exhausted or invalid_argument). */
frame_status frame_parse(const uint8_t *buf, size_t len, uint32_t max_frame, size_t *total, xerr *err);

/* The parts of a complete, parsed frame of `total` bytes. */
typedef struct {
    const uint8_t *header;
    size_t header_len;
    const uint8_t *body;
    size_t body_len;
} frame_parts;

void frame_split(const uint8_t *frame, size_t total, frame_parts *out);

/* Encoded size of a request frame RequestHeader{method, seq} + body. */
size_t frame_request_size(const char *method, uint64_t seq, size_t body_len);
/* Writes the request frame into dst (frame_request_size bytes); returns bytes written. */
size_t frame_encode_request(uint8_t *dst, const char *method, uint64_t seq, const uint8_t *body, size_t body_len);

/* Size of the prefix (8 bytes + ResponseHeader) of a response frame. method/error may be "" or NULL. */
size_t frame_response_prefix_size(const char *method, uint64_t seq, const char *error);
/* Writes the prefix for a body of body_len bytes; the caller writes the body right after it.
 * Returns the prefix size. */
size_t frame_encode_response_prefix(uint8_t *dst, const char *method, uint64_t seq, const char *error,
                                    size_t body_len);

static inline uint32_t frame_be32(const uint8_t *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}
static inline void frame_put_be32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24); p[1] = (uint8_t)(v >> 16); p[2] = (uint8_t)(v >> 8); p[3] = (uint8_t)v;
}

#endif
