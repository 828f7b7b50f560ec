/* vectors: reads the .vectors files of proto/testdata (TAB-separated fields, '#' comments, '-' = empty). */
#ifndef XFERD_TEST_VECTORS_H
#define XFERD_TEST_VECTORS_H

#include <stddef.h>
#include <stdint.h>

#define VEC_MAX_FIELDS 8
#define VEC_LINE_MAX (1 << 16)

typedef struct {
    int nfields;
    char *field[VEC_MAX_FIELDS]; /* NUL-terminated; "-" already turned into "" */
    int line;
} vec_line;

/* Calls fn for every vector line of dir/name; returns lines visited, or -1 when the file can't be read. */
int vec_each(const char *dir, const char *name, void (*fn)(const vec_line *l, void *ctx), void *ctx);

/* Decodes hex into a malloc'd buffer (*len bytes); NULL on bad hex. An empty string gives a 1-byte buffer, len 0. */
uint8_t *vec_hex(const char *hex, size_t *len);

#endif
