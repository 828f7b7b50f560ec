/* store: files and uploads. */
#include "store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>
#include <libdeflate.h>
#include <zlib.h>

#include "blk.h"
#include "htab.h"
#include "mem.h"
#include "monotime.h"
#include "names.h"
#include "storedir.h"

#define STORE_IO_BLOCK (256 * 1024) /* bytes per read when indexing files on disk */

enum { SLOT_EMPTY = 0, SLOT_WRITING = 1, SLOT_DONE = 2 };

struct store_file {
    _Atomic long refs;
    uint64_t size;
    uint32_t crc;
    uint32_t chunk_size; /* mem */
    size_t nchunks;      /* mem */
    blk_span *chunks;    /* mem: nchunks spans, each holding its block */
    int fd;              /* disk: the descriptor of one store_file_get, else -1 */
    dev_t dev;           /* disk index entry: the inode this version is */
    ino_t ino;
};

typedef struct upload {
    uint64_t id;
    uint64_t owner; /* the connection that began it, 0 for none */
    long refs; /* under the store lock: the table's and each call's */
    bool open; /* under u->mu: false once committed, aborted or expired */
    pthread_mutex_t mu;
    char name[NAME_MAX_BYTES + 1];
    size_t name_len;
    uint64_t size;
    uint32_t chunk_size;
    size_t nchunks;
    uint8_t *state;
    uint32_t *crcs;
    blk_span *chunks; /* mem: a span per chunk received */
    int fd;           /* disk */
    int tmp_dir;      /* disk: the store's tmp/ descriptor */
    char tmp_name[32]; /* disk: the staging file in tmp/, "" once renamed */
    uint64_t received;
    uint64_t last_ms;
} upload;

struct store {
    store_config cfg;
    pthread_mutex_t mu;
    htab files;   /* name -> store_file* */
    htab uploads; /* 8-byte id -> upload* */
    htab owned;   /* 8-byte owner -> open uploads it began (as uintptr_t) */
    uint64_t staged; /* declared sizes of the open uploads */
    int tmp_fd, files_fd; /* disk: tmp/ and files/, opened once at start */
    uint64_t next_id; /* sequential_ids */
};

static void file_free(store_file *f) {
    if (f->chunks) {
        for (size_t i = 0; i < f->nchunks; i++) blk_unref(f->chunks[i].ref);
        mem_free(f->chunks);
    }
    if (f->fd >= 0) close(f->fd);
    mem_free(f);
}

void store_file_release(store_file *f) {
    if (f && atomic_fetch_sub_explicit(&f->refs, 1, memory_order_acq_rel) == 1) file_free(f);
}

uint64_t store_file_size(const store_file *f) { return f->size; }
uint32_t store_file_crc(const store_file *f) { return f->crc; }

xerr_code store_file_read(const store_file *f, uint64_t offset, uint8_t *dst, size_t len, xerr *err) {
    if (f->fd >= 0) {
        size_t done = 0;
        while (done < len) {
            ssize_t n = pread(f->fd, dst + done, len - done, (off_t)(offset + done));
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0)
                return xerr_set(err, XERR_INTERNAL, "reading stored file at offset %llu: %s",
                                (unsigned long long)(offset + done), n < 0 ? strerror(errno) : "unexpected end");
            done += (size_t)n;
        }
        return XERR_OK;
    }
    while (len) {
        size_t i = (size_t)(offset / f->chunk_size), in = (size_t)(offset % f->chunk_size);
        size_t clen = (size_t)((uint64_t)(i + 1) * f->chunk_size > f->size ? f->size - (uint64_t)i * f->chunk_size
                                                                             : f->chunk_size);
        size_t n = clen - in < len ? clen - in : len;
        memcpy(dst, f->chunks[i].p + in, n);
        dst += n;
        len -= n;
        offset += n;
    }
    return XERR_OK;
}

int store_file_spans(const store_file *f, uint64_t offset, size_t len, blk_span *out, int max) {
    if (!f->chunks || !len) return -1;
    int n = 0;
    while (len) {
        if (n == max) {
            for (int k = 0; k < n; k++) blk_unref(out[k].ref);
            return -1;
        }
        size_t i = (size_t)(offset / f->chunk_size), in = (size_t)(offset % f->chunk_size);
        const blk_span *c = &f->chunks[i];
        size_t k = c->len - in < len ? c->len - in : len;
        out[n++] = (blk_span){c->p + in, k, blk_ref(c->ref)};
        len -= k;
        offset += k;
    }
    return n;
}

