/* gen: deterministic content and name parsing. */
#include "gen.h"

#include <string.h>

#define GEN_GAMMA 0x9e3779b97f4a7c15ull

uint64_t gen_word(uint64_t seed, uint64_t i) {
    uint64_t z = seed + (i + 1) * GEN_GAMMA;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void put_le64(uint8_t *p, uint64_t v) {
    for (int k = 0; k < 8; k++) p[k] = (uint8_t)(v >> (8 * k));
}

void gen_fill(uint64_t seed, uint64_t offset, uint8_t *dst, size_t len) {
    uint64_t i = offset / 8;
    size_t skip = (size_t)(offset % 8);
    uint8_t w[8];
    if (len && skip) {
        put_le64(w, gen_word(seed, i++));
        size_t n = 8 - skip < len ? 8 - skip : len;
        memcpy(dst, w + skip, n);
        dst += n;
        len -= n;
    }
    while (len >= 8) {
        put_le64(dst, gen_word(seed, i++));
        dst += 8;
        len -= 8;
    }
    if (len) {
        put_le64(w, gen_word(seed, i));
        memcpy(dst, w, len);
    }
}

/* Parses an unsigned decimal without sign or leading zeros into *out; -1 on any fault. */
static int parse_u64(const char *s, size_t n, uint64_t *out) {
    if (n == 0 || n > 20) return -1;
    if (n > 1 && s[0] == '0') return -1;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        uint64_t d = (uint64_t)(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10) return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

int gen_parse_name(const char *name, size_t len, uint64_t max_size, uint64_t *size, uint64_t *seed, xerr *err) {
    char q[XERR_QUOTE_MAX];
    xerr_quote(q, sizeof q, name, len);
    const char *p = name + (len < 4 ? len : 4), *end = name + len;
    const char *colon = memchr(p, ':', (size_t)(end - p));
    if (len < 4 || !colon) {
        xerr_set(err, XERR_INVALID_ARGUMENT, "malformed gen name %s: want gen:<size>:<seed>", q);
        return -1;
    }
    if (parse_u64(p, (size_t)(colon - p), size) != 0 ||
        parse_u64(colon + 1, (size_t)(end - colon - 1), seed) != 0) {
        xerr_set(err, XERR_INVALID_ARGUMENT, "malformed gen name %s: want gen:<size>:<seed> in decimal", q);
        return -1;
    }
    if (*size > max_size) {
        xerr_set(err, XERR_INVALID_ARGUMENT, "gen name %s: size %llu exceeds limit %llu", q,
                 (unsigned long long)*size, (unsigned long long)max_size);
        return -1;
    }
    return 0;
}
