/* handlers: the frame methods (PROTOCOL.md "Methods"), one handler per method in a table indexed by
 * method_id (method.h). Given a decoded request header and the raw body, a handler decodes the body in place
 * (reqbody.h), runs the call against the store or the generated content and encodes the answer (response.h):
 * its header and small fields in one buffer from mem_alloc, bulk bytes that already exist as spans
 * referencing their blocks. No I/O, no threads: the workers and the fuzzer call it alike. */
#ifndef XFERD_HANDLERS_H
#define XFERD_HANDLERS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "blk.h"
#include "method.h"
#include "reqhdr.h"
#include "response.h"
#include "store.h"
#include "xerr.h"

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

/* Handles one call of the valid header h (reqhdr_decode; a NUL in its method is answered here as the call
 * error). body lies in block owner (NULL: none, then nothing of it is referenced past the call). Returns 0,
 * or -1 when no response could be allocated (out of memory). */
int handle_request(const handler_ctx *hc, method_id m, const reqhdr *h, const uint8_t *body, size_t body_len,
                   blk *owner, handler_result *out);

#endif
