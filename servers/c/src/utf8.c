/* utf8: validation. */
#include "utf8.h"

#include <stdint.h>

size_t utf8_char_len(const unsigned char *s, size_t n) {
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

bool utf8_valid(const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        size_t k = utf8_char_len(u + i, n - i);
        if (k == 0) return false;
        i += k;
    }
    return true;
}