/* Opens the committed file an index entry stands for: O_NOFOLLOW (a planted symlink is never followed),
 * O_NONBLOCK (a planted FIFO never blocks), and it must be the same regular inode of the same size, so
 * the caller reads that one version or gets NULL (not found). Called under the store lock, which commits
 * hold while renaming, so the name cannot change between the lookup and the open. */
static store_file *disk_file_open(store *s, const store_file *ix, const char *name, xerr *err) {
    int fd = openat(s->files_fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        /* Out of descriptors is the server's load, not a missing file: say so, as staging does. */
        if (errno == EMFILE || errno == ENFILE) xerr_set(err, XERR_RESOURCE_EXHAUSTED, "out of file descriptors");
        return NULL;
    }
    struct stat st;
    store_file *h = NULL;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_dev == ix->dev && st.st_ino == ix->ino &&
        (uint64_t)st.st_size == ix->size)
        h = mem_alloc(sizeof *h);
    if (h) memset(h, 0, sizeof *h);
    if (!h) {
        close(fd);
        return NULL;
    }
    atomic_init(&h->refs, 1);
    h->size = ix->size;
    h->crc = ix->crc;
    h->fd = fd;
    return h;
}

store_file *store_file_get(store *s, const char *name, size_t len, xerr *err) {
    char nm[NAME_MAX_BYTES + 1];
    if (len > NAME_MAX_BYTES) return NULL;
    memcpy(nm, name, len);
    nm[len] = '\0';
    pthread_mutex_lock(&s->mu);
    store_file *f = htab_get(&s->files, nm, len);
    if (f && s->cfg.kind == STORE_DISK) f = disk_file_open(s, f, nm, err);
    else if (f) atomic_fetch_add_explicit(&f->refs, 1, memory_order_relaxed);
    pthread_mutex_unlock(&s->mu);
    return f;
}

/* ---- uploads ---- */

static void upload_free(upload *u) {
    if (u->chunks) {
        for (size_t i = 0; i < u->nchunks; i++) blk_unref(u->chunks[i].ref);
        mem_free(u->chunks);
    }
    if (u->fd >= 0) {
        close(u->fd);
        if (u->tmp_name[0]) unlinkat(u->tmp_dir, u->tmp_name, 0);
    }
    mem_free(u->state);
    mem_free(u->crcs);
    pthread_mutex_destroy(&u->mu);
    mem_free(u);
}

/* Drops a reference taken under the store lock. */
static void upload_unref(store *s, upload *u) {
    pthread_mutex_lock(&s->mu);
    long r = --u->refs;
    pthread_mutex_unlock(&s->mu);
    if (r == 0) upload_free(u);
}

/* Finds an open upload and takes a reference, or sets not_found. */
static upload *upload_get(store *s, uint64_t id, xerr *err) {
    pthread_mutex_lock(&s->mu);
    upload *u = htab_get(&s->uploads, &id, sizeof id);
    if (u) {
        u->refs++;
        u->last_ms = monotime_ms();
    }
    pthread_mutex_unlock(&s->mu);
    if (!u) xerr_set(err, XERR_NOT_FOUND, "no open upload with id %llu", (unsigned long long)id);
    return u;
}

static uintptr_t owned_count(store *s, uint64_t owner) {
    return (uintptr_t)htab_get(&s->owned, &owner, sizeof owner);
}

/* Releases what u counted against the limits; store lock held, u just left the table. */
static void account_release(store *s, upload *u) {
    s->staged -= u->size;
    if (!u->owner) return;
    uintptr_t n = owned_count(s, u->owner);
    if (n <= 1) htab_del(&s->owned, &u->owner, sizeof u->owner);
    else htab_put(&s->owned, &u->owner, sizeof u->owner, (void *)(n - 1), NULL); /* replaces: cannot fail */
}

