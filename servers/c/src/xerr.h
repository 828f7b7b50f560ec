/* xerr: the protocol's error codes (PROTOCOL.md "Errors") and the "<code>: <message>" strings. */
#ifndef XFERD_XERR_H
#define XFERD_XERR_H

#include <stddef.h>

typedef enum {
    XERR_OK = 0,
    XERR_INVALID_ARGUMENT,
    XERR_NOT_FOUND,
    XERR_FAILED_PRECONDITION,
    XERR_OUT_OF_RANGE,
    XERR_DATA_LOSS,
    XERR_RESOURCE_EXHAUSTED,
    XERR_UNIMPLEMENTED,
    XERR_INTERNAL,
    XERR__COUNT
} xerr_code;

/* Longest error string we ever produce (names are at most 255 bytes; quoting may escape them). */
#define XERR_MSG_MAX 1400

/* A call's outcome: a code and, when not OK, the full "<code>: <message>" string. */
typedef struct {
    xerr_code code;
    char msg[XERR_MSG_MAX];
} xerr;

/* "ok", "invalid_argument", ... as used in error strings and metric labels. */
const char *xerr_name(xerr_code code);

/* Sets e to code with message "<code>: <printf fmt...>"; returns code (so callers can `return xerr_set(...)`). */
xerr_code xerr_set(xerr *e, xerr_code code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Bytes of a subject that an error quotes (PROTOCOL.md "Quoting"). */
#define XERR_QUOTE_SUBJECT 64
/* Room for any quoting: two quotes, every byte as \xNN, "..." and the NUL. */
#define XERR_QUOTE_MAX (2 + 4 * XERR_QUOTE_SUBJECT + 3 + 1)

/* Writes PROTOCOL.md's quoting of the subject s[0..len) into out (cap >= XERR_QUOTE_MAX, or the quoting is
 * cut short): at most 64 bytes, never cutting a UTF-8 character, escaped so the result is valid UTF-8, and
 * "..." after the closing quote when the subject was cut. proto/testdata/quote.vectors pins it down. */
void xerr_quote(char *out, size_t cap, const char *s, size_t len);

#endif
