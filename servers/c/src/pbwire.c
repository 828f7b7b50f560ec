/* pbwire: field skipping, wire lengths and the descriptor check. */
#include "pbwire.h"

#include "utf8.h"
#include "varint.h"

int pbwire_skip(const uint8_t **p, const uint8_t *end, unsigned type) {
    uint64_t n;
    switch (type) {
    case PB_WIRE_VARINT:
        return varint_read(p, end, &n);
    case PB_WIRE_I64:
        if (end - *p < 8) return -1;
        *p += 8;
        return 0;
    case PB_WIRE_I32:
        if (end - *p < 4) return -1;
        *p += 4;
        return 0;
    case PB_WIRE_LEN:
        if (varint_read(p, end, &n) != 0 || n > (uint64_t)(end - *p)) return -1;
        *p += n;
        return 0;
    default:
        return -1;
    }
}

size_t pbwire_bytes_len(const uint8_t *msg, size_t len, uint32_t field) {
    const uint8_t *p = msg, *end = msg + len;
    size_t found = 0;
    while (p < end) {
        uint64_t tag;
        if (varint_read(&p, end, &tag) != 0) return (size_t)-1;
        const uint8_t *v = p;
        if (pbwire_skip(&p, end, tag & 7) != 0) return (size_t)-1;
        if ((tag & 7) == PB_WIRE_LEN && (tag >> 3) == field) {
            uint64_t n = 0;
            varint_read(&v, p, &n); /* already read once by pbwire_skip */
            found = (size_t)n;
        }
    }
    return found;
}

/* Whether varint x is a value of a field of type t. */
static int varint_fits(ProtobufCType t, uint64_t x) {
    switch (t) {
    case PROTOBUF_C_TYPE_UINT32:
        return x <= UINT32_MAX;
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_ENUM: /* negative values are sign-extended to 64 bits */
        return (int64_t)x >= INT32_MIN && (int64_t)x <= INT32_MAX;
    case PROTOBUF_C_TYPE_SINT32: /* zigzag maps int32's range onto 0 ... 2^32 - 1 */
        return x <= UINT32_MAX;
    default:
        return 1;
    }
}

/* Checks one field value v..end of wire type `type`, already known to be well formed. */
static int check_field(const ProtobufCFieldDescriptor *f, unsigned type, const uint8_t *v, const uint8_t *end) {
    uint64_t x = 0;
    if (type == PB_WIRE_VARINT) {
        varint_read(&v, end, &x);
        return varint_fits(f->type, x) ? 0 : -1;
    }
    if (type != PB_WIRE_LEN) return 0;
    varint_read(&v, end, &x);
    if (f->type == PROTOBUF_C_TYPE_STRING) return utf8_valid((const char *)v, (size_t)x) ? 0 : -1;
    if (f->type == PROTOBUF_C_TYPE_MESSAGE) return pbwire_check(v, (size_t)x, f->descriptor);
    return 0;
}

int pbwire_check(const uint8_t *msg, size_t len, const ProtobufCMessageDescriptor *d) {
    const uint8_t *p = msg, *end = msg + len;
    while (p < end) {
        uint64_t tag;
        if (varint_read(&p, end, &tag) != 0 || tag >> 3 == 0 || tag >> 3 > UINT32_MAX) return -1;
        const uint8_t *v = p;
        if (pbwire_skip(&p, end, tag & 7) != 0) return -1;
        const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field(d, (unsigned)(tag >> 3));
        if (f && check_field(f, tag & 7, v, p) != 0) return -1;
    }
    return 0;
}