/* The server-wide, per-connection and staged-bytes limits for a new upload; store lock held. */
static xerr_code check_room(store *s, uint64_t owner, uint64_t size, xerr *err) {
    const store_config *c = &s->cfg;
    if (s->uploads.count >= c->max_uploads)
        return xerr_set(err, XERR_RESOURCE_EXHAUSTED, "too many open uploads (limit %u)", c->max_uploads);
    if (owner && c->max_uploads_per_conn && owned_count(s, owner) >= c->max_uploads_per_conn)
        return xerr_set(err, XERR_RESOURCE_EXHAUSTED,
                        "too many open uploads on this connection (limit %u, --max-uploads-per-conn)",
                        c->max_uploads_per_conn);
    uint64_t room = c->max_staged_bytes > s->staged ? c->max_staged_bytes - s->staged : 0;
    if (c->max_staged_bytes && size > room)
        return xerr_set(err, XERR_RESOURCE_EXHAUSTED, "staged bytes %llu + size %llu exceed limit %llu (--max-staged-bytes)",
                        (unsigned long long)s->staged, (unsigned long long)size,
                        (unsigned long long)c->max_staged_bytes);
    return XERR_OK;
}

/* Adds u to the table and counts it against the limits; store lock held. -1 when out of memory. */
static int upload_list(store *s, upload *u) {
    if (htab_put(&s->uploads, &u->id, sizeof u->id, u, NULL) != 0) return -1;
    if (u->owner) {
        uintptr_t n = owned_count(s, u->owner);
        if (htab_put(&s->owned, &u->owner, sizeof u->owner, (void *)(n + 1), NULL) != 0) {
            htab_del(&s->uploads, &u->id, sizeof u->id);
            return -1;
        }
    }
    s->staged += u->size;
    return 0;
}

/* Takes u out of the table (once) and drops the table's reference; store lock held. */
static void upload_unlist_locked(store *s, upload *u) {
    upload *t = htab_get(&s->uploads, &u->id, sizeof u->id);
    if (t == u) {
        htab_del(&s->uploads, &u->id, sizeof u->id);
        account_release(s, u);
        u->refs--; /* the table's; the caller still holds one, so this never reaches 0 */
    }
}

/* Closes u after a failed commit or an abort: removes it from the table. Call with u->mu held. */
static void upload_close_locked(store *s, upload *u) {
    u->open = false;
    pthread_mutex_lock(&s->mu);
    upload_unlist_locked(s, u);
    pthread_mutex_unlock(&s->mu);
}

/* ---- beginning an upload ---- */

/* A new upload's size and chunk size against the limits; its chunk count into *nchunks. */
static xerr_code check_begin(const store *s, uint64_t size, uint32_t chunk_size, uint64_t *nchunks, xerr *err) {
    if (size > s->cfg.max_file_size)
        return xerr_set(err, XERR_INVALID_ARGUMENT, "size %llu exceeds limit %llu", (unsigned long long)size,
                        (unsigned long long)s->cfg.max_file_size);
    if (chunk_size == 0 || chunk_size > s->cfg.max_chunk)
        return xerr_set(err, XERR_INVALID_ARGUMENT, "chunk size %u is not in 1 ... %u", chunk_size, s->cfg.max_chunk);
    /* tiny chunks cost bookkeeping per chunk out of all proportion to their bytes */
    if (chunk_size < s->cfg.min_chunk && chunk_size < size)
        return xerr_set(err, XERR_INVALID_ARGUMENT, "chunk size %u is below the minimum %u for size %llu (--min-chunk)",
                        chunk_size, s->cfg.min_chunk, (unsigned long long)size);
    *nchunks = size / chunk_size + (size % chunk_size ? 1 : 0);
    if (*nchunks > STORE_MAX_CHUNKS)
        return xerr_set(err, XERR_INVALID_ARGUMENT, "chunk size %u gives %llu chunks for size %llu, limit %u",
                        chunk_size, (unsigned long long)*nchunks, (unsigned long long)size, STORE_MAX_CHUNKS);
    return XERR_OK;
}

/* A new open upload with its chunk slots, not listed yet (one reference, the caller's). NULL with err when
 * out of memory. */
