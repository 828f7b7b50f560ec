/* method: the frame methods' ids (PROTOCOL.md "Methods"), their wire names and their metric labels. The one
 * small header both the request layer (handlers.h, its table of handlers indexed by method_id) and the
 * counters (stats.h, a row per method) include. */
#ifndef XFERD_METHOD_H
#define XFERD_METHOD_H

#include <stddef.h>

typedef enum {
    M_UPLOAD_BEGIN,
    M_UPLOAD_CHUNK,
    M_UPLOAD_COMMIT,
    M_UPLOAD_ABORT,
    M_READ,
    M_ECHO,
    M_STAT,
    M_META,
    M_UNKNOWN,
    M__COUNT
} method_id;

/* "Xfer.Echo" -> M_ECHO; anything else -> M_UNKNOWN. Byte for byte over len bytes: a NUL never ends a name. */
method_id method_lookup(const char *name, size_t len);
/* The metric label: "Echo", ..., "unknown". */
const char *method_label(method_id m);

#endif
