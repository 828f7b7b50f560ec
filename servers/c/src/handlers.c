/* handlers: decode, execute, encode. */
#include "handlers.h"

#include <string.h>

#include "frame.h"
#include "gen.h"
#include "gencache.h"
#include "mem.h"
#include "meta.h"
#include "names.h"
#include "reqbody.h"
#include "reqhdr.h"
#include "xfer/v1/file_transfer.pb-c.h"
#include "xfer/v1/frame.pb-c.h"

static const struct {
    const char *wire, *label;
} methods[M__COUNT] = {
    [M_UPLOAD_BEGIN] = {"Xfer.UploadBegin", "UploadBegin"},
    [M_UPLOAD_CHUNK] = {"Xfer.UploadChunk", "UploadChunk"},
    [M_UPLOAD_COMMIT] = {"Xfer.UploadCommit", "UploadCommit"},
    [M_UPLOAD_ABORT] = {"Xfer.UploadAbort", "UploadAbort"},
    [M_READ] = {"Xfer.Read", "Read"},
    [M_ECHO] = {"Xfer.Echo", "Echo"},
    [M_STAT] = {"Xfer.Stat", "Stat"},
    [M_META] = {"Xfer.Meta", "Meta"},
    [M_UNKNOWN] = {"", "unknown"},
};

method_id method_lookup(const char *name, size_t len) {
    for (int m = 0; m < M_UNKNOWN; m++)
        if (strlen(methods[m].wire) == len && memcmp(name, methods[m].wire, len) == 0) return (method_id)m;
    return M_UNKNOWN;
}

const char *method_label(method_id m) { return (unsigned)m < M__COUNT ? methods[m].label : "unknown"; }

static size_t prefix_size(size_t method_len, uint64_t seq, const char *error);
static size_t put_prefix(uint8_t *dst, const char *method, size_t method_len, uint64_t seq, const char *error,
                         size_t body_len);

static uint8_t *error_frame(const char *method, size_t method_len, uint64_t seq, const char *error, size_t *len) {
    uint8_t *f = mem_alloc(prefix_size(method_len, seq, error));
    if (!f) return NULL;
    *len = put_prefix(f, method, method_len, seq, error, 0);
    return f;
}

uint8_t *encode_error_frame(const char *method, uint64_t seq, const char *error, size_t *len) {
    return error_frame(method, strlen(method), seq, error, len);
}

/* Encodes a response with a protobuf-c message body. */
static int encode_msg(const reqhdr *h, const ProtobufCMessage *msg, handler_result *out) {
    size_t bl = protobuf_c_message_get_packed_size(msg);
    size_t pl = prefix_size(reqhdr_echo_len(h), h->seq, "");
    uint8_t *f = mem_alloc(pl + bl);
    if (!f) return -1;
    put_prefix(f, h->method, reqhdr_echo_len(h), h->seq, "", bl);
    protobuf_c_message_pack(msg, f + pl);
    out->frame = f;
    out->len = pl + bl;
    return 0;
}

static size_t varint_len(uint64_t v) {
    size_t n = 1;
    while (v >= 0x80) { v >>= 7; n++; }
    return n;
}
static uint8_t *put_varint(uint8_t *p, uint64_t v) {
    while (v >= 0x80) { *p++ = (uint8_t)(v | 0x80); v >>= 7; }
    *p++ = (uint8_t)v;
    return p;
}

/* The response prefix (frame_len, header_len, ResponseHeader{method, seq, error}) in its canonical encoding,
 * written by hand because an echoed method may hold a NUL, which protobuf-c's char* fields cannot carry. */
static size_t header_size(size_t method_len, uint64_t seq, size_t error_len) {
    return (method_len ? 1 + varint_len(method_len) + method_len : 0) + (seq ? 1 + varint_len(seq) : 0) +
           (error_len ? 1 + varint_len(error_len) + error_len : 0);
}

static size_t prefix_size(size_t method_len, uint64_t seq, const char *error) {
    return FRAME_PREFIX_LEN + header_size(method_len, seq, strlen(error));
}

static size_t put_prefix(uint8_t *dst, const char *method, size_t method_len, uint64_t seq, const char *error,
                         size_t body_len) {
    size_t el = strlen(error), hl = header_size(method_len, seq, el);
    frame_put_be32(dst, (uint32_t)(FRAME_MIN_LEN + hl + body_len));
    frame_put_be32(dst + 4, (uint32_t)hl);
    uint8_t *p = dst + FRAME_PREFIX_LEN;
    if (method_len) {
        *p++ = 0x0a;
        p = put_varint(p, method_len);
        memcpy(p, method, method_len);
        p += method_len;
    }
    if (seq) { *p++ = 0x10; p = put_varint(p, seq); }
    if (el) {
        *p++ = 0x1a;
        p = put_varint(p, el);
        memcpy(p, error, el);
        p += el;
    }
    return (size_t)(p - dst);
}