static upload *upload_new(const store *s, uint64_t owner, const char *name, size_t len, uint64_t size,
                          uint32_t chunk_size, uint64_t nchunks, xerr *err) {
    upload *u = mem_calloc(1, sizeof *u);
    if (!u) {
        xerr_set(err, XERR_INTERNAL, "out of memory opening an upload");
        return NULL;
    }
    pthread_mutex_init(&u->mu, NULL);
    u->fd = -1;
    u->owner = owner;
    u->open = true;
    u->refs = 1;
    memcpy(u->name, name, len);
    u->name_len = len;
    u->size = size;
    u->chunk_size = chunk_size;
    u->nchunks = (size_t)nchunks;
    u->state = mem_calloc(u->nchunks ? u->nchunks : 1, 1);
    u->crcs = mem_calloc(u->nchunks ? u->nchunks : 1, sizeof *u->crcs);
    if (s->cfg.kind == STORE_MEM) u->chunks = mem_calloc(u->nchunks ? u->nchunks : 1, sizeof *u->chunks);
    if (!u->state || !u->crcs || (s->cfg.kind == STORE_MEM && !u->chunks)) {
        upload_free(u);
        xerr_set(err, XERR_INTERNAL, "out of memory opening an upload of %llu chunks", (unsigned long long)nchunks);
        return NULL;
    }
    return u;
}

/* A non-zero id for u: the next one under sequential_ids (tests, the fuzzer), else a random one. */
static xerr_code upload_assign_id(store *s, upload *u, xerr *err) {
    if (s->cfg.sequential_ids) {
        pthread_mutex_lock(&s->mu);
        u->id = ++s->next_id;
        pthread_mutex_unlock(&s->mu);
    }
    while (u->id == 0)
        if (getrandom(&u->id, sizeof u->id, 0) != sizeof u->id)
            return xerr_set(err, XERR_INTERNAL, "getrandom failed: %s", strerror(errno));
    return XERR_OK;
}

/* disk: u's staging file, tmp/<id>.part, sized to the upload. Errors name no server path (PROTOCOL.md
 * "Errors"); out of descriptors is load, not a server fault. */
