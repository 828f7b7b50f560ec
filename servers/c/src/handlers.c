/* handlers: decode, execute, encode. */
#include "handlers.h"

#include <string.h>

#include "frame.h"
#include "gen.h"
#include "mem.h"
#include "names.h"
#include "pbwire.h"
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

typedef struct {
    const store_file *file;   /* or NULL for gen: */
    uint64_t seed;
} read_source;

/* Encodes ReadResponse{data, size, crc32} by hand (canonical field order) so the data is written
 * straight into the frame: one copy from the store (or the generator), none through a temporary. */
static int encode_read(const reqhdr *h, const read_source *src, uint64_t offset, size_t dlen,
                       uint64_t size, uint32_t crc, handler_result *out, xerr *err) {
    size_t bl = (dlen ? 1 + varint_len(dlen) + dlen : 0) + (size ? 1 + varint_len(size) : 0) +
                (crc ? 1 + varint_len(crc) : 0);
    size_t pl = prefix_size(reqhdr_echo_len(h), h->seq, "");
    uint8_t *f = mem_alloc(pl + bl);
    if (!f) return -1;
    put_prefix(f, h->method, reqhdr_echo_len(h), h->seq, "", bl);
    uint8_t *p = f + pl;
    if (dlen) {
        *p++ = 0x0a;
        p = put_varint(p, dlen);
        if (src->file) {
            if (store_file_read(src->file, offset, p, dlen, err) != XERR_OK) {
                mem_free(f);
                return 1;
            }
        } else {
            gen_fill(src->seed, offset, p, dlen);
        }
        p += dlen;
    }
    if (size) { *p++ = 0x10; p = put_varint(p, size); }
    if (crc) { *p++ = 0x18; p = put_varint(p, crc); }
    out->frame = f;
    out->len = pl + bl;
    return 0;
}

/* `name` is field 1 of UploadBeginRequest, ReadRequest and StatRequest. Its length comes from the
 * wire, not strlen: protobuf-c's char* would hide an embedded NUL (pbwire.h). The body already
 * unpacked, so it is well formed. */
#define NAME_FIELD 1
#define WIRE_NAME_LEN(body, body_len) pbwire_bytes_len((body), (body_len), NAME_FIELD)

#define MALFORMED(type) xerr_set(&e, XERR_INVALID_ARGUMENT, "malformed " type " body")

/* protobuf-c's unpack after pbwire_check: integers that overflow their 32-bit fields and strings that are
 * not UTF-8 make the body malformed, as in xferd-go (PROTOCOL.md "Integers"). */
static void *unpack(const ProtobufCMessageDescriptor *d, const uint8_t *body, size_t body_len) {
    if (pbwire_check(body, body_len, d) != 0) return NULL;
    return protobuf_c_message_unpack(d, mem_pb_allocator(), body_len, body);
}
#define UNPACK(type, name) ((type *)unpack(&name##__descriptor, body, body_len))