/* ---- encoding a response whose bulk bytes come from elsewhere ---- */

/* Starts a response of body_len bytes whose body begins with `lead` bytes written here (into the returned
 * pointer), then has bulk bytes as spans or written by the caller, then `tail` bytes (at out->frame + out->len
 * once the head is done). bulk_inline: the bulk bytes go into the head buffer too (copied or generated). */
static uint8_t *begin_response(const reqhdr *h, size_t body_len, size_t lead, size_t bulk_inline, size_t tail,
                               handler_result *out) {
    size_t pl = prefix_size(reqhdr_echo_len(h), h->seq, "");
    uint8_t *f = mem_alloc(pl + lead + bulk_inline + tail);
    if (!f) return NULL;
    put_prefix(f, h->method, reqhdr_echo_len(h), h->seq, "", body_len);
    out->frame = f;
    out->len = pl + lead + bulk_inline;
    out->tail_len = tail;
    return f + pl;
}

/* A bytes field's tag and length: the lead of a response whose first field is the bulk data. */
static size_t bytes_lead(uint8_t *dst, size_t dlen) {
    if (!dlen) return 0;
    dst[0] = 0x0a;
    return (size_t)(put_varint(dst + 1, dlen) - dst);
}
static size_t bytes_lead_size(size_t dlen) { return dlen ? 1 + varint_len(dlen) : 0; }

/* EchoResponse{payload}: the payload is sent from the request's block when it fills most of it (large
 * payloads), copied otherwise (a copy is cheaper than pinning a read buffer for a few bytes). */
static int encode_echo(const reqhdr *h, const rb_bytes *payload, blk *owner, handler_result *out) {
    size_t n = payload->len, lead = bytes_lead_size(n);
    bool ref = blk_worth_keeping(owner, n);
    uint8_t *p = begin_response(h, lead + n, lead, ref ? 0 : n, 0, out);
    if (!p) return -1;
    p += bytes_lead(p, n);
    if (ref) out->span[out->nspan++] = (blk_span){payload->p, n, blk_ref(owner)};
    else if (n) memcpy(p, payload->p, n);
    return 0;
}

typedef struct {
    const store_file *file;   /* or NULL for gen: */
    uint64_t seed;
} read_source;

/* ReadResponse{data, size, crc32} in canonical field order. The data is sent from the mem store's blocks or
 * the generated-content cache when it spans at most RESULT_SPANS of them; otherwise it is written straight
 * into the frame: read from disk (the one copy on the way out), generated, or copied from many small chunks. Returns 1 with err set on
 * an I/O error. */
