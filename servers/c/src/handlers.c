/* handlers: a handler per method: decode in place, execute, encode. */
#include "handlers.h"

#include <string.h>

#include "gen.h"
#include "gencache.h"
#include "gencrc.h"
#include "mem.h"
#include "meta.h"
#include "names.h"
#include "reqbody.h"
#include "xfer/v1/file_transfer.pb-c.h"
#include "xfer/v1/frame.pb-c.h"

/* One call as its method's handler sees it. */
typedef struct {
    const handler_ctx *hc;
    const reqhdr *h;
    const uint8_t *body;
    size_t body_len;
    blk *owner; /* the block body lies in, or NULL */
} call;

/* A method's handler: the answer in out, or the call error in e (handle_request answers it). Returns 0, or -1
 * when out of memory. */
typedef int (*method_handler)(const call *c, handler_result *out, xerr *e);

/* A name field, in place: not NUL-terminated, and may hold a NUL (which name_valid refuses). */
#define NAME(b) ((const char *)(b).p), ((b).len)

static int malformed(xerr *e, const char *type) {
    xerr_set(e, XERR_INVALID_ARGUMENT, "malformed %s body", type);
    return 0;
}

/* ---- uploads ---- */

static int handle_upload_begin(const call *c, handler_result *out, xerr *e) {
    rb_upload_begin r;
    if (rb_upload_begin_decode(c->body, c->body_len, &r) != 0) return malformed(e, "UploadBeginRequest");
    if (!name_valid(NAME(r.name), e)) return 0;
    if (name_is_gen(NAME(r.name))) {
        char q[XERR_QUOTE_MAX];
        xerr_quote(q, sizeof q, NAME(r.name));
        xerr_set(e, XERR_INVALID_ARGUMENT, "name %s is reserved for generated content", q);
        return 0;
    }
    uint64_t id = 0;
    if (store_upload_begin_owned(c->hc->st, c->hc->conn_id, NAME(r.name), r.size, r.chunk_size, &id, e) != XERR_OK)
        return 0;
    Xfer__V1__UploadBeginResponse resp = XFER__V1__UPLOAD_BEGIN_RESPONSE__INIT;
    resp.upload_id = id;
    return response_msg(c->h, &resp.base, out);
}

static int handle_upload_chunk(const call *c, handler_result *out, xerr *e) {
    rb_upload_chunk r;
    if (rb_upload_chunk_decode(c->body, c->body_len, &r) != 0) return malformed(e, "UploadChunkRequest");
    size_t len = r.data.len;
    if (len > c->hc->max_chunk) {
        xerr_set(e, XERR_INVALID_ARGUMENT, "chunk length %zu exceeds limit %u", len, c->hc->max_chunk);
        return 0;
    }
    uint64_t received = 0;
    if (store_upload_chunk(c->hc->st, r.upload_id, r.offset, r.data.p, len, c->owner, &received, e) != XERR_OK)
        return 0;
    out->in_bytes = len;
    Xfer__V1__UploadChunkResponse resp = XFER__V1__UPLOAD_CHUNK_RESPONSE__INIT;
    resp.received = received;
    return response_msg(c->h, &resp.base, out);
}

static int handle_upload_commit(const call *c, handler_result *out, xerr *e) {
    rb_upload_commit r;
    if (rb_upload_commit_decode(c->body, c->body_len, &r) != 0) return malformed(e, "UploadCommitRequest");
    uint64_t size = 0;
    uint32_t crc = 0;
    if (store_upload_commit(c->hc->st, r.upload_id, r.crc32, &size, &crc, e) != XERR_OK) return 0;
    Xfer__V1__UploadCommitResponse resp = XFER__V1__UPLOAD_COMMIT_RESPONSE__INIT;
    resp.size = size;
    resp.crc32 = crc;
    return response_msg(c->h, &resp.base, out);
}

static int handle_upload_abort(const call *c, handler_result *out, xerr *e) {
    rb_upload_abort r;
    if (rb_upload_abort_decode(c->body, c->body_len, &r) != 0) return malformed(e, "UploadAbortRequest");
    if (store_upload_abort(c->hc->st, r.upload_id, e) != XERR_OK) return 0;
    Xfer__V1__UploadAbortResponse resp = XFER__V1__UPLOAD_ABORT_RESPONSE__INIT;
    return response_msg(c->h, &resp.base, out);
}

/* ---- Read and Stat ---- */

/* What a Read or Stat names: a committed file or generated content. */
typedef struct {
    store_file *file; /* a reference (store_file_release), or NULL for gen: */
    uint64_t seed;    /* gen: */
    uint64_t size;
    uint32_t crc;
} content;