int handle_request(const handler_ctx *hc, method_id m, const reqhdr *h, const uint8_t *body, size_t body_len,
                   handler_result *out) {
    ProtobufCAllocator *a = mem_pb_allocator();
    xerr e;
    e.code = XERR_OK;
    memset(out, 0, sizeof *out);
    int rc = 0;
    if (reqhdr_check_method(h, &e) != XERR_OK) m = M__COUNT; /* answered with e below */
    switch (m) {
    case M_UPLOAD_BEGIN: {
        Xfer__V1__UploadBeginRequest *r = UNPACK(Xfer__V1__UploadBeginRequest, xfer__v1__upload_begin_request);
        if (!r) { MALFORMED("UploadBeginRequest"); break; }
        size_t nl = WIRE_NAME_LEN(body, body_len);
        uint64_t id = 0;
        if (name_valid(r->name, nl, &e)) {
            if (name_is_gen(r->name, nl)) {
                char q[XERR_QUOTE_MAX];
                xerr_quote(q, sizeof q, r->name, nl);
                xerr_set(&e, XERR_INVALID_ARGUMENT, "name %s is reserved for generated content", q);
            } else if (store_upload_begin_owned(hc->st, hc->conn_id, r->name, nl, r->size, r->chunk_size, &id, &e) == XERR_OK) {
                Xfer__V1__UploadBeginResponse resp = XFER__V1__UPLOAD_BEGIN_RESPONSE__INIT;
                resp.upload_id = id;
                rc = encode_msg(h, &resp.base, out);
            }
        }
        xfer__v1__upload_begin_request__free_unpacked(r, a);
        break;
    }
    case M_UPLOAD_CHUNK: {
        Xfer__V1__UploadChunkRequest *r = UNPACK(Xfer__V1__UploadChunkRequest, xfer__v1__upload_chunk_request);
        if (!r) { MALFORMED("UploadChunkRequest"); break; }
        uint64_t received = 0;
        size_t len = r->data.len;
        if (len > hc->max_chunk) {
            xerr_set(&e, XERR_INVALID_ARGUMENT, "chunk length %zu exceeds limit %u", len, hc->max_chunk);
        } else if (store_upload_chunk(hc->st, r->upload_id, r->offset, &r->data.data, len, &received, &e) ==
                   XERR_OK) {
            if (!r->data.data) r->data.len = 0; /* the store kept the buffer */
            out->in_bytes = len;
            Xfer__V1__UploadChunkResponse resp = XFER__V1__UPLOAD_CHUNK_RESPONSE__INIT;
            resp.received = received;
            rc = encode_msg(h, &resp.base, out);
        }
        xfer__v1__upload_chunk_request__free_unpacked(r, a);
        break;
    }
    case M_UPLOAD_COMMIT: {
        Xfer__V1__UploadCommitRequest *r = UNPACK(Xfer__V1__UploadCommitRequest, xfer__v1__upload_commit_request);
        if (!r) { MALFORMED("UploadCommitRequest"); break; }
        uint64_t size = 0;
        uint32_t crc = 0;
        if (store_upload_commit(hc->st, r->upload_id, r->crc32, &size, &crc, &e) == XERR_OK) {
            Xfer__V1__UploadCommitResponse resp = XFER__V1__UPLOAD_COMMIT_RESPONSE__INIT;
            resp.size = size;
            resp.crc32 = crc;
            rc = encode_msg(h, &resp.base, out);
        }
        xfer__v1__upload_commit_request__free_unpacked(r, a);
        break;
    }
    case M_UPLOAD_ABORT: {
        Xfer__V1__UploadAbortRequest *r = UNPACK(Xfer__V1__UploadAbortRequest, xfer__v1__upload_abort_request);
        if (!r) { MALFORMED("UploadAbortRequest"); break; }
        if (store_upload_abort(hc->st, r->upload_id, &e) == XERR_OK) {
            Xfer__V1__UploadAbortResponse resp = XFER__V1__UPLOAD_ABORT_RESPONSE__INIT;
            rc = encode_msg(h, &resp.base, out);
        }
        xfer__v1__upload_abort_request__free_unpacked(r, a);
        break;
    }
    case M_READ:
    case M_STAT: {
        ProtobufCMessage *msg;
        const char *name;
        uint64_t offset = 0;
        uint32_t length = 0;
        if (m == M_READ) {
            Xfer__V1__ReadRequest *r = UNPACK(Xfer__V1__ReadRequest, xfer__v1__read_request);
            if (!r) { MALFORMED("ReadRequest"); break; }
            msg = &r->base; name = r->name; offset = r->offset; length = r->length;
        } else {
            Xfer__V1__StatRequest *r = UNPACK(Xfer__V1__StatRequest, xfer__v1__stat_request);
            if (!r) { MALFORMED("StatRequest"); break; }
            msg = &r->base; name = r->name;
        }
        size_t nl = WIRE_NAME_LEN(body, body_len);
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
            crc = gen_crc(size, src.seed);
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
            Xfer__V1__StatResponse resp = XFER__V1__STAT_RESPONSE__INIT;
            resp.name = (char *)name;
            resp.size = size;
            resp.crc32 = crc;
            rc = encode_msg(h, &resp.base, out);
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
        protobuf_c_message_free_unpacked(msg, a);
        break;
    }
    case M_ECHO: {
        Xfer__V1__EchoRequest *r = UNPACK(Xfer__V1__EchoRequest, xfer__v1__echo_request);
        if (!r) { MALFORMED("EchoRequest"); break; }
        if (r->payload.len > hc->max_chunk) {
            xerr_set(&e, XERR_INVALID_ARGUMENT, "payload length %zu exceeds limit %u", r->payload.len, hc->max_chunk);
        } else {
            Xfer__V1__EchoResponse resp = XFER__V1__ECHO_RESPONSE__INIT;
            resp.payload = r->payload;
            rc = encode_msg(h, &resp.base, out);
        }
        xfer__v1__echo_request__free_unpacked(r, a);
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
    if (rc != 0) return -1;
    out->code = e.code;
    if (e.code != XERR_OK) {
        out->in_bytes = out->out_bytes = 0;
        out->frame = error_frame(h->method, reqhdr_echo_len(h), h->seq, e.msg, &out->len);
        if (!out->frame) return -1;
    }
    return 0;
}