static int encode_read(const reqhdr *h, const read_source *src, uint64_t offset, size_t dlen,
                       uint64_t size, uint32_t crc, handler_result *out, xerr *err) {
    uint8_t tail[24];
    size_t tl = 0;
    if (size) { tail[tl++] = 0x10; tl = (size_t)(put_varint(tail + tl, size) - tail); }
    if (crc) { tail[tl++] = 0x18; tl = (size_t)(put_varint(tail + tl, crc) - tail); }
    size_t lead = bytes_lead_size(dlen), body_len = lead + dlen + tl;
    int ns = !dlen ? -1
             : src->file ? store_file_spans(src->file, offset, dlen, out->span, RESULT_SPANS)
                         : gencache_spans(src->seed, offset, dlen, out->span, RESULT_SPANS);
    uint8_t *p = begin_response(h, body_len, lead, ns >= 0 ? 0 : dlen, tl, out);
    if (!p) {
        for (int k = 0; k < ns; k++) blk_unref(out->span[k].ref);
        return -1;
    }
    p += bytes_lead(p, dlen);
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

/* StatResponse{name, size, crc32}, by hand: the name is in place, not NUL-terminated (and valid, so it holds
 * no NUL). */
static int encode_stat(const reqhdr *h, const char *name, size_t nl, uint64_t size, uint32_t crc,
                       handler_result *out) {
    size_t bl = 1 + varint_len(nl) + nl + (size ? 1 + varint_len(size) : 0) + (crc ? 1 + varint_len(crc) : 0);
    uint8_t *p = begin_response(h, bl, bl, 0, 0, out);
    if (!p) return -1;
    *p++ = 0x0a;
    p = put_varint(p, nl);
    memcpy(p, name, nl);
    p += nl;
    if (size) { *p++ = 0x10; p = put_varint(p, size); }
    if (crc) { *p++ = 0x18; put_varint(p, crc); }
    return 0;
}

size_t handler_result_size(const handler_result *r) {
    size_t n = r->len + r->tail_len;
    for (int k = 0; k < r->nspan; k++) n += r->span[k].len;
    return n;
}

void handler_result_release(handler_result *r) {
    mem_free(r->frame);
    r->frame = NULL;
    for (int k = 0; k < r->nspan; k++) blk_unref(r->span[k].ref);
    r->nspan = 0;
}

int handler_result_flatten(handler_result *r) {
    if (!r->nspan && !r->tail_len) return 0;
    size_t total = handler_result_size(r);
    uint8_t *f = mem_alloc(total), *p = f;
    if (!f) return -1;
    memcpy(p, r->frame, r->len);
    p += r->len;
    for (int k = 0; k < r->nspan; k++) {
        memcpy(p, r->span[k].p, r->span[k].len);
        p += r->span[k].len;
    }
    memcpy(p, r->frame + r->len, r->tail_len);
    handler_result_release(r);
    r->frame = f;
    r->len = total;
    r->tail_len = 0;
    return 0;
}

#define MALFORMED(type) xerr_set(&e, XERR_INVALID_ARGUMENT, "malformed " type " body")

/* A name field, in place: not NUL-terminated, and may hold a NUL (which name_valid refuses). */
#define NAME(b) ((const char *)(b).p), ((b).len)

int handle_request(const handler_ctx *hc, method_id m, const reqhdr *h, const uint8_t *body, size_t body_len,
                   blk *owner, handler_result *out) {
    xerr e;
    e.code = XERR_OK;
    memset(out, 0, sizeof *out);
    int rc = 0;
    if (reqhdr_check_method(h, &e) != XERR_OK) m = M__COUNT; /* answered with e below */
    switch (m) {
    case M_UPLOAD_BEGIN: {
        rb_upload_begin r;
        if (rb_upload_begin_decode(body, body_len, &r) != 0) { MALFORMED("UploadBeginRequest"); break; }
        uint64_t id = 0;
        if (name_valid(NAME(r.name), &e)) {
            if (name_is_gen(NAME(r.name))) {
                char q[XERR_QUOTE_MAX];
                xerr_quote(q, sizeof q, NAME(r.name));
                xerr_set(&e, XERR_INVALID_ARGUMENT, "name %s is reserved for generated content", q);
            } else if (store_upload_begin_owned(hc->st, hc->conn_id, NAME(r.name), r.size, r.chunk_size, &id, &e) ==
                       XERR_OK) {
                Xfer__V1__UploadBeginResponse resp = XFER__V1__UPLOAD_BEGIN_RESPONSE__INIT;
                resp.upload_id = id;
                rc = encode_msg(h, &resp.base, out);
            }
        }
        break;
    }
    case M_UPLOAD_CHUNK: {
        rb_upload_chunk r;
        if (rb_upload_chunk_decode(body, body_len, &r) != 0) { MALFORMED("UploadChunkRequest"); break; }
        uint64_t received = 0;
        size_t len = r.data.len;
        if (len > hc->max_chunk) {
            xerr_set(&e, XERR_INVALID_ARGUMENT, "chunk length %zu exceeds limit %u", len, hc->max_chunk);
        } else if (store_upload_chunk(hc->st, r.upload_id, r.offset, r.data.p, len, owner, &received, &e) ==
                   XERR_OK) {
            out->in_bytes = len;
            Xfer__V1__UploadChunkResponse resp = XFER__V1__UPLOAD_CHUNK_RESPONSE__INIT;
            resp.received = received;
            rc = encode_msg(h, &resp.base, out);
        }
        break;
    }
    case M_UPLOAD_COMMIT: {
        rb_upload_commit r;
        if (rb_upload_commit_decode(body, body_len, &r) != 0) { MALFORMED("UploadCommitRequest"); break; }
        uint64_t size = 0;
        uint32_t crc = 0;
        if (store_upload_commit(hc->st, r.upload_id, r.crc32, &size, &crc, &e) == XERR_OK) {
            Xfer__V1__UploadCommitResponse resp = XFER__V1__UPLOAD_COMMIT_RESPONSE__INIT;
            resp.size = size;
            resp.crc32 = crc;
            rc = encode_msg(h, &resp.base, out);
        }
        break;
    }
    case M_UPLOAD_ABORT: {
        rb_upload_abort r;
        if (rb_upload_abort_decode(body, body_len, &r) != 0) { MALFORMED("UploadAbortRequest"); break; }
        if (store_upload_abort(hc->st, r.upload_id, &e) == XERR_OK) {
            Xfer__V1__UploadAbortResponse resp = XFER__V1__UPLOAD_ABORT_RESPONSE__INIT;
            rc = encode_msg(h, &resp.base, out);
        }
        break;
    }
    case M_READ:
    case M_STAT: {
        rb_bytes nb;
        uint64_t offset = 0;
        uint32_t length = 0;
        if (m == M_READ) {
            rb_read r;
            if (rb_read_decode(body, body_len, &r) != 0) { MALFORMED("ReadRequest"); break; }
            nb = r.name; offset = r.offset; length = r.length;
        } else {
            rb_stat r;
            if (rb_stat_decode(body, body_len, &r) != 0) { MALFORMED("StatRequest"); break; }
            nb = r.name;
        }
        const char *name = (const char *)nb.p;
        size_t nl = nb.len;
        char q[XERR_QUOTE_MAX];
        xerr_quote(q, sizeof q, name, nl);
        read_source src = {0};
        store_file *f = NULL;
        uint64_t size = 0;
        uint32_t crc = 0;
        if (!name_valid(name, nl, &e)) goto rs_done;
        if (m == M_READ && (length == 0 || length > hc->max_chunk)) {
            xerr_set(&e, XERR_INVALID_ARGUMENT, "length %u is not in 1 ... %u", length, hc->max_chunk);
            goto rs_done;
        }
        if (name_is_gen(name, nl)) {
            if (gen_parse_name(name, nl, hc->max_file_size, &size, &src.seed, &e) != 0) goto rs_done;
            if (gen_crc_until(size, src.seed, hc->cancel, &crc) != 0) {
                xerr_set(&e, XERR_INTERNAL, "shutting down: the call was cut at the drain deadline");
                goto rs_done;
            }
        } else {
            f = store_file_get(hc->st, name, nl, &e);
            if (!f) {
                if (e.code == XERR_OK) xerr_set(&e, XERR_NOT_FOUND, "file %s not found", q);
                goto rs_done;
            }
            src.file = f;
            size = store_file_size(f);
            crc = store_file_crc(f);
        }
        if (m == M_STAT) {
            rc = encode_stat(h, name, nl, size, crc, out);
        } else if (offset > size) {
            xerr_set(&e, XERR_OUT_OF_RANGE, "offset %llu is past the end of file %s (size %llu)",
                     (unsigned long long)offset, q, (unsigned long long)size);
        } else {
            size_t dlen = size - offset < length ? (size_t)(size - offset) : length;
            rc = encode_read(h, &src, offset, dlen, size, crc, out, &e);
            if (rc == 1) rc = 0; /* e holds the I/O error */
            else if (rc == 0) out->out_bytes = dlen;
        }
    rs_done:
        store_file_release(f);
        break;
    }
    case M_ECHO: {
        rb_echo r;
        if (rb_echo_decode(body, body_len, &r) != 0) { MALFORMED("EchoRequest"); break; }
        if (r.payload.len > hc->max_chunk)
            xerr_set(&e, XERR_INVALID_ARGUMENT, "payload length %zu exceeds limit %u", r.payload.len, hc->max_chunk);
        else rc = encode_echo(h, &r.payload, owner, out);
        break;
    }
    case M_META: {
        meta_answer a;
        if (meta_prepare(body, body_len, hc->max_meta_entries, &a, &e) != 0) { rc = -1; break; }
        if (e.code != XERR_OK) break;
        Xfer__V1__MetaResponse resp = XFER__V1__META_RESPONSE__INIT;
        resp.n_entries = a.n;
        resp.entries = a.sorted;
        resp.digest = a.digest;
        rc = encode_msg(h, &resp.base, out);
        meta_release(&a);
        break;
    }
    case M_UNKNOWN: {
        char q[XERR_QUOTE_MAX];
        xerr_quote(q, sizeof q, h->method, h->method_len);
        xerr_set(&e, XERR_UNIMPLEMENTED, "unknown method %s", q);
        break;
    }
    default: /* e already holds the header's call error */
        break;
    }
    if (rc != 0) {
        handler_result_release(out);
        return -1;
    }
    out->code = e.code;
    if (e.code != XERR_OK) {
        handler_result_release(out);
        out->len = out->tail_len = 0;
        out->in_bytes = out->out_bytes = 0;
        out->frame = error_frame(h->method, reqhdr_echo_len(h), h->seq, e.msg, &out->len);
        if (!out->frame) return -1;
    }
    return 0;
}
