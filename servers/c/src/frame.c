/* frame: stateless parser and encoders of the frame layout. */
#include "frame.h"

#include <string.h>

#include "xfer/v1/frame.pb-c.h"

frame_status frame_parse(const uint8_t *buf, size_t len, uint32_t max_frame, size_t *total, xerr *err) {
    *total = 0;
    if (len < 4) return FRAME_NEED_MORE;
    uint32_t frame_len = frame_be32(buf);
    if (frame_len > max_frame) {
        xerr_set(err, XERR_RESOURCE_EXHAUSTED, "frame length %u exceeds limit %u", frame_len, max_frame);
        return FRAME_ERROR;
    }
    if (frame_len < FRAME_MIN_LEN) {
        xerr_set(err, XERR_INVALID_ARGUMENT, "frame length %u is less than %d", frame_len, FRAME_MIN_LEN);
        return FRAME_ERROR;
    }
    size_t whole = 4 + (size_t)frame_len;
    if (len < FRAME_PREFIX_LEN) {
        *total = whole;
        return FRAME_NEED_MORE;
    }
    uint32_t header_len = frame_be32(buf + 4);
    if (header_len > FRAME_HEADER_MAX) {
        xerr_set(err, XERR_INVALID_ARGUMENT, "header length %u exceeds limit %d", header_len, FRAME_HEADER_MAX);
        return FRAME_ERROR;
    }
    if (header_len > frame_len - 4) {
        xerr_set(err, XERR_INVALID_ARGUMENT, "header length %u exceeds frame length %u minus 4", header_len,
                 frame_len);
        return FRAME_ERROR;
    }
    *total = whole;
    return len >= whole ? FRAME_OK : FRAME_NEED_MORE;
}

void frame_split(const uint8_t *frame, size_t total, frame_parts *out) {
    uint32_t header_len = frame_be32(frame + 4);
    out->header = frame + FRAME_PREFIX_LEN;
    out->header_len = header_len;
    out->body = frame + FRAME_PREFIX_LEN + header_len;
    out->body_len = total - FRAME_PREFIX_LEN - header_len;
}

size_t frame_request_size(const char *method, uint64_t seq, size_t body_len) {
    Xfer__V1__RequestHeader h = XFER__V1__REQUEST_HEADER__INIT;
    h.method = (char *)(method ? method : "");
    h.seq = seq;
    return FRAME_PREFIX_LEN + xfer__v1__request_header__get_packed_size(&h) + body_len;
}

size_t frame_encode_request(uint8_t *dst, const char *method, uint64_t seq, const uint8_t *body, size_t body_len) {
    Xfer__V1__RequestHeader h = XFER__V1__REQUEST_HEADER__INIT;
    h.method = (char *)(method ? method : "");
    h.seq = seq;
    size_t hl = xfer__v1__request_header__pack(&h, dst + FRAME_PREFIX_LEN);
    frame_put_be32(dst, (uint32_t)(4 + hl + body_len));
    frame_put_be32(dst + 4, (uint32_t)hl);
    if (body_len) memcpy(dst + FRAME_PREFIX_LEN + hl, body, body_len);
    return FRAME_PREFIX_LEN + hl + body_len;
}

static void fill_response_header(Xfer__V1__ResponseHeader *h, const char *method, uint64_t seq, const char *error) {
    xfer__v1__response_header__init(h);
    h->method = (char *)(method ? method : "");
    h->seq = seq;
    h->error = (char *)(error ? error : "");
}

size_t frame_response_prefix_size(const char *method, uint64_t seq, const char *error) {
    Xfer__V1__ResponseHeader h;
    fill_response_header(&h, method, seq, error);
    return FRAME_PREFIX_LEN + xfer__v1__response_header__get_packed_size(&h);
}

size_t frame_encode_response_prefix(uint8_t *dst, const char *method, uint64_t seq, const char *error,
                                    size_t body_len) {
    Xfer__V1__ResponseHeader h;
    fill_response_header(&h, method, seq, error);
    size_t hl = xfer__v1__response_header__pack(&h, dst + FRAME_PREFIX_LEN);
    frame_put_be32(dst, (uint32_t)(4 + hl + body_len));
    frame_put_be32(dst + 4, (uint32_t)hl);
    return FRAME_PREFIX_LEN + hl;
}
