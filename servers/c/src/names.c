/* names: validation of file names. */
#include "names.h"

#include <stdint.h>
#include <string.h>

#include "utf8.h"

bool name_valid(const char *name, size_t len, xerr *err) {
    char q[XERR_QUOTE_MAX];
    xerr_quote(q, sizeof q, name, len);
    if (len == 0) {
        xerr_set(err, XERR_INVALID_ARGUMENT, "name \"\" is empty");
        return false;
    }
    if (len > NAME_MAX_BYTES) {
        xerr_set(err, XERR_INVALID_ARGUMENT, "name %s is %zu bytes long, limit %d", q, len, NAME_MAX_BYTES);
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
        size_t k = utf8_char_len(s + i, len - i);
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
