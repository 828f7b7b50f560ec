/* names: validation of file names. */
#include "names.h"

#include <stdint.h>
#include <string.h>

/* Length of the valid UTF-8 sequence at s (at most n bytes), or 0 when it is not valid UTF-8. */
static size_t utf8_seq(const unsigned char *s, size_t n) {
    unsigned char c = s[0];
    size_t need;
    uint32_t cp;
    if (c < 0x80) return 1;
    if (c >= 0xc2 && c <= 0xdf) { need = 2; cp = c & 0x1f; }
    else if (c >= 0xe0 && c <= 0xef) { need = 3; cp = c & 0x0f; }
    else if (c >= 0xf0 && c <= 0xf4) { need = 4; cp = c & 0x07; }
    else return 0;
    if (n < need) return 0;
    for (size_t i = 1; i < need; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if ((need == 3 && cp < 0x800) || (need == 4 && (cp < 0x10000 || cp > 0x10ffff))) return 0;
    if (cp >= 0xd800 && cp <= 0xdfff) return 0;
    return need;
}

bool name_valid(const char *name, size_t len, xerr *err) {
    char q[NAME_MAX_BYTES * 4 + 8];
    xerr_quote(q, sizeof q, name, len > NAME_MAX_BYTES ? NAME_MAX_BYTES : len);
    if (len == 0) {
        xerr_set(err, XERR_INVALID_ARGUMENT, "name \"\" is empty");
        return false;
    }
    if (len > NAME_MAX_BYTES) {
        xerr_set(err, XERR_INVALID_ARGUMENT, "name %s... is %zu bytes long, limit %d", q, len, NAME_MAX_BYTES);
        return false;
    }
    if ((len == 1 && name[0] == '.') || (len == 2 && name[0] == '.' && name[1] == '.')) {
        xerr_set(err, XERR_INVALID_ARGUMENT, "name %s is not allowed", q);
        return false;
    }
    const unsigned char *s = (const unsigned char *)name;
    for (size_t i = 0; i < len;) {
        if (s[i] == '/') { xerr_set(err, XERR_INVALID_ARGUMENT, "name %s contains '/'", q); return false; }
        if (s[i] == '\\') { xerr_set(err, XERR_INVALID_ARGUMENT, "name %s contains '\\'", q); return false; }
        if (s[i] == '\0') { xerr_set(err, XERR_INVALID_ARGUMENT, "name %s contains NUL", q); return false; }
        size_t k = utf8_seq(s + i, len - i);
        if (k == 0) {
            xerr_set(err, XERR_INVALID_ARGUMENT, "name %s is not valid UTF-8", q);
            return false;
        }
        i += k;
    }
    return true;
}

bool name_is_gen(const char *name, size_t len) {
    return len >= 4 && memcmp(name, NAME_GEN_PREFIX, 4) == 0;
}
