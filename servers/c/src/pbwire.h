/* pbwire: reading protobuf wire format directly (its varints are varint.h's): skipping a field, one field's
 * wire length, and a check of a whole message against its descriptor.
 *
 * protobuf-c hands string fields back as NUL-terminated char*, so a name with an embedded NUL
 * ("a\0b") would look like "a" to strlen and silently alias another file. The wire length is the
 * truth; handlers take it from here. */
#ifndef XFERD_PBWIRE_H
#define XFERD_PBWIRE_H

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#define PB_WIRE_VARINT 0
#define PB_WIRE_I64 1
#define PB_WIRE_LEN 2
#define PB_WIRE_I32 5

/* The byte length of the last occurrence of length-delimited field `field` in msg[0..len) (protobuf's
 * "last one wins"), or 0 when the field is absent. Returns (size_t)-1 when msg is not well formed. */
size_t pbwire_bytes_len(const uint8_t *msg, size_t len, uint32_t field);

/* Skips the value of a field of wire type `type` at *p; 0 on success, -1 when it is malformed or the wire
 * type is not 0, 1, 2 or 5 (groups are not part of our protocol). */
int pbwire_skip(const uint8_t **p, const uint8_t *end, unsigned type);

/* Checks msg[0..len) against descriptor d before protobuf-c decodes it (PROTOCOL.md "Integers"): a varint in
 * a 32-bit field must fit 32 bits (protobuf-c keeps the low bits silently), and a string field must be valid
 * UTF-8 (as proto3 and Go's decoder require; protobuf-c does not check). Nested messages are checked too.
 * Returns 0, or -1 when the message is to be refused as malformed. */
int pbwire_check(const uint8_t *msg, size_t len, const ProtobufCMessageDescriptor *d);

#endif
