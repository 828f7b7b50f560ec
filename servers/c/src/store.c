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
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "htab.h"
#include "mem.h"
#include "names.h"

#define STORE_IO_BLOCK (256 * 1024) /* bytes per read when indexing files on disk */

enum { SLOT_EMPTY = 0, SLOT_WRITING = 1, SLOT_DONE = 2 };

struct store_file {
    _Atomic long refs;
    uint64_t size;
    uint32_t crc;
    uint32_t chunk_size; /* mem */
    size_t nchunks;      /* mem */
    uint8_t **chunks;    /* mem: nchunks buffers from mem_alloc */
    int fd;              /* disk, else -1 */
};

typedef struct upload {
    uint64_t id;
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
    uint8_t **chunks; /* mem */
    int fd;           /* disk */
    char tmp_path[STORE_PATH_MAX + 64];
    uint64_t received;
    uint64_t last_ms;
} upload;

struct store {
    store_config cfg;
    pthread_mutex_t mu;
    htab files;   /* name -> store_file* */
    htab uploads; /* 8-byte id -> upload* */
    uint64_t next_id; /* sequential_ids */
};

uint64_t store_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void file_free(store_file *f) {
    if (f->chunks) {
        for (size_t i = 0; i < f->nchunks; i++) mem_free(f->chunks[i]);
        free(f->chunks);
    }
    if (f->fd >= 0) close(f->fd);
    free(f);
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
        memcpy(dst, f->chunks[i] + in, n);
        dst += n;
        len -= n;
        offset += n;
    }
    return XERR_OK;
}

store_file *store_file_get(store *s, const char *name, size_t len) {
    pthread_mutex_lock(&s->mu);
    store_file *f = htab_get(&s->files, name, len);
    if (f) atomic_fetch_add_explicit(&f->refs, 1, memory_order_relaxed);
    pthread_mutex_unlock(&s->mu);
    return f;
}

/* ---- uploads ---- */

static void upload_free(upload *u) {
    if (u->chunks) {
        for (size_t i = 0; i < u->nchunks; i++) mem_free(u->chunks[i]);
        free(u->chunks);
    }
    if (u->fd >= 0) {
        close(u->fd);
        if (u->tmp_path[0]) unlink(u->tmp_path);
    }
    free(u->state);
    free(u->crcs);
    pthread_mutex_destroy(&u->mu);
    free(u);
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
        u->last_ms = store_now_ms();
    }
    pthread_mutex_unlock(&s->mu);
    if (!u) xerr_set(err, XERR_NOT_FOUND, "no open upload with id %llu", (unsigned long long)id);
    return u;
}

/* Removes u from the table (once) and drops the table's reference. Call with u->mu held and u->open
 * just set false. */
static void upload_remove(store *s, upload *u) {
    pthread_mutex_lock(&s->mu);
    upload *t = htab_get(&s->uploads, &u->id, sizeof u->id);
    if (t == u) {
        htab_del(&s->uploads, &u->id, sizeof u->id);
        u->refs--; /* the table's; the caller still holds one, so this never reaches 0 */
    }
    pthread_mutex_unlock(&s->mu);
}

