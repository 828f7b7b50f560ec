/* names: file-name rules (PROTOCOL.md "Names"). */
#ifndef XFERD_NAMES_H
#define XFERD_NAMES_H

#include <stdbool.h>
#include <stddef.h>

#include "xerr.h"

#define NAME_MAX_BYTES 255
#define NAME_GEN_PREFIX "gen:"

/* True when name[0..len) is a valid name (1..255 bytes of UTF-8, no '/', '\\', NUL, not "." or "..");
 * otherwise false with err set to invalid_argument naming the name and the fault. */
bool name_valid(const char *name, size_t len, xerr *err);

/* True when the name begins with "gen:" (synthetic content). */
bool name_is_gen(const char *name, size_t len);

#endif
