/* vectors: loader for the shared test vectors. */
#include "vectors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int vec_each(const char *dir, const char *name, void (*fn)(const vec_line *l, void *ctx), void *ctx) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char *buf = malloc(VEC_LINE_MAX);
    if (!buf) {
        fclose(f);
        return -1;
    }
    int count = 0, lineno = 0;
    while (fgets(buf, VEC_LINE_MAX, f)) {
        lineno++;
        size_t n = strlen(buf);
        while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r')) buf[--n] = '\0';
        if (n == 0 || buf[0] == '#') continue;
        vec_line l = {.nfields = 0, .line = lineno};
        char *p = buf;
        while (l.nfields < VEC_MAX_FIELDS) {
            char *tab = strchr(p, '\t');
            if (tab) *tab = '\0';
            l.field[l.nfields++] = strcmp(p, "-") == 0 ? p + 1 : p; /* "-" -> "" */
            if (!tab) break;
            p = tab + 1;
        }
        fn(&l, ctx);
        count++;
    }
    free(buf);
    fclose(f);
    return count;
}

static int nib(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

uint8_t *vec_hex(const char *hex, size_t *len) {
    size_t n = strlen(hex);
    if (n % 2) return NULL;
    uint8_t *b = malloc(n / 2 + 1);
    if (!b) return NULL;
    for (size_t i = 0; i < n / 2; i++) {
        int hi = nib(hex[2 * i]), lo = nib(hex[2 * i + 1]);
        if (hi < 0 || lo < 0) {
            free(b);
            return NULL;
        }
        b[i] = (uint8_t)(hi << 4 | lo);
    }
    *len = n / 2;
    return b;
}
