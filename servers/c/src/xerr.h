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

/* Writes a quoted, printable form of s[0..len) (like Go's %q for ASCII) into out (size cap). */
void xerr_quote(char *out, size_t cap, const char *s, size_t len);

#endif
