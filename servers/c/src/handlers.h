/* handlers: the frame methods (PROTOCOL.md "Methods"). Given a decoded request header and the raw
 * body, a handler decodes the body in place (reqbody.h), runs the call against the store and encodes the
 * response: its header and small fields in one buffer from mem_alloc, and bulk bytes that already exist
 * (an Echo's payload in the request's block, a mem store file's chunks) as spans referencing their blocks,
 * sent with writev and never copied. No I/O, no threads: the event loop and the fuzzer call it alike. */
#ifndef XFERD_HANDLERS_H
#define XFERD_HANDLERS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "blk.h"
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
    M_META,
    M_UNKNOWN,
    M__COUNT
} method_id;

typedef struct {
    store *st;
    uint64_t max_file_size;
    uint32_t max_chunk;
    uint32_t max_meta_entries;
    uint64_t conn_id; /* the connection calling, owner of the uploads it begins; 0 for none */
    /* NULL, or turns true when the answer will never be sent (the server's drain deadline passed): work that
     * can take seconds (the CRC-32 pass over a new gen: seed) stops early, and the call ends in `internal`. */
    const atomic_bool *cancel;
} handler_ctx;

/* "Xfer.Echo" -> M_ECHO; anything else -> M_UNKNOWN. Byte for byte over len bytes: a NUL never ends a name. */
method_id method_lookup(const char *name, size_t len);
/* The metric label: "Echo", ..., "unknown". */
const char *method_label(method_id m);

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

/* Handles one call of the valid header h (reqhdr_decode; a NUL in its method is answered here as the call
 * error). body lies in block owner (NULL: none, then nothing of it is referenced past the call). Returns 0,
 * or -1 when no response could be allocated (out of memory). */
int handle_request(const handler_ctx *hc, method_id m, const reqhdr *h, const uint8_t *body, size_t body_len,
                   blk *owner, handler_result *out);

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

#endif
