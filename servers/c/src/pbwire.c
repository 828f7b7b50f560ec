#include "pbwire.h"

#define PB_WIRE_VARINT 0
#define PB_WIRE_I64 1
#define PB_WIRE_LEN 2
#define PB_WIRE_I32 5
#define PB_MAX_VARINT_BYTES 10

/* Reads a varint at *p (bounded by end); returns 0 on success. */
static int read_varint(const uint8_t **p, const uint8_t *end, uint64_t *out) {
    uint64_t v = 0;
    for (int i = 0; i < PB_MAX_VARINT_BYTES && *p < end; i++) {
        uint8_t b = *(*p)++;
        v |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            *out = v;
            return 0;
        }
    }
    return -1;
}

size_t pbwire_bytes_len(const uint8_t *msg, size_t len, uint32_t field) {
    const uint8_t *p = msg, *end = msg + len;
    size_t found = 0;
    while (p < end) {
        uint64_t tag, n;
        if (read_varint(&p, end, &tag) != 0) return (size_t)-1;
        switch (tag & 7) {
        case PB_WIRE_VARINT:
            if (read_varint(&p, end, &n) != 0) return (size_t)-1;
            break;
        case PB_WIRE_I64:
            if (end - p < 8) return (size_t)-1;
            p += 8;
            break;
        case PB_WIRE_I32:
            if (end - p < 4) return (size_t)-1;
            p += 4;
            break;
        case PB_WIRE_LEN:
            if (read_varint(&p, end, &n) != 0 || n > (uint64_t)(end - p)) return (size_t)-1;
            if ((tag >> 3) == field) found = (size_t)n;
            p += n;
            break;
        default:
            return (size_t)-1;
        }
    }
    return found;
}
