/* reqhdr: the request header (PROTOCOL.md "Request headers"), decoded by the spec's one definition of a
 * valid RequestHeader rather than by protobuf-c, whose char* method stops at a NUL and is not checked for
 * UTF-8. xferd-go's frame/wire.go implements the same definition; headers.vectors holds both to it. */
#ifndef XFERD_REQHDR_H
#define XFERD_REQHDR_H

#include <stddef.h>
#include <stdint.h>

#include "xerr.h"

typedef struct {
    const char *method; /* points into the decoded header bytes; not NUL-terminated, may contain NUL */
    size_t method_len;
    uint64_t seq;
} reqhdr;

/* Decodes h[0..len). Returns NULL for a valid header with a non-zero seq, else the connection error to send
 * ("invalid_argument: malformed request header" or "invalid_argument: request seq 0 is reserved"). */
const char *reqhdr_decode(const uint8_t *h, size_t len, reqhdr *out);

/* The call error of a valid header (a NUL in the method): sets e and returns its code, or XERR_OK. */
xerr_code reqhdr_check_method(const reqhdr *h, xerr *e);

/* Bytes of the method a response echoes: all of it when at most 64 bytes, else none, which keeps every
 * response header far inside the 1024-byte limit. */
size_t reqhdr_echo_len(const reqhdr *h);

#endif
