/* bodydiff: the in-place request decoder (reqbody.h) against the reference path it replaced (pbwire_check,
 * then protobuf-c's unpack), for every request type, on any bytes. Used by the unit tests and the fuzzer. */
#ifndef XFERD_BODYDIFF_H
#define XFERD_BODYDIFF_H

#include <stddef.h>
#include <stdint.h>

/* Returns 0 when both decoders accept body[0..len) as each of the seven request types with equal fields, or
 * both refuse it; otherwise -1 with what differed in why. */
int bodydiff_check(const uint8_t *body, size_t len, char *why, size_t whylen);

#endif