/* Finds what the valid name nl bytes at name stands for: gen:<size>:<seed> (its CRC-32 computed, or cached;
 * the pass is cut at the drain deadline) or a committed file. 0, or -1 with e set. */
static int find_content(const handler_ctx *hc, const char *name, size_t nl, content *out, xerr *e) {
    memset(out, 0, sizeof *out);
    if (name_is_gen(name, nl)) {
        if (gen_parse_name(name, nl, hc->max_file_size, &out->size, &out->seed, e) != 0) return -1;
        if (gen_crc_until(out->size, out->seed, hc->cancel, &out->crc) == 0) return 0;
        xerr_set(e, XERR_INTERNAL, "shutting down: the call was cut at the drain deadline");
        return -1;
    }
    out->file = store_file_get(hc->st, name, nl, e);
    if (!out->file) {
        char q[XERR_QUOTE_MAX];
        xerr_quote(q, sizeof q, name, nl);
        if (e->code == XERR_OK) xerr_set(e, XERR_NOT_FOUND, "file %s not found", q);
        return -1;
    }
    out->size = store_file_size(out->file);
    out->crc = store_file_crc(out->file);
    return 0;
}

/* ReadResponse{data, size, crc32} in canonical field order. The data is sent from the mem store's blocks or
 * the generated-content cache when it spans at most RESULT_SPANS of them; otherwise it is written straight
 * into the frame: read from disk (the one copy on the way out), generated, or copied from many small chunks.
 * Returns 1 with err set on an I/O error. */
static int encode_read(const reqhdr *h, const content *src, uint64_t offset, size_t dlen, handler_result *out,
                       xerr *err) {
    uint8_t tail[24];
    size_t tl = 0;
    if (src->size) { tail[tl++] = 0x10; tl = (size_t)(varint_put(tail + tl, src->size) - tail); }
    if (src->crc) { tail[tl++] = 0x18; tl = (size_t)(varint_put(tail + tl, src->crc) - tail); }
    size_t lead = response_bytes_lead_size(dlen), body_len = lead + dlen + tl;
    int ns = !dlen ? -1
             : src->file ? store_file_spans(src->file, offset, dlen, out->span, RESULT_SPANS)
                         : gencache_spans(src->seed, offset, dlen, out->span, RESULT_SPANS);
    uint8_t *p = response_begin(h, body_len, lead, ns >= 0 ? 0 : dlen, tl, out);
    if (!p) {
        for (int k = 0; k < ns; k++) blk_unref(out->span[k].ref);
        return -1;
    }
    p += response_bytes_lead(p, dlen);
    if (ns >= 0) {
        out->nspan = ns;
    } else if (dlen && src->file) {
        if (store_file_read(src->file, offset, p, dlen, err) != XERR_OK) {
            mem_free(out->frame);
            out->frame = NULL;
            return 1;
        }
    } else if (dlen) {
        gen_fill(src->seed, offset, p, dlen);
    }
    memcpy(out->frame + out->len, tail, tl);
    return 0;
}

static int handle_read(const call *c, handler_result *out, xerr *e) {
    rb_read r;
    if (rb_read_decode(c->body, c->body_len, &r) != 0) return malformed(e, "ReadRequest");
    if (!name_valid(NAME(r.name), e)) return 0;
    if (r.length == 0 || r.length > c->hc->max_chunk) {
        xerr_set(e, XERR_INVALID_ARGUMENT, "length %u is not in 1 ... %u", r.length, c->hc->max_chunk);
        return 0;
    }
    content src;
    if (find_content(c->hc, NAME(r.name), &src, e) != 0) return 0;
    int rc = 0;
    if (r.offset > src.size) {
        char q[XERR_QUOTE_MAX];
        xerr_quote(q, sizeof q, NAME(r.name));
        xerr_set(e, XERR_OUT_OF_RANGE, "offset %llu is past the end of file %s (size %llu)",
                 (unsigned long long)r.offset, q, (unsigned long long)src.size);
    } else {
        size_t dlen = src.size - r.offset < r.length ? (size_t)(src.size - r.offset) : r.length;
        rc = encode_read(c->h, &src, r.offset, dlen, out, e);
        if (rc == 1) rc = 0; /* e holds the I/O error */
        else if (rc == 0) out->out_bytes = dlen;
    }
    store_file_release(src.file);
    return rc;
}

/* StatResponse{name, size, crc32}, by hand: the name is in place, not NUL-terminated (and valid, so it holds
 * no NUL). */
