/* meta: decode with protobuf-c, check against the wire, hash, sort, digest. */
#include "meta.h"

#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "htab.h"
#include "mem.h"
#include "pbwire.h"
#include "utf8.h"
#include "varint.h"

#define ENTRIES_FIELD 1
#define KEY_FIELD 1
#define VALUE_FIELD 2

/* Calls fn for each ENTRIES_FIELD occurrence of a body that passed pbwire_check (so it is well formed),
 * in order, with the entry's bytes; stops at the first nonzero return. */
static int each_entry(const uint8_t *body, size_t len, int (*fn)(void *ctx, size_t i, const uint8_t *p, size_t n),
                      void *ctx) {
    const uint8_t *p = body, *end = body + len;
    size_t i = 0;
    while (p < end) {
        uint64_t tag, n;
        if (varint_read(&p, end, &tag) != 0) return -1;
        unsigned wire = (unsigned)(tag & 7);
        if (tag >> 3 != ENTRIES_FIELD || wire != PB_WIRE_LEN) {
            if (pbwire_skip(&p, end, wire) != 0) return -1;
            continue;
        }
        if (varint_read(&p, end, &n) != 0 || n > (uint64_t)(end - p)) return -1;
        int rc = fn(ctx, i++, p, (size_t)n);
        if (rc) return rc;
        p += n;
    }
    return 0;
}

typedef struct {
    xerr *e;
    Xfer__V1__MetaEntry **entries;
} check_ctx;

/* Which string of an entry is not valid UTF-8 (the reason pbwire_check refused the body), for the message. */
static int find_bad_utf8(void *ctx, size_t i, const uint8_t *p, size_t n) {
    check_ctx *c = ctx;
    const uint8_t *q = p, *end = p + n;
    while (q < end) {
        uint64_t tag, l;
        if (varint_read(&q, end, &tag) != 0) return 1;
        if ((tag & 7) != PB_WIRE_LEN) {
            if (pbwire_skip(&q, end, (unsigned)(tag & 7)) != 0) return 1;
            continue;
        }
        if (varint_read(&q, end, &l) != 0 || l > (uint64_t)(end - q)) return 1;
        uint64_t f = tag >> 3;
        if ((f == KEY_FIELD || f == VALUE_FIELD) && !utf8_valid((const char *)q, (size_t)l)) {
            xerr_set(c->e, XERR_INVALID_ARGUMENT, "malformed MetaRequest body: entry %zu %s is not valid UTF-8", i,
                     f == KEY_FIELD ? "key" : "value");
            return 1;
        }
        q += l;
    }
    return 0;
}

/* The entry's bounds, from the wire lengths of its last key and value: protobuf-c's char* cannot show a NUL
 * inside (strlen stops there), the wire length can (pbwire.h). */
static int check_entry(void *ctx, size_t i, const uint8_t *p, size_t n) {
    check_ctx *c = ctx;
    size_t kl = pbwire_bytes_len(p, n, KEY_FIELD), vl = pbwire_bytes_len(p, n, VALUE_FIELD);
    const Xfer__V1__MetaEntry *en = c->entries[i];
    if (kl < 1 || kl > META_MAX_KEY)
        xerr_set(c->e, XERR_INVALID_ARGUMENT, "entry %zu key length %zu is outside 1..%d", i, kl, META_MAX_KEY);
    else if (vl > META_MAX_VALUE)
        xerr_set(c->e, XERR_INVALID_ARGUMENT, "entry %zu value length %zu exceeds limit %d", i, vl, META_MAX_VALUE);
    else if (strlen(en->key) != kl)
        xerr_set(c->e, XERR_INVALID_ARGUMENT, "entry %zu key contains NUL", i);
    else if (strlen(en->value) != vl)
        xerr_set(c->e, XERR_INVALID_ARGUMENT, "entry %zu value contains NUL", i);
    else
        return 0;
    return 1;
}

static int count_entry(void *ctx, size_t i, const uint8_t *p, size_t n) {
    (void)i, (void)p, (void)n;
    ++*(size_t *)ctx;
    return 0;
}