static xerr_code upload_stage(store *s, upload *u, xerr *err) {
    snprintf(u->tmp_name, sizeof u->tmp_name, "%016llx.part", (unsigned long long)u->id);
    u->tmp_dir = s->tmp_fd;
    u->fd = openat(s->tmp_fd, u->tmp_name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (u->fd < 0) {
        int no = errno;
        u->tmp_name[0] = '\0';
        return xerr_set(err, no == EMFILE || no == ENFILE ? XERR_RESOURCE_EXHAUSTED : XERR_INTERNAL,
                        "creating a staging file: %s", strerror(no));
    }
    if (u->size && ftruncate(u->fd, (off_t)u->size) != 0)
        return xerr_set(err, XERR_INTERNAL, "sizing a staging file: %s", strerror(errno));
    return XERR_OK;
}

/* Lists u, within the server-wide, per-connection and staged-bytes limits. */
static xerr_code upload_register(store *s, upload *u, xerr *err) {
    pthread_mutex_lock(&s->mu);
    xerr_code rc = check_room(s, u->owner, u->size, err);
    if (rc == XERR_OK && upload_list(s, u) != 0)
        rc = xerr_set(err, XERR_INTERNAL, "out of memory registering an upload");
    pthread_mutex_unlock(&s->mu);
    return rc;
}

xerr_code store_upload_begin(store *s, const char *name, size_t len, uint64_t size, uint32_t chunk_size,
                             uint64_t *id, xerr *err) {
    return store_upload_begin_owned(s, 0, name, len, size, chunk_size, id, err);
}

xerr_code store_upload_begin_owned(store *s, uint64_t owner, const char *name, size_t len, uint64_t size,
                                   uint32_t chunk_size, uint64_t *id, xerr *err) {
    uint64_t nchunks = 0;
    xerr_code rc = check_begin(s, size, chunk_size, &nchunks, err);
    if (rc != XERR_OK) return rc;
    upload *u = upload_new(s, owner, name, len, size, chunk_size, nchunks, err);
    if (!u) return XERR_INTERNAL;
    rc = upload_assign_id(s, u, err);
    if (rc == XERR_OK && s->cfg.kind == STORE_DISK) rc = upload_stage(s, u, err);
    if (rc == XERR_OK) {
        u->last_ms = monotime_ms();
        rc = upload_register(s, u, err);
    }
    if (rc != XERR_OK) {
        upload_free(u);
        return rc;
    }
    *id = u->id;
    return XERR_OK;
}

/* ---- chunks ---- */

/* A chunk's offset and length against u's layout; its slot into *slot. */
static xerr_code check_chunk(const upload *u, uint64_t offset, size_t len, size_t *slot, xerr *err) {
    if (offset % u->chunk_size != 0)
        return xerr_set(err, XERR_INVALID_ARGUMENT, "chunk offset %llu is not a multiple of chunk size %u",
                        (unsigned long long)offset, u->chunk_size);
    if (offset >= u->size || len > u->size - offset)
        return xerr_set(err, XERR_OUT_OF_RANGE, "chunk at offset %llu of length %zu ends past the declared size %llu",
                        (unsigned long long)offset, len, (unsigned long long)u->size);
    uint64_t want = u->size - offset < u->chunk_size ? u->size - offset : u->chunk_size;
    if (len != want)
        return xerr_set(err, XERR_INVALID_ARGUMENT, "chunk at offset %llu has length %zu, want %llu",
                        (unsigned long long)offset, len, (unsigned long long)want);
    *slot = (size_t)(offset / u->chunk_size);
    return XERR_OK;
}

/* mem: the chunk's bytes held where they arrived, by a reference to their block, or copied when too small to
 * pin it. */
static xerr_code chunk_hold(const uint8_t *data, size_t len, blk *owner, uint64_t offset, blk_span *keep,
                            xerr *err) {
    if (blk_worth_keeping(owner, len)) {
        *keep = (blk_span){data, len, blk_ref(owner)};
        return XERR_OK;
    }
    if ((keep->ref = blk_new(len)) == NULL)
        return xerr_set(err, XERR_INTERNAL, "out of memory storing chunk at offset %llu", (unsigned long long)offset);
    memcpy(keep->ref->data, data, len);
    keep->p = keep->ref->data;
    keep->len = len;
    return XERR_OK;
}

/* Whether slot i can take its chunk: the upload still open and the slot empty. u->mu held. */
static xerr_code check_slot_locked(const upload *u, uint64_t id, size_t i, uint64_t offset, xerr *err) {
    if (!u->open) return xerr_set(err, XERR_NOT_FOUND, "no open upload with id %llu", (unsigned long long)id);
    if (u->state[i] != SLOT_EMPTY)
        return xerr_set(err, XERR_FAILED_PRECONDITION, "chunk at offset %llu already received",
                        (unsigned long long)offset);
    return XERR_OK;
}

/* Slot i holds its chunk now (len bytes of CRC-32 crc). u->mu held. */
static void slot_done_locked(upload *u, size_t i, size_t len, uint32_t crc, uint64_t *received) {
    u->crcs[i] = crc;
    u->state[i] = SLOT_DONE;
    u->received += len;
    *received = u->received;
}

/* mem: keeps the span in slot i (*keep passes to the slot). */
static xerr_code chunk_put_mem(upload *u, uint64_t id, size_t i, uint64_t offset, blk_span *keep, uint32_t crc,
                               uint64_t *received, xerr *err) {
    pthread_mutex_lock(&u->mu);
    xerr_code rc = check_slot_locked(u, id, i, offset, err);
    if (rc == XERR_OK) {
        u->chunks[i] = *keep;
        keep->ref = NULL;
        slot_done_locked(u, i, keep->len, crc, received);
    }
    pthread_mutex_unlock(&u->mu);
    return rc;
}

/* Writes len bytes at offset; 0, or the errno of the failure (EIO when nothing could be written). */
static int pwrite_all(int fd, const uint8_t *data, size_t len, uint64_t offset) {
    size_t done = 0;
    while (done < len) {
        ssize_t n = pwrite(fd, data + done, len - done, (off_t)(offset + done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return n < 0 ? errno : EIO;
        done += (size_t)n;
    }
    return 0;
}

/* disk: writes the chunk into the staging file, its slot marked as being written meanwhile (outside the lock,
 * so chunks of one upload are written concurrently). */
static xerr_code chunk_put_disk(upload *u, uint64_t id, size_t i, uint64_t offset, const uint8_t *data, size_t len,
                                uint32_t crc, uint64_t *received, xerr *err) {
    pthread_mutex_lock(&u->mu);
    xerr_code rc = check_slot_locked(u, id, i, offset, err);
    if (rc == XERR_OK) u->state[i] = SLOT_WRITING;
    pthread_mutex_unlock(&u->mu);
    if (rc != XERR_OK) return rc;
    int werr = pwrite_all(u->fd, data, len, offset);
    pthread_mutex_lock(&u->mu);
    if (werr) {
        u->state[i] = SLOT_EMPTY;
        rc = xerr_set(err, XERR_INTERNAL, "writing chunk at offset %llu: %s", (unsigned long long)offset,
                      strerror(werr));
    } else {
        slot_done_locked(u, i, len, crc, received);
    }
    pthread_mutex_unlock(&u->mu);
    return rc;
}

xerr_code store_upload_chunk(store *s, uint64_t id, uint64_t offset, const uint8_t *data, size_t len, blk *owner,
                             uint64_t *received, xerr *err) {
    upload *u = upload_get(s, id, err);
    if (!u) return XERR_NOT_FOUND;
    blk_span keep = {0};
    size_t i = 0;
    uint32_t crc = 0;
    bool in_memory = s->cfg.kind == STORE_MEM;
    xerr_code rc = check_chunk(u, offset, len, &i, err);
    if (rc == XERR_OK) {
        crc = libdeflate_crc32(0, data, len); /* zlib's CRC-32, several times faster (profile: 23% of uploads) */
        if (in_memory) rc = chunk_hold(data, len, owner, offset, &keep, err);
    }
    if (rc == XERR_OK)
        rc = in_memory ? chunk_put_mem(u, id, i, offset, &keep, crc, received, err)
                       : chunk_put_disk(u, id, i, offset, data, len, crc, received, err);
    blk_unref(keep.ref); /* not kept: refused, or a duplicate */
    upload_unref(s, u);
    return rc;
}

/* ---- commit ---- */

/* The CRC-32 of u's whole content, combined from its chunks' in order. */
static uint32_t upload_crc(const upload *u) {
    uLong c = crc32(0L, Z_NULL, 0);
    for (size_t i = 0; i < u->nchunks; i++) {
        uint64_t clen = (uint64_t)(i + 1) * u->chunk_size > u->size ? u->size - (uint64_t)i * u->chunk_size
                                                                  : u->chunk_size;
        c = crc32_combine(c, u->crcs[i], (z_off_t)clen);
    }
    return (uint32_t)c;
}

/* Whether u can be committed under the client's crc: open, complete, and its CRC-32 (into *combined) equal
 * to crc. A commit refused for its content closes the upload. u->mu held. */
static xerr_code check_commit_locked(store *s, upload *u, uint64_t id, uint32_t crc, uint32_t *combined, xerr *err) {
    if (!u->open) return xerr_set(err, XERR_NOT_FOUND, "no open upload with id %llu", (unsigned long long)id);
    xerr_code rc = XERR_OK;
    if (u->received != u->size) {
        rc = xerr_set(err, XERR_FAILED_PRECONDITION, "upload incomplete: received %llu of %llu bytes",
                      (unsigned long long)u->received, (unsigned long long)u->size);
    } else if ((*combined = upload_crc(u)) != crc) {
        rc = xerr_set(err, XERR_DATA_LOSS, "crc32 mismatch: client 0x%08x, server 0x%08x", crc, *combined);
    }
    if (rc != XERR_OK) upload_close_locked(s, u);
    return rc;
}

/* The committed file u becomes (mem: its chunks move over). NULL when out of memory. u->mu held. */
static store_file *file_of_upload(const store *s, upload *u, uint32_t crc) {
    store_file *f = mem_calloc(1, sizeof *f);
    if (!f) return NULL;
    atomic_init(&f->refs, 1);
    f->size = u->size;
    f->crc = crc;
    f->fd = -1;
    if (s->cfg.kind == STORE_MEM) {
        f->chunk_size = u->chunk_size;
        f->nchunks = u->nchunks;
        f->chunks = u->chunks;
        u->chunks = NULL;
        u->nchunks = 0;
    }
    return f;
}

/* Publishes f under u's name and takes u out of the table: one step under the store lock, the disk rename
 * included, so store_file_get never finds the new inode under the old index entry; the later commit wins
 * whole. On failure f is freed. u->mu held. */
static xerr_code publish_locked(store *s, upload *u, store_file *f, xerr *err) {
    int rename_errno = 0;
    struct stat st;
    pthread_mutex_lock(&s->mu);
    if (s->cfg.kind == STORE_DISK) {
        if (fstat(u->fd, &st) != 0 || renameat(s->tmp_fd, u->tmp_name, s->files_fd, u->name) != 0) {
            rename_errno = errno;
        } else {
            u->tmp_name[0] = '\0'; /* nothing to unlink any more; upload_free closes the descriptor */
            f->dev = st.st_dev;
            f->ino = st.st_ino;
        }
    }
    void *old = NULL;
    int put = rename_errno ? 0 : htab_put(&s->files, u->name, u->name_len, f, &old);
    upload_unlist_locked(s, u);
    pthread_mutex_unlock(&s->mu);
    if (rename_errno) { /* the name, never a server path (PROTOCOL.md "Errors") */
        char q[NAME_MAX_BYTES * 4 + 8];
        xerr_quote(q, sizeof q, u->name, u->name_len);
        mem_free(f);
        return xerr_set(err, XERR_INTERNAL, "committing %s: %s", q, strerror(rename_errno));
    }
    if (put != 0) {
        file_free(f);
        return xerr_set(err, XERR_INTERNAL, "out of memory publishing %s", u->name);
    }
    store_file_release(old);
    return XERR_OK;
}

xerr_code store_upload_commit(store *s, uint64_t id, uint32_t crc, uint64_t *size, uint32_t *crc_out, xerr *err) {
    upload *u = upload_get(s, id, err);
    if (!u) return XERR_NOT_FOUND;
    uint32_t combined = 0;
    store_file *f = NULL;
    pthread_mutex_lock(&u->mu);
    xerr_code rc = check_commit_locked(s, u, id, crc, &combined, err);
    if (rc == XERR_OK && !(f = file_of_upload(s, u, combined))) {
        rc = xerr_set(err, XERR_INTERNAL, "out of memory committing upload %llu", (unsigned long long)id);
        upload_close_locked(s, u);
    }
    if (rc == XERR_OK) {
        u->open = false;
        rc = publish_locked(s, u, f, err);
    }
    pthread_mutex_unlock(&u->mu);
    if (rc == XERR_OK) {
        *size = u->size;
        *crc_out = combined;
    }
    upload_unref(s, u);
    return rc;
}

xerr_code store_upload_abort(store *s, uint64_t id, xerr *err) {
    upload *u = upload_get(s, id, err);
    if (!u) return XERR_NOT_FOUND;
    xerr_code rc = XERR_OK;
    pthread_mutex_lock(&u->mu);
    if (!u->open) rc = xerr_set(err, XERR_NOT_FOUND, "no open upload with id %llu", (unsigned long long)id);
    else upload_close_locked(s, u);
    pthread_mutex_unlock(&u->mu);
    upload_unref(s, u);
    return rc;
}

#define TAKE_BATCH 64

/* Picks uploads out of the table: idle ones (expiry), or, when owner is nonzero, every one that owner
 * began (its connection closed). */
typedef struct {
    store *s;
    uint64_t now, timeout;
    uint64_t owner;
    upload *taken[TAKE_BATCH];
    size_t n;
} take_ctx;

static int take_one(void *ctx, const char *key, size_t klen, void *value) {
    (void)key;
    (void)klen;
    take_ctx *e = ctx;
    upload *u = value;
    if (e->n >= TAKE_BATCH) return 0;
    /* in use, or not idle long enough; a call may have touched it after `now` was read (last_ms > now:
     * unsigned now - last_ms would wrap around and expire an upload in active use) */
    if (e->owner ? u->owner != e->owner
                 : (u->refs != 1 || u->last_ms > e->now || e->now - u->last_ms < e->timeout))
        return 0;
    account_release(e->s, u);
    e->taken[e->n++] = u;
    return 1; /* removed from the table; its reference passes to taken[] */
}

/* Closes every upload take_one picks, a batch per lock hold; returns how many. */
static size_t take_all(store *s, const take_ctx *want) {
    size_t total = 0;
    for (int round = 0; round < 1024; round++) { /* bounded */
        take_ctx e = *want;
        e.s = s;
        e.n = 0;
        pthread_mutex_lock(&s->mu);
        htab_sweep(&s->uploads, take_one, &e);
        pthread_mutex_unlock(&s->mu);
        for (size_t i = 0; i < e.n; i++) {
            upload *u = e.taken[i];
            pthread_mutex_lock(&u->mu);
            u->open = false;
            pthread_mutex_unlock(&u->mu);
            upload_unref(s, u);
        }
        total += e.n;
        if (e.n < TAKE_BATCH) break;
    }
    return total;
}

size_t store_expire(store *s, uint64_t now_ms) {
    take_ctx e = {.now = now_ms, .timeout = s->cfg.upload_idle_timeout_ms};
    return take_all(s, &e);
}

void store_upload_abort_owner(store *s, uint64_t owner) {
    if (!owner) return;
    pthread_mutex_lock(&s->mu);
    uintptr_t n = owned_count(s, owner);
    pthread_mutex_unlock(&s->mu);
    if (!n) return; /* the common case: a connection that left nothing open */
    take_ctx e = {.owner = owner};
    take_all(s, &e);
}

size_t store_open_uploads(store *s) {
    pthread_mutex_lock(&s->mu);
    size_t n = s->uploads.count;
    pthread_mutex_unlock(&s->mu);
    return n;
}

size_t store_file_count(store *s) {
    pthread_mutex_lock(&s->mu);
    size_t n = s->files.count;
    pthread_mutex_unlock(&s->mu);
    return n;
}

/* ---- open / close ---- */

static int index_disk(store *s, char *err, size_t errlen) {
    int fd = openat(s->files_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd < 0 ? NULL : fdopendir(fd);
    uint8_t *buf = malloc(STORE_IO_BLOCK);
    if (!d || !buf) {
        snprintf(err, errlen, "indexing %s/files: %s", s->cfg.dir, buf ? strerror(errno) : "out of memory");
        if (d) closedir(d);
        else if (fd >= 0) close(fd);
        free(buf);
        return -1;
    }
    int rc = 0;
    struct dirent *de;
    while (rc == 0 && (de = readdir(d)) != NULL) {
        xerr e;
        size_t nl = strlen(de->d_name);
        storedir_entry ent;
        if (!name_valid(de->d_name, nl, &e) || name_is_gen(de->d_name, nl)) continue;
        if (storedir_read_entry(s->files_fd, de->d_name, buf, STORE_IO_BLOCK, &ent) != 0) continue; /* not served */
        store_file *f = mem_calloc(1, sizeof *f);
        void *old = NULL;
        if (!f || htab_put(&s->files, de->d_name, nl, f, &old) != 0) {
            mem_free(f);
            snprintf(err, errlen, "out of memory indexing %s/files", s->cfg.dir);
            rc = -1;
            continue;
        }
        atomic_init(&f->refs, 1);
        f->size = ent.size;
        f->crc = ent.crc;
        f->fd = -1;
        f->dev = ent.dev;
        f->ino = ent.ino;
        store_file_release(old);
    }
    free(buf);
    closedir(d);
    return rc;
}

store *store_open(const store_config *cfg, char *err, size_t errlen) {
    store *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    s->cfg = *cfg;
    s->tmp_fd = s->files_fd = -1;
    pthread_mutex_init(&s->mu, NULL);
    if (htab_init(&s->files) != 0 || htab_init(&s->uploads) != 0 || htab_init(&s->owned) != 0) {
        snprintf(err, errlen, "out of memory");
        store_close(s);
        return NULL;
    }
    if (cfg->kind == STORE_DISK && (storedir_open(cfg->dir, &s->tmp_fd, &s->files_fd, err, errlen) ||
                                    storedir_clean_tmp(s->tmp_fd, cfg->dir, err, errlen) ||
                                    index_disk(s, err, errlen))) {
        store_close(s);
        return NULL;
    }
    return s;
}

static int drop_file(void *ctx, const char *key, size_t klen, void *value) {
    (void)ctx; (void)key; (void)klen;
    store_file_release(value);
    return 1;
}

static int drop_upload(void *ctx, const char *key, size_t klen, void *value) {
    (void)ctx; (void)key; (void)klen;
    upload *u = value;
    if (--u->refs == 0) upload_free(u);
    return 1;
}

void store_close(store *s) {
    if (!s) return;
    if (s->files.buckets) {
        htab_sweep(&s->files, drop_file, NULL);
        htab_free(&s->files);
    }
    if (s->uploads.buckets) {
        htab_sweep(&s->uploads, drop_upload, NULL);
        htab_free(&s->uploads);
    }
    if (s->owned.buckets) htab_free(&s->owned); /* values are counts, not pointers */
    if (s->tmp_fd >= 0) close(s->tmp_fd);
    if (s->files_fd >= 0) close(s->files_fd);
    pthread_mutex_destroy(&s->mu);
    free(s);
}
