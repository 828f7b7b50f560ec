/* pbwire: reading one field's wire length from an encoded protobuf message.
 *
 * protobuf-c hands string fields back as NUL-terminated char*, so a name with an embedded NUL
 * ("a\0b") would look like "a" to strlen and silently alias another file. The wire length is the
 * truth; handlers take it from here. */
#ifndef XFERD_PBWIRE_H
#define XFERD_PBWIRE_H

#include <stddef.h>
#include <stdint.h>

/* The byte length of the last occurrence of length-delimited field `field` in msg[0..len) (protobuf's
 * "last one wins"), or 0 when the field is absent. Returns (size_t)-1 when msg is not well formed. */
size_t pbwire_bytes_len(const uint8_t *msg, size_t len, uint32_t field);

#endif