xerr_code store_upload_begin(store *s, const char *name, size_t len, uint64_t size, uint32_t chunk_size,
                             uint64_t *id, xerr *err) {
    if (size > s->cfg.max_file_size)
        return xerr_set(err, XERR_INVALID_ARGUMENT, "size %llu exceeds limit %llu", (unsigned long long)size,
                        (unsigned long long)s->cfg.max_file_size);
    if (chunk_size == 0 || chunk_size > s->cfg.max_chunk)
        return xerr_set(err, XERR_INVALID_ARGUMENT, "chunk size %u is not in 1 ... %u", chunk_size, s->cfg.max_chunk);
    uint64_t nchunks = size / chunk_size + (size % chunk_size ? 1 : 0);
    if (nchunks > STORE_MAX_CHUNKS)
        return xerr_set(err, XERR_INVALID_ARGUMENT, "chunk size %u gives %llu chunks for size %llu, limit %u",
                        chunk_size, (unsigned long long)nchunks, (unsigned long long)size, STORE_MAX_CHUNKS);
    upload *u = calloc(1, sizeof *u);
    if (!u) return xerr_set(err, XERR_INTERNAL, "out of memory opening an upload");
    pthread_mutex_init(&u->mu, NULL);
    u->fd = -1;
    u->open = true;
    u->refs = 1;
    memcpy(u->name, name, len);
    u->name_len = len;
    u->size = size;
    u->chunk_size = chunk_size;
    u->nchunks = (size_t)nchunks;
    u->state = calloc(u->nchunks ? u->nchunks : 1, 1);
    u->crcs = calloc(u->nchunks ? u->nchunks : 1, sizeof *u->crcs);
    if (s->cfg.kind == STORE_MEM) u->chunks = calloc(u->nchunks ? u->nchunks : 1, sizeof *u->chunks);
    if (!u->state || !u->crcs || (s->cfg.kind == STORE_MEM && !u->chunks)) {
        upload_free(u);
        return xerr_set(err, XERR_INTERNAL, "out of memory opening an upload of %llu chunks",
                        (unsigned long long)nchunks);
    }
    if (s->cfg.sequential_ids) {
        pthread_mutex_lock(&s->mu);
        u->id = ++s->next_id;
        pthread_mutex_unlock(&s->mu);
    }
    while (u->id == 0) {
        if (getrandom(&u->id, sizeof u->id, 0) != sizeof u->id) {
            upload_free(u);
            return xerr_set(err, XERR_INTERNAL, "getrandom failed: %s", strerror(errno));
        }
    }
    if (s->cfg.kind == STORE_DISK) {
        snprintf(u->tmp_path, sizeof u->tmp_path, "%s/tmp/%016llx.part", s->cfg.dir, (unsigned long long)u->id);
        u->fd = open(u->tmp_path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (u->fd < 0) {
            xerr_set(err, XERR_INTERNAL, "creating %s: %s", u->tmp_path, strerror(errno));
            u->tmp_path[0] = '\0';
            upload_free(u);
            return XERR_INTERNAL;
        }
        if (size && ftruncate(u->fd, (off_t)size) != 0) {
            xerr_set(err, XERR_INTERNAL, "sizing %s: %s", u->tmp_path, strerror(errno));
            upload_free(u);
            return XERR_INTERNAL;
        }
    }
    u->last_ms = store_now_ms();
    pthread_mutex_lock(&s->mu);
    if (s->uploads.count >= s->cfg.max_uploads) {
        pthread_mutex_unlock(&s->mu);
        upload_free(u);
        return xerr_set(err, XERR_RESOURCE_EXHAUSTED, "too many open uploads (limit %u)", s->cfg.max_uploads);
    }
    if (htab_put(&s->uploads, &u->id, sizeof u->id, u, NULL) != 0) {
        pthread_mutex_unlock(&s->mu);
        upload_free(u);
        return xerr_set(err, XERR_INTERNAL, "out of memory registering an upload");
    }
    pthread_mutex_unlock(&s->mu);
    *id = u->id;
    return XERR_OK;
}

xerr_code store_upload_chunk(store *s, uint64_t id, uint64_t offset, uint8_t **data, size_t len,
                             uint64_t *received, xerr *err) {
    upload *u = upload_get(s, id, err);
    if (!u) return XERR_NOT_FOUND;
    xerr_code rc = XERR_OK;
    if (offset % u->chunk_size != 0) {
        rc = xerr_set(err, XERR_INVALID_ARGUMENT, "chunk offset %llu is not a multiple of chunk size %u",
                      (unsigned long long)offset, u->chunk_size);
        goto out;
    }
    if (offset >= u->size || len > u->size - offset) {
        rc = xerr_set(err, XERR_OUT_OF_RANGE, "chunk at offset %llu of length %zu ends past the declared size %llu",
                      (unsigned long long)offset, len, (unsigned long long)u->size);
        goto out;
    }
    size_t i = (size_t)(offset / u->chunk_size);
    uint64_t want = u->size - offset < u->chunk_size ? u->size - offset : u->chunk_size;
    if (len != want) {
        rc = xerr_set(err, XERR_INVALID_ARGUMENT, "chunk at offset %llu has length %zu, want %llu",
                      (unsigned long long)offset, len, (unsigned long long)want);
        goto out;
    }
    uint32_t crc = (uint32_t)crc32(crc32(0L, Z_NULL, 0), *data, (uInt)len);

    pthread_mutex_lock(&u->mu);
    if (!u->open) {
        pthread_mutex_unlock(&u->mu);
        rc = xerr_set(err, XERR_NOT_FOUND, "no open upload with id %llu", (unsigned long long)id);
        goto out;
    }
    if (u->state[i] != SLOT_EMPTY) {
        pthread_mutex_unlock(&u->mu);
        rc = xerr_set(err, XERR_FAILED_PRECONDITION, "chunk at offset %llu already received",
                      (unsigned long long)offset);
        goto out;
    }
    if (u->chunks) { /* mem: keep the buffer */
        u->chunks[i] = *data;
        *data = NULL;
        u->crcs[i] = crc;
        u->state[i] = SLOT_DONE;
        u->received += len;
        *received = u->received;
        pthread_mutex_unlock(&u->mu);
        goto out;
    }
    u->state[i] = SLOT_WRITING;
    pthread_mutex_unlock(&u->mu);

    size_t done = 0;
    int werr = 0;
    while (done < len) {
        ssize_t n = pwrite(u->fd, *data + done, len - done, (off_t)(offset + done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) { werr = n < 0 ? errno : EIO; break; }
        done += (size_t)n;
    }
    pthread_mutex_lock(&u->mu);
    if (werr) {
        u->state[i] = SLOT_EMPTY;
        rc = xerr_set(err, XERR_INTERNAL, "writing chunk at offset %llu: %s", (unsigned long long)offset,
                      strerror(werr));
    } else {
        u->state[i] = SLOT_DONE;
        u->crcs[i] = crc;
        u->received += len;
        *received = u->received;
    }
    pthread_mutex_unlock(&u->mu);
out:
    upload_unref(s, u);
    return rc;
}

/* Closes u after a failed commit or an abort: removes it from the table. Call with u->mu held. */
static void upload_close_locked(store *s, upload *u) {
    u->open = false;
    upload_remove(s, u);
}

xerr_code store_upload_commit(store *s, uint64_t id, uint32_t crc, uint64_t *size, uint32_t *crc_out, xerr *err) {
    upload *u = upload_get(s, id, err);
    if (!u) return XERR_NOT_FOUND;
    xerr_code rc = XERR_OK;
    pthread_mutex_lock(&u->mu);
    if (!u->open) {
        pthread_mutex_unlock(&u->mu);
        rc = xerr_set(err, XERR_NOT_FOUND, "no open upload with id %llu", (unsigned long long)id);
        goto out;
    }
    if (u->received != u->size) {
        rc = xerr_set(err, XERR_FAILED_PRECONDITION, "upload incomplete: received %llu of %llu bytes",
                      (unsigned long long)u->received, (unsigned long long)u->size);
        upload_close_locked(s, u);
        pthread_mutex_unlock(&u->mu);
        goto out;
    }
    uLong c = crc32(0L, Z_NULL, 0);
    for (size_t i = 0; i < u->nchunks; i++) {
        uint64_t clen = (uint64_t)(i + 1) * u->chunk_size > u->size ? u->size - (uint64_t)i * u->chunk_size
                                                                  : u->chunk_size;
        c = crc32_combine(c, u->crcs[i], (z_off_t)clen);
    }
    if ((uint32_t)c != crc) {
        rc = xerr_set(err, XERR_DATA_LOSS, "crc32 mismatch: client 0x%08x, server 0x%08x", crc, (uint32_t)c);
        upload_close_locked(s, u);
        pthread_mutex_unlock(&u->mu);
        goto out;
    }
    store_file *f = calloc(1, sizeof *f);
    if (!f) {
        rc = xerr_set(err, XERR_INTERNAL, "out of memory committing upload %llu", (unsigned long long)id);
        upload_close_locked(s, u);
        pthread_mutex_unlock(&u->mu);
        goto out;
    }
    atomic_init(&f->refs, 1);
    f->size = u->size;
    f->crc = (uint32_t)c;
    f->fd = -1;
    char final_path[STORE_PATH_MAX + NAME_MAX_BYTES + 16];
    if (s->cfg.kind == STORE_DISK) {
        snprintf(final_path, sizeof final_path, "%s/files/%s", s->cfg.dir, u->name);
        if (rename(u->tmp_path, final_path) != 0) {
            rc = xerr_set(err, XERR_INTERNAL, "renaming %s to %s: %s", u->tmp_path, final_path, strerror(errno));
            free(f);
            upload_close_locked(s, u);
            pthread_mutex_unlock(&u->mu);
            goto out;
        }
        u->tmp_path[0] = '\0'; /* nothing to unlink any more */
        f->fd = u->fd;         /* the descriptor follows the renamed inode */
        u->fd = -1;
    } else {
        f->chunk_size = u->chunk_size;
        f->nchunks = u->nchunks;
        f->chunks = u->chunks;
        u->chunks = NULL;
        u->nchunks = 0;
    }
    u->open = false;
    /* publish: one step under the store lock; the later commit wins whole */
    pthread_mutex_lock(&s->mu);
    void *old = NULL;
    int put = htab_put(&s->files, u->name, u->name_len, f, &old);
    upload *t = htab_get(&s->uploads, &u->id, sizeof u->id);
    if (t == u) {
        htab_del(&s->uploads, &u->id, sizeof u->id);
        u->refs--;
    }
    pthread_mutex_unlock(&s->mu);
    pthread_mutex_unlock(&u->mu);
    if (put != 0) {
        file_free(f);
        rc = xerr_set(err, XERR_INTERNAL, "out of memory publishing %s", u->name);
        goto out;
    }
    store_file_release(old);
    *size = u->size;
    *crc_out = (uint32_t)c;
out:
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

typedef struct {
    uint64_t now, timeout;
    upload *expired[64];
    size_t n;
} expire_ctx;

static int expire_one(void *ctx, const char *key, size_t klen, void *value) {
    (void)key;
    (void)klen;
    expire_ctx *e = ctx;
    upload *u = value;
    if (e->n >= sizeof e->expired / sizeof e->expired[0]) return 0;
    if (u->refs != 1 || e->now - u->last_ms < e->timeout) return 0; /* in use, or not idle long enough */
    e->expired[e->n++] = u;
    return 1; /* removed from the table; its reference passes to expired[] */
}

size_t store_expire(store *s, uint64_t now_ms) {
    size_t total = 0;
    for (int round = 0; round < 1024; round++) { /* bounded: 64 per round */
        expire_ctx e = {.now = now_ms, .timeout = s->cfg.upload_idle_timeout_ms, .n = 0};
        pthread_mutex_lock(&s->mu);
        htab_sweep(&s->uploads, expire_one, &e);
        pthread_mutex_unlock(&s->mu);
        for (size_t i = 0; i < e.n; i++) {
            upload *u = e.expired[i];
            pthread_mutex_lock(&u->mu);
            u->open = false;
            pthread_mutex_unlock(&u->mu);
            upload_unref(s, u);
        }
        total += e.n;
        if (e.n < sizeof e.expired / sizeof e.expired[0]) break;
    }
    return total;
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

static int mkdir_p1(const char *path, char *err, size_t errlen) {
    if (mkdir(path, 0755) != 0 && errno != EEXIST) {
        snprintf(err, errlen, "creating %s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

static int index_disk(store *s, char *err, size_t errlen) {
    char path[STORE_PATH_MAX + NAME_MAX_BYTES + 8];
    snprintf(path, sizeof path, "%s/tmp", s->cfg.dir);
    DIR *d = opendir(path);
    if (!d) {
        snprintf(err, errlen, "opening %s: %s", path, strerror(errno));
        return -1;
    }
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "%s/tmp/%s", s->cfg.dir, de->d_name);
        unlink(path); /* leftovers of uploads that never committed */
    }
    closedir(d);
    snprintf(path, sizeof path, "%s/files", s->cfg.dir);
    d = opendir(path);
    if (!d) {
        snprintf(err, errlen, "opening %s: %s", path, strerror(errno));
        return -1;
    }
    uint8_t *buf = malloc(STORE_IO_BLOCK);
    int rc = buf ? 0 : -1;
    if (!buf) snprintf(err, errlen, "out of memory indexing %s", path);
    while (rc == 0 && (de = readdir(d)) != NULL) {
        xerr e;
        size_t nl = strlen(de->d_name);
        if (!name_valid(de->d_name, nl, &e) || name_is_gen(de->d_name, nl)) continue;
        snprintf(path, sizeof path, "%s/files/%s", s->cfg.dir, de->d_name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
            if (fd >= 0) close(fd);
            continue;
        }
        uLong c = crc32(0L, Z_NULL, 0);
        uint64_t total = 0;
        ssize_t n;
        while ((n = read(fd, buf, STORE_IO_BLOCK)) > 0) {
            c = crc32(c, buf, (uInt)n);
            total += (uint64_t)n;
        }
        store_file *f = calloc(1, sizeof *f);
        if (n < 0 || !f) {
            free(f);
            close(fd);
            continue;
        }
        atomic_init(&f->refs, 1);
        f->size = total;
        f->crc = (uint32_t)c;
        f->fd = fd;
        void *old = NULL;
        if (htab_put(&s->files, de->d_name, nl, f, &old) != 0) {
            file_free(f);
            snprintf(err, errlen, "out of memory indexing %s", path);
            rc = -1;
        }
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
    pthread_mutex_init(&s->mu, NULL);
    if (htab_init(&s->files) != 0 || htab_init(&s->uploads) != 0) {
        snprintf(err, errlen, "out of memory");
        store_close(s);
        return NULL;
    }
    if (cfg->kind == STORE_DISK) {
        char path[STORE_PATH_MAX + 64];
        snprintf(path, sizeof path, "%s/tmp", cfg->dir);
        if (mkdir_p1(cfg->dir, err, errlen) || mkdir_p1(path, err, errlen)) goto fail;
        snprintf(path, sizeof path, "%s/files", cfg->dir);
        if (mkdir_p1(path, err, errlen) || index_disk(s, err, errlen)) goto fail;
    }
    return s;
fail:
    store_close(s);
    return NULL;
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
    pthread_mutex_destroy(&s->mu);
    free(s);
}
