/* xerr: error codes and strings. */
#include "xerr.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "utf8.h"

static const char *const names[XERR__COUNT] = {
    [XERR_OK] = "ok",
    [XERR_INVALID_ARGUMENT] = "invalid_argument",
    [XERR_NOT_FOUND] = "not_found",
    [XERR_FAILED_PRECONDITION] = "failed_precondition",
    [XERR_OUT_OF_RANGE] = "out_of_range",
    [XERR_DATA_LOSS] = "data_loss",
    [XERR_RESOURCE_EXHAUSTED] = "resource_exhausted",
    [XERR_UNIMPLEMENTED] = "unimplemented",
    [XERR_INTERNAL] = "internal",
};

const char *xerr_name(xerr_code code) {
    if ((unsigned)code >= XERR__COUNT) return "internal";
    return names[code];
}

xerr_code xerr_set(xerr *e, xerr_code code, const char *fmt, ...) {
    e->code = code;
    int n = snprintf(e->msg, sizeof e->msg, "%s: ", xerr_name(code));
    if (n < 0) n = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg + n, sizeof e->msg - (size_t)n, fmt, ap);
    va_end(ap);
    return code;
}

/* The escaped form of the one byte c that is not part of a multi-byte character. */
static int quote_byte(char tmp[8], unsigned char c) {
    if (c == '"' || c == '\\') return snprintf(tmp, 8, "\\%c", c);
    if (c < 0x20 || c >= 0x7f) return snprintf(tmp, 8, "\\x%02x", c);
    tmp[0] = (char)c;
    return 1;
}

void xerr_quote(char *out, size_t cap, const char *s, size_t len) {
    const unsigned char *u = (const unsigned char *)s;
    size_t o = 0, i = 0;
    if (cap < 3) {
        if (cap) out[0] = '\0';
        return;
    }
    out[o++] = '"';
    while (i < len) {
        size_t k = utf8_char_len(u + i, len - i);
        size_t step = k ? k : 1; /* a byte of no valid character is escaped on its own */
        if (i + step > XERR_QUOTE_SUBJECT) break;
        char tmp[8];
        int n = k > 1 ? (memcpy(tmp, u + i, k), (int)k) : quote_byte(tmp, u[i]);
        if (o + (size_t)n + 5 > cap) break; /* room for the closing quote, "..." and the NUL */
        memcpy(out + o, tmp, (size_t)n);
        o += (size_t)n;
        i += step;
    }
    out[o++] = '"';
    if (i < len) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o] = '\0';
}
