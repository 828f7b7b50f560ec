/* store: committed files and open uploads, in memory or on disk (PROTOCOL.md "Chunked upload",
 * "Atomic commit"). Thread-safe: workers call it concurrently.
 *
 * mem: a file is its chunks' spans, held where the request frames were read (blk.h; no copy unless a chunk
 *      is too small to pin its read buffer); commit is a pointer swap under the store lock.
 * disk: uploads are staged in DIR/tmp/<id>.part and renamed into DIR/files/<name> on commit, through
 *      descriptors of tmp/ and files/ opened once (a symlink swapped in later redirects nothing). No
 *      descriptor is kept per committed file: each store_file_get opens the file by name under the
 *      store lock, with O_NOFOLLOW, and checks it is the indexed inode, so a reader sees one version
 *      (PROTOCOL.md "The disk store's directory").
 * Every chunk's CRC-32 is computed when it arrives; commit combines them (zlib crc32_combine). */
#ifndef XFERD_STORE_H
#define XFERD_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "blk.h"
#include "xerr.h"

#define STORE_MAX_CHUNKS (1u << 18) /* chunk slots one upload may have (size / chunk_size) */
#define STORE_PATH_MAX 4096

typedef enum { STORE_MEM, STORE_DISK } store_kind;

typedef struct {
    store_kind kind;
    char dir[STORE_PATH_MAX]; /* disk only */
    uint64_t max_file_size;
    uint32_t max_chunk;
    uint32_t max_uploads;
    uint32_t max_uploads_per_conn; /* 0: no limit (unit tests, fuzzer) */
    uint64_t max_staged_bytes;     /* declared sizes of all open uploads; 0: no limit */
    uint32_t min_chunk;            /* unless one chunk holds the file; 0: none */
    uint64_t upload_idle_timeout_ms;
    int sequential_ids; /* fuzzing/tests only: ids 1, 2, 3 ... instead of random ones */
} store_config;

typedef struct store store;
typedef struct store_file store_file;

/* Opens the store (disk: creates DIR/tmp and DIR/files, refusing either if it is a symlink, not a
 * directory or owned by another user; removes the regular files directly in DIR/tmp; indexes the
 * regular files of DIR/files).
 * Returns NULL with a message in err on failure. */
store *store_open(const store_config *cfg, char *err, size_t errlen);
/* Frees everything; no call may be in flight. */
void store_close(store *s);

/* A reference to the committed file of that name, or NULL: not found (err untouched; on disk also when
 * the name no longer holds the indexed regular file), or the server out of descriptors (err set).
 * Release with store_file_release: on disk it holds a descriptor. */
store_file *store_file_get(store *s, const char *name, size_t len, xerr *err);
void store_file_release(store_file *f);
uint64_t store_file_size(const store_file *f);
uint32_t store_file_crc(const store_file *f);
/* Copies bytes [offset, offset+len) (within the file) to dst; internal error on an I/O failure. */
xerr_code store_file_read(const store_file *f, uint64_t offset, uint8_t *dst, size_t len, xerr *err);
/* Bytes [offset, offset+len) (len > 0, within the file) of a mem store file as at most max spans, each holding
 * a reference to the block the bytes live in, so they can be sent without a copy. Returns how many, or -1
 * (nothing held) for a disk file or when more spans would be needed. */
int store_file_spans(const store_file *f, uint64_t offset, size_t len, blk_span *out, int max);

/* The name must already be valid and not gen:. Checks size and chunk_size against the limits. */
xerr_code store_upload_begin(store *s, const char *name, size_t len, uint64_t size, uint32_t chunk_size,
                             uint64_t *id, xerr *err);
/* The same for an upload owned by a connection (owner != 0): it counts against max_uploads_per_conn and
 * store_upload_abort_owner discards it. */
xerr_code store_upload_begin_owned(store *s, uint64_t owner, const char *name, size_t len, uint64_t size,
                                   uint32_t chunk_size, uint64_t *id, xerr *err);
/* Aborts every open upload owner began: its connection closed (PROTOCOL.md "Connections and uploads"). */
void store_upload_abort_owner(store *s, uint64_t owner);
/* Stores one chunk of len bytes at data, which lie in block owner (or owner is NULL). The mem store keeps
 * them where they are, by a reference to owner, when they fill at least half of it, and copies them
 * otherwise; the disk store writes them from there. *received: distinct bytes stored so far. */
xerr_code store_upload_chunk(store *s, uint64_t id, uint64_t offset, const uint8_t *data, size_t len, blk *owner,
                             uint64_t *received, xerr *err);
xerr_code store_upload_commit(store *s, uint64_t id, uint32_t crc, uint64_t *size, uint32_t *crc_out, xerr *err);
xerr_code store_upload_abort(store *s, uint64_t id, xerr *err);

/* Aborts uploads with no call for upload_idle_timeout_ms; returns how many. now_ms: monotime_ms(). */
size_t store_expire(store *s, uint64_t now_ms);
size_t store_open_uploads(store *s);
size_t store_file_count(store *s);

#endif
