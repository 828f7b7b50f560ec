/* utf8: the one definition of valid UTF-8 (no overlongs, no surrogates, nothing past U+10FFFF) shared by
 * names, quoting and protobuf string checks, so they all agree with Go's unicode/utf8. */
#ifndef XFERD_UTF8_H
#define XFERD_UTF8_H

#include <stdbool.h>
#include <stddef.h>

/* Length of the valid UTF-8 character at s (at most n bytes, n > 0), or 0 when s[0] does not start one. */
size_t utf8_char_len(const unsigned char *s, size_t n);

/* Whether s[0..n) is valid UTF-8 throughout. */
bool utf8_valid(const char *s, size_t n);

#endif