static int encode_stat(const reqhdr *h, const char *name, size_t nl, uint64_t size, uint32_t crc,
                       handler_result *out) {
    size_t bl = 1 + varint_size(nl) + nl + (size ? 1 + varint_size(size) : 0) + (crc ? 1 + varint_size(crc) : 0);
    uint8_t *p = response_begin(h, bl, bl, 0, 0, out);
    if (!p) return -1;
    *p++ = 0x0a;
    p = varint_put(p, nl);
    memcpy(p, name, nl);
    p += nl;
    if (size) { *p++ = 0x10; p = varint_put(p, size); }
    if (crc) { *p++ = 0x18; varint_put(p, crc); }
    return 0;
}

static int handle_stat(const call *c, handler_result *out, xerr *e) {
    rb_stat r;
    if (rb_stat_decode(c->body, c->body_len, &r) != 0) return malformed(e, "StatRequest");
    if (!name_valid(NAME(r.name), e)) return 0;
    content src;
    if (find_content(c->hc, NAME(r.name), &src, e) != 0) return 0;
    int rc = encode_stat(c->h, NAME(r.name), src.size, src.crc, out);
    store_file_release(src.file);
    return rc;
}

/* ---- Echo, Meta, unknown methods ---- */

/* EchoResponse{payload}: the payload is sent from the request's block when it fills most of it (large
 * payloads), copied otherwise (a copy is cheaper than pinning a read buffer for a few bytes). */
static int handle_echo(const call *c, handler_result *out, xerr *e) {
    rb_echo r;
    if (rb_echo_decode(c->body, c->body_len, &r) != 0) return malformed(e, "EchoRequest");
    size_t n = r.payload.len;
    if (n > c->hc->max_chunk) {
        xerr_set(e, XERR_INVALID_ARGUMENT, "payload length %zu exceeds limit %u", n, c->hc->max_chunk);
        return 0;
    }
    size_t lead = response_bytes_lead_size(n);
    bool ref = blk_worth_keeping(c->owner, n);
    uint8_t *p = response_begin(c->h, lead + n, lead, ref ? 0 : n, 0, out);
    if (!p) return -1;
    p += response_bytes_lead(p, n);
    if (ref) out->span[out->nspan++] = (blk_span){r.payload.p, n, blk_ref(c->owner)};
    else if (n) memcpy(p, r.payload.p, n);
    return 0;
}

static int handle_meta(const call *c, handler_result *out, xerr *e) {
    meta_answer a;
    if (meta_prepare(c->body, c->body_len, c->hc->max_meta_entries, &a, e) != 0) return -1;
    if (e->code != XERR_OK) return 0;
    Xfer__V1__MetaResponse resp = XFER__V1__META_RESPONSE__INIT;
    resp.n_entries = a.n;
    resp.entries = a.sorted;
    resp.digest = a.digest;
    int rc = response_msg(c->h, &resp.base, out);
    meta_release(&a);
    return rc;
}

static int handle_unknown(const call *c, handler_result *out, xerr *e) {
    (void)out;
    char q[XERR_QUOTE_MAX];
    xerr_quote(q, sizeof q, c->h->method, c->h->method_len);
    xerr_set(e, XERR_UNIMPLEMENTED, "unknown method %s", q);
    return 0;
}

static const method_handler handlers[M__COUNT] = {
    [M_UPLOAD_BEGIN] = handle_upload_begin,
    [M_UPLOAD_CHUNK] = handle_upload_chunk,
    [M_UPLOAD_COMMIT] = handle_upload_commit,
    [M_UPLOAD_ABORT] = handle_upload_abort,
    [M_READ] = handle_read,
    [M_ECHO] = handle_echo,
    [M_STAT] = handle_stat,
    [M_META] = handle_meta,
    [M_UNKNOWN] = handle_unknown,
};

/* Replaces whatever out holds by the answer carrying e. */
static int answer_error(const reqhdr *h, const xerr *e, handler_result *out) {
    handler_result_release(out);
    out->len = out->tail_len = 0;
    out->in_bytes = out->out_bytes = 0;
    out->frame = response_error_frame(h->method, reqhdr_echo_len(h), h->seq, e->msg, &out->len);
    return out->frame ? 0 : -1;
}

int handle_request(const handler_ctx *hc, method_id m, const reqhdr *h, const uint8_t *body, size_t body_len,
                   blk *owner, handler_result *out) {
    xerr e;
    e.code = XERR_OK;
    memset(out, 0, sizeof *out);
    const call c = {.hc = hc, .h = h, .body = body, .body_len = body_len, .owner = owner};
    int rc = 0;
    /* a NUL in the method is the call error already in e; an id outside the table runs nothing */
    if (reqhdr_check_method(h, &e) == XERR_OK && (unsigned)m < M__COUNT) rc = handlers[m](&c, out, &e);
    if (rc != 0) {
        handler_result_release(out);
        return -1;
    }
    out->code = e.code;
    return e.code == XERR_OK ? 0 : answer_error(h, &e, out);
}
