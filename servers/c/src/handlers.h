/* handlers: the frame methods (PROTOCOL.md "Methods"). Given a decoded request header and the raw
 * body, a handler decodes the body with protobuf-c (through mem's allocator), runs the call against
 * the store and encodes the whole response frame into a buffer from mem_alloc. No I/O, no threads:
 * the event loop and the fuzzer call it alike. */
#ifndef XFERD_HANDLERS_H
#define XFERD_HANDLERS_H

#include <stddef.h>
#include <stdint.h>

#include "reqhdr.h"
#include "store.h"
#include "xerr.h"

typedef enum {
    M_UPLOAD_BEGIN,
    M_UPLOAD_CHUNK,
    M_UPLOAD_COMMIT,
    M_UPLOAD_ABORT,
    M_READ,
    M_ECHO,
    M_STAT,
    M_UNKNOWN,
    M__COUNT
} method_id;

typedef struct {
    store *st;
    uint64_t max_file_size;
    uint32_t max_chunk;
    uint64_t conn_id; /* the connection calling, owner of the uploads it begins; 0 for none */
} handler_ctx;

/* "Xfer.Echo" -> M_ECHO; anything else -> M_UNKNOWN. Byte for byte over len bytes: a NUL never ends a name. */
method_id method_lookup(const char *name, size_t len);
/* The metric label: "Echo", ..., "unknown". */
const char *method_label(method_id m);

typedef struct {
    uint8_t *frame; /* from mem_alloc; the caller frees it with mem_free */
    size_t len;
    xerr_code code; /* outcome for metrics */
    uint64_t in_bytes, out_bytes; /* file bytes uploaded / downloaded by this call */
} handler_result;

/* Handles one call of the valid header h (reqhdr_decode; a NUL in its method is answered here as the call
 * error). Returns 0, or -1 when no response could be allocated (out of memory). */
int handle_request(const handler_ctx *hc, method_id m, const reqhdr *h, const uint8_t *body, size_t body_len,
                   handler_result *out);

/* Encodes a response frame carrying only an error (seq 0 and method "" for connection errors).
 * Returns the mem_alloc'd frame or NULL. */
uint8_t *encode_error_frame(const char *method, uint64_t seq, const char *error, size_t *len);

#endif
