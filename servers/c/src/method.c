/* method: the name table. */
#include "method.h"

#include <string.h>

static const struct {
    const char *wire, *label;
} names[M__COUNT] = {
    [M_UPLOAD_BEGIN] = {"Xfer.UploadBegin", "UploadBegin"},
    [M_UPLOAD_CHUNK] = {"Xfer.UploadChunk", "UploadChunk"},
    [M_UPLOAD_COMMIT] = {"Xfer.UploadCommit", "UploadCommit"},
    [M_UPLOAD_ABORT] = {"Xfer.UploadAbort", "UploadAbort"},
    [M_READ] = {"Xfer.Read", "Read"},
    [M_ECHO] = {"Xfer.Echo", "Echo"},
    [M_STAT] = {"Xfer.Stat", "Stat"},
    [M_META] = {"Xfer.Meta", "Meta"},
    [M_UNKNOWN] = {"", "unknown"},
};

method_id method_lookup(const char *name, size_t len) {
    for (int m = 0; m < M_UNKNOWN; m++)
        if (strlen(names[m].wire) == len && memcmp(name, names[m].wire, len) == 0) return (method_id)m;
    return M_UNKNOWN;
}

const char *method_label(method_id m) { return (unsigned)m < M__COUNT ? names[m].label : "unknown"; }
