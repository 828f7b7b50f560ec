/* reqhdr: strict RequestHeader decoding. */
#include "reqhdr.h"

#include <string.h>

#include "pbwire.h"
#include "utf8.h"
#include "varint.h"

#define FIELD_METHOD 1
#define FIELD_SEQ 2
#define FIELD_MAX ((1u << 29) - 1) /* protobuf's largest field number */

static const char malformed[] = "invalid_argument: malformed request header";
static const char seq_zero[] = "invalid_argument: request seq 0 is reserved";

/* Takes one field at *p into out; 0, or -1 when the header is malformed. */
static int take_field(const uint8_t **p, const uint8_t *end, reqhdr *out) {
    uint64_t tag, n;
    if (varint_read(p, end, &tag) != 0 || tag >> 3 == 0 || tag >> 3 > FIELD_MAX) return -1;
    uint64_t num = tag >> 3;
    unsigned type = (unsigned)(tag & 7);
    if (num == FIELD_METHOD) {
        if (type != PB_WIRE_LEN || varint_read(p, end, &n) != 0 || n > (uint64_t)(end - *p)) return -1;
        out->method = (const char *)*p; /* a repeated field: the last one wins */
        out->method_len = (size_t)n;
        *p += n;
        return utf8_valid(out->method, out->method_len) ? 0 : -1; /* but every one must be UTF-8 */
    }
    if (num == FIELD_SEQ) return type == PB_WIRE_VARINT ? varint_read(p, end, &out->seq) : -1;
    return pbwire_skip(p, end, type); /* unknown fields are skipped, as proto3 requires */
}

const char *reqhdr_decode(const uint8_t *h, size_t len, reqhdr *out) {
    const uint8_t *p = h, *end = h + len;
    out->method = "";
    out->method_len = 0;
    out->seq = 0;
    while (p < end)
        if (take_field(&p, end, out) != 0) return malformed;
    return out->seq == 0 ? seq_zero : NULL;
}

xerr_code reqhdr_check_method(const reqhdr *h, xerr *e) {
    if (!memchr(h->method, '\0', h->method_len)) return XERR_OK;
    char q[XERR_QUOTE_MAX];
    xerr_quote(q, sizeof q, h->method, h->method_len);
    return xerr_set(e, XERR_INVALID_ARGUMENT, "method %s contains NUL", q);
}

size_t reqhdr_echo_len(const reqhdr *h) { return h->method_len <= XERR_QUOTE_SUBJECT ? h->method_len : 0; }
