/* response: prefixes, error frames, packed and spanned bodies. */
#include "response.h"

#include <string.h>

#include "frame.h"
#include "mem.h"

/* ResponseHeader{method, seq, error}'s encoded size: fields in number order, proto3 defaults omitted. */
static size_t header_size(size_t method_len, uint64_t seq, size_t error_len) {
    return (method_len ? 1 + varint_size(method_len) + method_len : 0) + (seq ? 1 + varint_size(seq) : 0) +
           (error_len ? 1 + varint_size(error_len) + error_len : 0);
}

static size_t prefix_size(size_t method_len, uint64_t seq, const char *error) {
    return FRAME_PREFIX_LEN + header_size(method_len, seq, strlen(error));
}

/* Writes frame_len, header_len and the header for a body of body_len bytes; returns the bytes written. */
static size_t put_prefix(uint8_t *dst, const char *method, size_t method_len, uint64_t seq, const char *error,
                         size_t body_len) {
    size_t el = strlen(error), hl = header_size(method_len, seq, el);
    frame_put_be32(dst, (uint32_t)(FRAME_MIN_LEN + hl + body_len));
    frame_put_be32(dst + 4, (uint32_t)hl);
    uint8_t *p = dst + FRAME_PREFIX_LEN;
    if (method_len) {
        *p++ = 0x0a;
        p = varint_put(p, method_len);
        memcpy(p, method, method_len);
        p += method_len;
    }
    if (seq) { *p++ = 0x10; p = varint_put(p, seq); }
    if (el) {
        *p++ = 0x1a;
        p = varint_put(p, el);
        memcpy(p, error, el);
        p += el;
    }
    return (size_t)(p - dst);
}

uint8_t *response_error_frame(const char *method, size_t method_len, uint64_t seq, const char *error, size_t *len) {
    uint8_t *f = mem_alloc(prefix_size(method_len, seq, error));
    if (!f) return NULL;
    *len = put_prefix(f, method, method_len, seq, error, 0);
    return f;
}

uint8_t *encode_error_frame(const char *method, uint64_t seq, const char *error, size_t *len) {
    return response_error_frame(method, strlen(method), seq, error, len);
}

int response_msg(const reqhdr *h, const ProtobufCMessage *msg, handler_result *out) {
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

uint8_t *response_begin(const reqhdr *h, size_t body_len, size_t lead, size_t bulk_inline, size_t tail,
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
