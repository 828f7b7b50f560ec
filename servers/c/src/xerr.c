/* xerr: error codes and strings. */
#include "xerr.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

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

void xerr_quote(char *out, size_t cap, const char *s, size_t len) {
    size_t o = 0;
    if (cap < 3) {
        if (cap) out[0] = '\0';
        return;
    }
    out[o++] = '"';
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        char tmp[8];
        int n;
        if (c == '"' || c == '\\') n = snprintf(tmp, sizeof tmp, "\\%c", c);
        else if (c < 0x20 || c == 0x7f) n = snprintf(tmp, sizeof tmp, "\\x%02x", c);
        else { tmp[0] = (char)c; n = 1; }
        if (o + (size_t)n + 2 > cap) break;
        memcpy(out + o, tmp, (size_t)n);
        o += (size_t)n;
    }
    out[o++] = '"';
    out[o] = '\0';
}