static int by_key(const void *a, const void *b) {
    /* keys hold no NUL (checked), so strcmp is the bytewise order PROTOCOL.md asks for */
    return strcmp((*(Xfer__V1__MetaEntry *const *)a)->key, (*(Xfer__V1__MetaEntry *const *)b)->key);
}

/* Puts every key in a hash table, the map a service would build; the first key met twice is refused. */
static int build_map(Xfer__V1__MetaEntry **entries, size_t n, xerr *e) {
    htab t;
    if (htab_init(&t) != 0) return -1;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0 && e->code == XERR_OK; i++) {
        void *old = NULL;
        const char *k = entries[i]->key;
        if (htab_put(&t, k, strlen(k), entries[i], &old) != 0) rc = -1;
        else if (old) {
            char q[XERR_QUOTE_MAX];
            xerr_quote(q, sizeof q, k, strlen(k));
            xerr_set(e, XERR_INVALID_ARGUMENT, "duplicate key %s", q);
        }
    }
    htab_free(&t);
    return rc;
}

uint32_t meta_digest(Xfer__V1__MetaEntry *const *entries, size_t n) {
    static const Bytef nul[1] = {0};
    uLong crc = crc32(0L, Z_NULL, 0);
    for (size_t i = 0; i < n; i++) {
        crc = crc32(crc, (const Bytef *)entries[i]->key, (uInt)strlen(entries[i]->key));
        crc = crc32(crc, nul, 1);
        crc = crc32(crc, (const Bytef *)entries[i]->value, (uInt)strlen(entries[i]->value));
        crc = crc32(crc, nul, 1);
    }
    return (uint32_t)crc;
}

int meta_prepare(const uint8_t *body, size_t len, uint32_t max_entries, meta_answer *out, xerr *e) {
    memset(out, 0, sizeof *out);
    check_ctx c = {.e = e};
    if (pbwire_check(body, len, &xfer__v1__meta_request__descriptor) != 0) {
        each_entry(body, len, find_bad_utf8, &c);
        if (e->code == XERR_OK) xerr_set(e, XERR_INVALID_ARGUMENT, "malformed MetaRequest body");
        return 0;
    }
    size_t count = 0;
    each_entry(body, len, count_entry, &count);
    if (count > max_entries) { /* refused before unpack allocates anything for it */
        xerr_set(e, XERR_INVALID_ARGUMENT, "%zu entries exceed limit %u (--max-meta-entries)", count, max_entries);
        return 0;
    }
    Xfer__V1__MetaRequest *req = xfer__v1__meta_request__unpack(mem_pb_allocator(), len, body);
    if (!req) { /* protobuf-c refuses more than pbwire_check (a known field of another wire type), or no memory */
        xerr_set(e, XERR_INVALID_ARGUMENT, "malformed MetaRequest body");
        return 0;
    }
    c.entries = req->entries;
    int rc = 0;
    if (req->n_entries != count) {
        xerr_set(e, XERR_INTERNAL, "MetaRequest decoded %zu entries of %zu", req->n_entries, count);
    } else if (each_entry(body, len, check_entry, &c) == 0 && (rc = build_map(req->entries, count, e)) == 0 &&
               e->code == XERR_OK) {
        out->sorted = mem_alloc((count ? count : 1) * sizeof *out->sorted);
        if (!out->sorted) rc = -1;
        else {
            if (count) memcpy(out->sorted, req->entries, count * sizeof *out->sorted);
            qsort(out->sorted, count, sizeof *out->sorted, by_key);
            out->req = req;
            out->n = count;
            out->digest = meta_digest(out->sorted, count);
            return 0;
        }
    }
    mem_free(out->sorted);
    out->sorted = NULL;
    xfer__v1__meta_request__free_unpacked(req, mem_pb_allocator());
    return rc;
}

void meta_release(meta_answer *a) {
    if (a->req) xfer__v1__meta_request__free_unpacked(a->req, mem_pb_allocator());
    mem_free(a->sorted);
    memset(a, 0, sizeof *a);
}
