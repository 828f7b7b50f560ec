/* xferd-c unit tests: every vector of proto/testdata, plus names, store, upload slots, handlers, pool.
 * Usage: xferd-c-unit <proto/testdata dir> */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "blk.h"
#include "bodydiff.h"
#include "config.h"
#include "frame.h"
#include "gen.h"
#include "gencache.h"
#include "gencrc.h"
#include "handlers.h"
#include "mem.h"
#include "monotime.h"
#include "names.h"
#include "pbwire.h"
#include "pool.h"
#include "reqbody.h"
#include "store.h"
#include "check.h"
#include "allocmetrics.h"
#include "tlsunit.h"
#include "edges.h"
#include "vectors.h"
#include "xfer/v1/file_transfer.pb-c.h"
#include "xfer/v1/frame.pb-c.h"

static int failures, checks;


static const char *vdir;

/* ---------- frames.vectors ---------- */

static int n_req, n_resp, n_parse;

/* "request seq method body frame": the encoder writes frame, which parses as one frame of those fields. */
static void request_vector(const vec_line *l) {
    n_req++;
    uint64_t seq = strtoull(l->field[1], NULL, 10);
    const char *method = l->field[2];
    size_t blen, flen;
    uint8_t *body = vec_hex(l->field[3], &blen), *want = vec_hex(l->field[4], &flen);
    size_t n = frame_request_size(method, seq, blen);
    uint8_t *got = malloc(n);
    size_t w = frame_encode_request(got, method, seq, body, blen);
    CHECK(w == flen && memcmp(got, want, flen) == 0, "line %d: request encoding differs", l->line);
    size_t total;
    xerr e;
    CHECK(frame_parse(want, flen, FRAME_DEFAULT_MAX, &total, &e) == FRAME_OK && total == flen,
          "line %d: request does not parse as one frame", l->line);
    frame_parts p;
    frame_split(want, flen, &p);
    Xfer__V1__RequestHeader *h = xfer__v1__request_header__unpack(NULL, p.header_len, p.header);
    CHECK(h && strcmp(h->method, method) == 0 && h->seq == seq, "line %d: header fields", l->line);
    CHECK(p.body_len == blen && memcmp(p.body, body, blen) == 0, "line %d: body", l->line);
    if (h) xfer__v1__request_header__free_unpacked(h, NULL);
    free(got); free(body); free(want);
}

/* "response seq method error body frame": both encoders (protobuf-c's prefix, the server's error frame)
 * write frame, whose header holds those fields. */
static void response_vector(const vec_line *l) {
    n_resp++;
    uint64_t seq = strtoull(l->field[1], NULL, 10);
    const char *method = l->field[2], *error = l->field[3];
    size_t blen, flen;
    uint8_t *body = vec_hex(l->field[4], &blen), *want = vec_hex(l->field[5], &flen);
    size_t pl = frame_response_prefix_size(method, seq, error);
    uint8_t *got = malloc(pl + blen + 1);
    size_t w = frame_encode_response_prefix(got, method, seq, error, blen);
    memcpy(got + w, body, blen);
    CHECK(w == pl && w + blen == flen && memcmp(got, want, flen) == 0, "line %d: response encoding differs",
          l->line);
    if (blen == 0 && error[0]) {
        size_t el;
        uint8_t *ef = encode_error_frame(method, seq, error, &el);
        CHECK(ef && el == flen && memcmp(ef, want, flen) == 0, "line %d: error frame differs", l->line);
        mem_free(ef);
    }
    frame_parts p;
    frame_split(want, flen, &p);
    Xfer__V1__ResponseHeader *h = xfer__v1__response_header__unpack(NULL, p.header_len, p.header);
    CHECK(h && strcmp(h->method, method) == 0 && h->seq == seq && strcmp(h->error, error) == 0,
          "line %d: response header fields", l->line);
    if (h) xfer__v1__response_header__free_unpacked(h, NULL);
    free(got); free(body); free(want);
}

/* "parse max outcome bytes": the parser's answer (need_more, frame:N, error:code and its message). */
static void parse_vector(const vec_line *l) {
    n_parse++;
    uint32_t max = (uint32_t)strtoul(l->field[1], NULL, 10);
    const char *outcome = l->field[2];
    size_t len;
    uint8_t *in = vec_hex(l->field[3], &len);
    size_t total;
    xerr e = {0};
    frame_status st = frame_parse(in, len, max, &total, &e);
    char got[64];
    if (st == FRAME_NEED_MORE) snprintf(got, sizeof got, "need_more");
    else if (st == FRAME_OK) snprintf(got, sizeof got, "frame:%zu", total);
    else snprintf(got, sizeof got, "error:%s", xerr_name(e.code));
    CHECK(strcmp(got, outcome) == 0, "line %d: parse gave %s, want %s", l->line, got, outcome);
    if (st == FRAME_ERROR) CHECK(strncmp(e.msg, outcome + 6, strlen(outcome + 6)) == 0, "msg %s", e.msg);
    free(in);
}

static void frame_vector(const vec_line *l, void *ctx) {
    (void)ctx;
    const char *kind = l->field[0];
    if (strcmp(kind, "request") == 0) request_vector(l);
    else if (strcmp(kind, "response") == 0) response_vector(l);
    else if (strcmp(kind, "parse") == 0) parse_vector(l);
    else CHECK(0, "line %d: unknown vector kind %s", l->line, kind);
}

/* ---------- bodies.vectors ---------- */

static const ProtobufCMessageDescriptor *descriptor_of(const char *type) {
    static const ProtobufCMessageDescriptor *all[] = {
        &xfer__v1__upload_begin_request__descriptor, &xfer__v1__upload_begin_response__descriptor,
        &xfer__v1__upload_chunk_request__descriptor, &xfer__v1__upload_chunk_response__descriptor,
        &xfer__v1__upload_commit_request__descriptor, &xfer__v1__upload_commit_response__descriptor,
        &xfer__v1__upload_abort_request__descriptor, &xfer__v1__upload_abort_response__descriptor,
        &xfer__v1__read_request__descriptor, &xfer__v1__read_response__descriptor,
        &xfer__v1__echo_request__descriptor, &xfer__v1__echo_response__descriptor,
        &xfer__v1__stat_request__descriptor, &xfer__v1__stat_response__descriptor,
        &xfer__v1__request_header__descriptor, &xfer__v1__response_header__descriptor,
    };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (strcmp(all[i]->short_name, type) == 0) return all[i];
    return NULL;
}

static int n_bodies;

/* Sets (or, with check != 0, compares) the field `name` of msg to the vector's text value. */
static int field_apply(ProtobufCMessage *msg, const char *name, const char *value, int check) {
    const ProtobufCFieldDescriptor *fd = protobuf_c_message_descriptor_get_field_by_name(msg->descriptor, name);
    if (!fd) return -1;
    char *at = (char *)msg + fd->offset;
    switch (fd->type) {
    case PROTOBUF_C_TYPE_UINT64: {
        uint64_t v = strtoull(value, NULL, 10);
        if (check) return *(uint64_t *)at == v ? 0 : -1;
        *(uint64_t *)at = v;
        return 0;
    }
    case PROTOBUF_C_TYPE_UINT32: {
        uint32_t v = (uint32_t)strtoul(value, NULL, 10);
        if (check) return *(uint32_t *)at == v ? 0 : -1;
        *(uint32_t *)at = v;
        return 0;
    }
    case PROTOBUF_C_TYPE_STRING:
        if (check) return strcmp(*(char **)at, value) == 0 ? 0 : -1;
        *(char **)at = (char *)value;
        return 0;
    case PROTOBUF_C_TYPE_BYTES: {
        ProtobufCBinaryData *bd = (ProtobufCBinaryData *)at;
        size_t n;
        uint8_t *b = vec_hex(value, &n);
        int rc = 0;
        if (check) rc = (bd->len == n && memcmp(bd->data, b, n) == 0) ? 0 : -1;
        else { bd->data = b; bd->len = n; return 0; } /* freed by the caller */
        free(b);
        return rc;
    }
    default:
        return -1;
    }
}

static void body_vector(const vec_line *l, void *ctx) {
    (void)ctx;
    n_bodies++;
    const ProtobufCMessageDescriptor *d = descriptor_of(l->field[0]);
    CHECK(d != NULL, "line %d: unknown type %s", l->line, l->field[0]);
    if (!d) return;
    ProtobufCMessage *msg = calloc(1, d->sizeof_message);
    protobuf_c_message_init(d, msg);
    char fields[4096];
    snprintf(fields, sizeof fields, "%s", l->field[1]);
    void *owned[8];
    int nowned = 0;
    for (char *save = NULL, *kv = strtok_r(fields, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        CHECK(eq != NULL, "line %d: field %s", l->line, kv);
        if (!eq) continue;
        *eq = '\0';
        CHECK(field_apply(msg, kv, eq + 1, 0) == 0, "line %d: cannot set %s", l->line, kv);
        const ProtobufCFieldDescriptor *fd = protobuf_c_message_descriptor_get_field_by_name(d, kv);
        if (fd && fd->type == PROTOBUF_C_TYPE_BYTES && nowned < 8)
            owned[nowned++] = ((ProtobufCBinaryData *)((char *)msg + fd->offset))->data;
    }
    size_t want_len;
    uint8_t *want = vec_hex(l->field[2], &want_len);
    size_t n = protobuf_c_message_get_packed_size(msg);
    uint8_t *got = malloc(n + 1);
    protobuf_c_message_pack(msg, got);
    CHECK(n == want_len && memcmp(got, want, n) == 0, "line %d: %s packs differently", l->line, l->field[0]);
    char why[256];
    CHECK(bodydiff_check(want, want_len, why, sizeof why) == 0, "line %d: in place vs protobuf-c: %s", l->line, why);
    ProtobufCMessage *back = protobuf_c_message_unpack(d, mem_pb_allocator(), want_len, want);
    CHECK(back != NULL, "line %d: %s does not unpack", l->line, l->field[0]);
    if (back) {
        snprintf(fields, sizeof fields, "%s", l->field[1]);
        for (char *save = NULL, *kv = strtok_r(fields, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
            char *eq = strchr(kv, '=');
            if (!eq) continue;
            *eq = '\0';
            CHECK(field_apply(back, kv, eq + 1, 1) == 0, "line %d: unpacked %s differs", l->line, kv);
        }
        protobuf_c_message_free_unpacked(back, mem_pb_allocator());
    }
    for (int i = 0; i < nowned; i++) free(owned[i]);
    free(got); free(want); free(msg);
}

/* ---------- gen.vectors ---------- */

static int n_gen;

static void gen_vector(const vec_line *l, void *ctx) {
    (void)ctx;
    n_gen++;
    uint64_t size = strtoull(l->field[0], NULL, 10), seed = strtoull(l->field[1], NULL, 10);
    uint32_t crc = (uint32_t)strtoul(l->field[2], NULL, 16);
    uint64_t off = strtoull(l->field[3], NULL, 10);
    size_t n;
    uint8_t *want = vec_hex(l->field[4], &n);
    uint8_t got[64];
    gen_fill(seed, off, got, n);
    CHECK(memcmp(got, want, n) == 0, "line %d: gen bytes at %llu", l->line, (unsigned long long)off);
    CHECK(gen_crc(size, seed) == crc, "line %d: gen crc %08x want %08x", l->line, gen_crc(size, seed), crc);
    char name[96];
    snprintf(name, sizeof name, "gen:%s:%s", l->field[0], l->field[1]);
    uint64_t ps, pseed;
    xerr e;
    CHECK(gen_parse_name(name, strlen(name), UINT64_MAX, &ps, &pseed, &e) == 0 && ps == size && pseed == seed,
          "line %d: parse %s", l->line, name);
    free(want);
}

/* ---------- size.vectors ---------- */

static int n_size;

static void size_vector(const vec_line *l, void *ctx) {
    (void)ctx;
    n_size++;
    CHECK(l->nfields == 2, "size.vectors line %d: want 2 fields", l->line);
    if (l->nfields != 2) return;
    uint64_t got = 0;
    int rc = config_parse_size(l->field[0], UINT64_MAX, &got);
    if (strcmp(l->field[1], "error") == 0) {
        CHECK(rc != 0, "size.vectors line %d: \"%s\" parsed as %llu, want an error", l->line, l->field[0],
              (unsigned long long)got);
        return;
    }
    uint64_t want = strtoull(l->field[1], NULL, 10);
    CHECK(rc == 0 && got == want, "size.vectors line %d: \"%s\" gave rc %d, %llu; want %llu", l->line, l->field[0], rc,
          (unsigned long long)got, (unsigned long long)want);
}

/* ---------- duration.vectors ---------- */

static int n_duration;

static int is_digit_c(char c) { return c >= '0' && c <= '9'; }

/* A duration.vectors expectation, an exact decimal number of seconds ("90", "0.0015"), in microseconds, read
 * without the parser under test; -1 if it is not one. */
static int64_t vector_micros(const char *s) {
    int64_t whole = 0, frac = 0;
    int digits = 0;
    const char *p = s;
    if (!is_digit_c(*p)) return -1;
    for (; is_digit_c(*p); p++) whole = whole * 10 + (*p - '0');
    if (*p == '.')
        for (p++; is_digit_c(*p) && digits < 6; p++, digits++) frac = frac * 10 + (*p - '0');
    if (*p) return -1;
    for (; digits < 6; digits++) frac *= 10;
    return whole * 1000000 + frac;
}

static void duration_vector(const vec_line *l, void *ctx) {
    (void)ctx;
    n_duration++;
    CHECK(l->nfields == 2, "duration.vectors line %d: want 2 fields", l->line);
    if (l->nfields != 2) return;
    uint64_t got = 0;
    int rc = config_parse_duration(l->field[0], &got);
    if (strcmp(l->field[1], "error") == 0) {
        CHECK(rc != 0, "duration.vectors line %d: \"%s\" parsed as %llu us, want an error", l->line, l->field[0],
              (unsigned long long)got);
        return;
    }
    int64_t want = vector_micros(l->field[1]);
    CHECK(want >= 0, "duration.vectors line %d: bad expectation %s", l->line, l->field[1]);
    CHECK(rc == 0 && got == (uint64_t)want, "duration.vectors line %d: \"%s\" gave rc %d, %llu us; want %lld us",
          l->line, l->field[0], rc, (unsigned long long)got, (long long)want);
}

static void test_gen_names(void) {
    const char *bad[] = {"gen:", "gen:1", "gen:01:2", "gen:1:02", "gen:-1:2", "gen:1:18446744073709551616",
                         "gen:a:1", "gen:1:2:3", "gen::1", "gen:1:"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint64_t s, d;
        xerr e;
        CHECK(gen_parse_name(bad[i], strlen(bad[i]), UINT64_MAX, &s, &d, &e) == -1 && e.code == XERR_INVALID_ARGUMENT,
              "%s should be malformed", bad[i]);
    }
    uint64_t s, d;
    xerr e;
    CHECK(gen_parse_name("gen:0:0", 7, 10, &s, &d, &e) == 0 && s == 0 && d == 0, "gen:0:0");
    CHECK(gen_parse_name("gen:11:0", 8, 10, &s, &d, &e) == -1, "size over the limit");
    CHECK(crc32(0, (const Bytef *)"123456789", 9) == 0xcbf43926u, "crc check value");
}

/* ---------- pbwire ---------- */

static void test_pbwire(void) {
    /* StatRequest{name: "a\0b"} then a varint field 2 and a repeated field 1 ("xy": last one wins). */
    const uint8_t nul_name[] = {0x0a, 0x03, 'a', 0x00, 'b'};
    const uint8_t repeated[] = {0x0a, 0x01, 'a', 0x10, 0x96, 0x01, 0x0a, 0x02, 'x', 'y'};
    const uint8_t truncated[] = {0x0a, 0x05, 'a'};
    const uint8_t fixed[] = {0x09, 1, 2, 3, 4, 5, 6, 7, 8, 0x15, 1, 2, 3, 4, 0x0a, 0x00};
    CHECK(pbwire_bytes_len(nul_name, sizeof nul_name, 1) == 3, "embedded NUL counts");
    CHECK(pbwire_bytes_len(repeated, sizeof repeated, 1) == 2, "last occurrence wins");
    CHECK(pbwire_bytes_len(repeated, sizeof repeated, 3) == 0, "absent field");
    CHECK(pbwire_bytes_len(truncated, sizeof truncated, 1) == (size_t)-1, "truncated");
    CHECK(pbwire_bytes_len(fixed, sizeof fixed, 1) == 0, "fixed-width fields skipped");
}

/* ---------- names ---------- */

static void test_names(void) {
    xerr e;
    const char *good[] = {"a", "a.bin", "...", ".a", "é", "gen:1:2", "a b"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        CHECK(name_valid(good[i], strlen(good[i]), &e), "%s should be valid: %s", good[i], e.msg);
    CHECK(!name_valid("a/b", 3, &e) && strcmp(e.msg, "invalid_argument: name \"a/b\" contains '/'") == 0, "%s", e.msg);
    CHECK(!name_valid("a\\b", 3, &e), "backslash");
    CHECK(!name_valid("a\0b", 3, &e), "NUL");
    CHECK(!name_valid(".", 1, &e) && !name_valid("..", 2, &e), "dots");
    CHECK(!name_valid("", 0, &e), "empty");
    CHECK(!name_valid("\xff", 1, &e), "bad utf-8");
    CHECK(!name_valid("\xc3", 1, &e), "truncated utf-8");
    char longname[300];
    memset(longname, 'x', sizeof longname);
    CHECK(name_valid(longname, 255, &e) && !name_valid(longname, 256, &e), "length limit");
    CHECK(name_is_gen("gen:1:2", 7) && !name_is_gen("gen", 3), "gen prefix");
}

/* ---------- store ---------- */

/* Stores src[off..off+n) as a chunk from a block of its own (as a large frame arrives): the mem store keeps a
 * reference to it, and our reference is dropped here. */
static xerr_code put_chunk(store *s, uint64_t id, const uint8_t *src, uint64_t off, size_t n, uint64_t *rcv, xerr *e) {
    blk *b = blk_new(n ? n : 1);
    memcpy(b->data, src + off, n);
    xerr_code c = store_upload_chunk(s, id, off, b->data, n, b, rcv, e);
    blk_unref(b);
    return c;
}

/* With every descriptor taken, a Read of a stored file is the server's load (resource_exhausted), not a
 * missing file (not_found). */
static void check_read_out_of_fds(store *s) {
    struct rlimit old;
    getrlimit(RLIMIT_NOFILE, &old);
    struct rlimit low = {64, old.rlim_max};
    setrlimit(RLIMIT_NOFILE, &low);
    int taken[64], n = 0;
    while (n < 64 && (taken[n] = dup(0)) >= 0) n++;
    xerr e = {0};
    store_file *f = store_file_get(s, "f", 1, &e);
    CHECK(f == NULL && e.code == XERR_RESOURCE_EXHAUSTED && strstr(e.msg, "out of file descriptors"),
          "out of descriptors: %s", e.msg);
    if (f) store_file_release(f);
    while (n > 0) close(taken[--n]);
    setrlimit(RLIMIT_NOFILE, &old);
}

/* Opens a store for a test. A disk store goes in a new directory made from the template dir (mkdtemp's
 * XXXXXX), which the caller removes; a mem store needs none (dir may be NULL). */
static store *open_test_store(store_config *cfg, char *dir) {
    if (cfg->kind == STORE_DISK) {
        CHECK(mkdtemp(dir) != NULL, "mkdtemp");
        snprintf(cfg->dir, sizeof cfg->dir, "%s/store", dir);
    }
    char err[256];
    store *s = store_open(cfg, err, sizeof err);
    CHECK(s != NULL, "store_open: %s", err);
    return s;
}

/* Uploads "f": 10000 bytes of data in 4096-byte chunks out of order, with every chunk error on the way; its
 * commit, then reads. Returns a reference to the committed file (NULL when the checks failed). */
static store_file *store_upload_f(store *s, const uint8_t *data) {
    uint32_t want_crc = (uint32_t)crc32(0, data, 10000);
    uint64_t id, rcv = 0;
    xerr e;
    CHECK(store_upload_begin(s, "f", 1, 10000, 4096, &id, &e) == XERR_OK && id != 0, "begin");
    /* out of order arrival is fine */
    CHECK(put_chunk(s, id, data, 8192, 10000 - 8192, &rcv, &e) == XERR_OK && rcv == 10000 - 8192, "last chunk first");
    CHECK(put_chunk(s, id, data, 100, 4096, &rcv, &e) == XERR_INVALID_ARGUMENT &&
              strstr(e.msg, "chunk offset 100 is not a multiple of chunk size 4096"), "misaligned: %s", e.msg);
    CHECK(put_chunk(s, id, data, 12288, 10, &rcv, &e) == XERR_OUT_OF_RANGE, "past size: %s", e.msg);
    CHECK(put_chunk(s, id, data, 8192, 4000, &rcv, &e) == XERR_OUT_OF_RANGE, "ends past: %s", e.msg);
    CHECK(put_chunk(s, id, data, 4096, 100, &rcv, &e) == XERR_INVALID_ARGUMENT, "short chunk: %s", e.msg);
    CHECK(put_chunk(s, id, data, 8192, 10000 - 8192, &rcv, &e) == XERR_FAILED_PRECONDITION &&
              strstr(e.msg, "chunk at offset 8192 already received"), "duplicate: %s", e.msg);
    CHECK(put_chunk(s, id, data, 0, 4096, &rcv, &e) == XERR_OK && rcv == 4096 + 10000 - 8192, "first");
    CHECK(store_file_get(s, "f", 1, &e) == NULL, "not visible before commit");
    CHECK(put_chunk(s, id, data, 4096, 4096, &rcv, &e) == XERR_OK && rcv == 10000, "middle");
    uint64_t size;
    uint32_t crc;
    CHECK(store_upload_commit(s, id, want_crc, &size, &crc, &e) == XERR_OK && size == 10000 && crc == want_crc,
          "commit: %s", e.msg);
    CHECK(store_upload_commit(s, id, want_crc, &size, &crc, &e) == XERR_NOT_FOUND, "commit twice");
    CHECK(put_chunk(s, id, data, 0, 4096, &rcv, &e) == XERR_NOT_FOUND && strstr(e.msg, "no open upload with id"),
          "chunk after commit");
    store_file *f = store_file_get(s, "f", 1, &e);
    CHECK(f && store_file_size(f) == 10000 && store_file_crc(f) == want_crc, "file");
    if (f) {
        uint8_t back[10000];
        CHECK(store_file_read(f, 0, back, 10000, &e) == XERR_OK && memcmp(back, data, 10000) == 0, "read all");
        CHECK(store_file_read(f, 4000, back, 5000, &e) == XERR_OK && memcmp(back, data + 4000, 5000) == 0, "read mid");
    }
    return f;
}

/* Replacement: the later commit wins whole; old, a reference to the earlier version, still reads it. */
static void store_replace_f(store *s, store_file *old, const uint8_t *data) {
    uint64_t id, rcv = 0, size;
    uint32_t crc;
    xerr e;
    CHECK(store_upload_begin(s, "f", 1, 3, 4096, &id, &e) == XERR_OK, "begin 2");
    CHECK(put_chunk(s, id, (const uint8_t *)"xyz", 0, 3, &rcv, &e) == XERR_OK, "chunk 2");
    CHECK(store_upload_commit(s, id, (uint32_t)crc32(0, (const Bytef *)"xyz", 3), &size, &crc, &e) == XERR_OK,
          "commit 2: %s", e.msg);
    if (old) {
        uint8_t back[16];
        CHECK(store_file_size(old) == 10000 && store_file_read(old, 0, back, 16, &e) == XERR_OK &&
                  memcmp(back, data, 16) == 0, "old reference keeps old content");
        store_file_release(old);
    }
    store_file *f = store_file_get(s, "f", 1, &e);
    CHECK(f && store_file_size(f) == 3, "new version visible");
    store_file_release(f);
}

/* An incomplete commit and a CRC-32 mismatch abort their uploads; an empty file commits. */
static void store_refused_commits(store *s, const uint8_t *data) {
    uint64_t id, rcv = 0, size;
    uint32_t crc;
    xerr e;
    CHECK(store_upload_begin(s, "g", 1, 5000, 4096, &id, &e) == XERR_OK, "begin g");
    CHECK(put_chunk(s, id, data, 0, 4096, &rcv, &e) == XERR_OK, "chunk g");
    CHECK(store_upload_commit(s, id, 0, &size, &crc, &e) == XERR_FAILED_PRECONDITION &&
              strstr(e.msg, "upload incomplete: received 4096 of 5000 bytes"), "incomplete: %s", e.msg);
    CHECK(put_chunk(s, id, data, 4096, 904, &rcv, &e) == XERR_NOT_FOUND, "aborted by failed commit");
    /* crc mismatch aborts and leaves nothing */
    CHECK(store_upload_begin(s, "h", 1, 9, 4096, &id, &e) == XERR_OK, "begin h");
    CHECK(put_chunk(s, id, (const uint8_t *)"123456789", 0, 9, &rcv, &e) == XERR_OK, "chunk h");
    CHECK(store_upload_commit(s, id, 0, &size, &crc, &e) == XERR_DATA_LOSS &&
              strcmp(e.msg, "data_loss: crc32 mismatch: client 0x00000000, server 0xcbf43926") == 0, "%s", e.msg);
    CHECK(store_file_get(s, "h", 1, &e) == NULL, "nothing visible after data_loss");
    CHECK(store_upload_commit(s, id, 0xcbf43926u, &size, &crc, &e) == XERR_NOT_FOUND, "commit after abort");
    /* empty file */
    CHECK(store_upload_begin(s, "empty", 5, 0, 1, &id, &e) == XERR_OK, "begin empty");
    CHECK(store_upload_commit(s, id, 0, &size, &crc, &e) == XERR_OK && size == 0, "commit empty: %s", e.msg);
}

/* The size and chunk limits, --max-uploads (3 in this store), abort and idle expiry (50 ms). */
static void store_limits_and_expiry(store *s, const uint8_t *data) {
    uint64_t id, rcv = 0;
    xerr e;
    CHECK(store_upload_begin(s, "x", 1, (1 << 20) + 1, 4096, &id, &e) == XERR_INVALID_ARGUMENT, "size limit");
    CHECK(store_upload_begin(s, "x", 1, 10, 0, &id, &e) == XERR_INVALID_ARGUMENT, "chunk size 0");
    CHECK(store_upload_begin(s, "x", 1, 10, 4097, &id, &e) == XERR_INVALID_ARGUMENT, "chunk size limit");
    uint64_t ids[3];
    for (int i = 0; i < 3; i++) CHECK(store_upload_begin(s, "x", 1, 10, 5, &ids[i], &e) == XERR_OK, "begin %d", i);
    CHECK(store_upload_begin(s, "x", 1, 10, 5, &id, &e) == XERR_RESOURCE_EXHAUSTED &&
              strstr(e.msg, "too many open uploads (limit 3)"), "max uploads: %s", e.msg);
    CHECK(store_upload_abort(s, ids[0], &e) == XERR_OK && store_upload_abort(s, ids[0], &e) == XERR_NOT_FOUND, "abort");
    CHECK(put_chunk(s, ids[1], data, 0, 5, &rcv, &e) == XERR_OK, "partial upload kept in the store");
    CHECK(store_open_uploads(s) == 2, "2 open");
    usleep(80 * 1000);
    CHECK(store_expire(s, monotime_ms()) == 2 && store_open_uploads(s) == 0, "idle expiry");
    CHECK(store_upload_abort(s, ids[1], &e) == XERR_NOT_FOUND, "expired upload is gone");
}

/* disk: reopened, committed files survive, the index is rebuilt and tmp/ is empty; then dir goes. */
static void store_reopen(const store_config *cfg, const char *dir) {
    char err[256];
    xerr e;
    store *s = store_open(cfg, err, sizeof err);
    CHECK(s != NULL, "reopen: %s", err);
    if (s) {
        store_file *f = store_file_get(s, "f", 1, &e);
        CHECK(f && store_file_size(f) == 3 && store_file_crc(f) == (uint32_t)crc32(0, (const Bytef *)"xyz", 3),
              "reindexed");
        store_file_release(f);
        check_read_out_of_fds(s);
        store_close(s);
    }
    char cmd[256];
    snprintf(cmd, sizeof cmd, "ls %s/store/tmp | wc -l | grep -qx 0 && rm -rf %s", dir, dir);
    CHECK(system(cmd) == 0, "tmp left empty");
}

static void test_store_kind(store_kind kind) {
    char dir[] = "/tmp/xferd-c-unit-XXXXXX";
    store_config cfg = {.kind = kind, .max_file_size = 1 << 20, .max_chunk = 4096, .max_uploads = 3,
                        .upload_idle_timeout_ms = 50};
    store *s = open_test_store(&cfg, dir);
    if (!s) return;
    uint8_t data[16384]; /* 10000 bytes of file, the rest for chunks that reach past it */
    for (size_t i = 0; i < sizeof data; i++) data[i] = (uint8_t)(i * 7 + 3);
    store_file *f = store_upload_f(s, data);
    store_replace_f(s, f, data);
    store_refused_commits(s, data);
    store_limits_and_expiry(s, data);
    store_close(s);
    if (kind == STORE_DISK) store_reopen(&cfg, dir);
}

/* Per-connection uploads, staged bytes, the minimum chunk: counted at begin, released at commit, abort,
 * expiry and the owner's close. */
static void test_store_limits(store_kind kind) {
    char dir[] = "/tmp/xferd-c-unit-XXXXXX";
    store_config cfg = {.kind = kind, .max_file_size = 1 << 20, .max_chunk = 4096, .max_uploads = 10,
                        .max_uploads_per_conn = 2, .max_staged_bytes = 10000, .min_chunk = 1024,
                        .upload_idle_timeout_ms = 50};
    store *s = open_test_store(&cfg, dir);
    if (!s) return;
    uint64_t id, big, rcv;
    xerr e;
    CHECK(store_upload_begin(s, "m", 1, 5000, 512, &id, &e) == XERR_INVALID_ARGUMENT && strstr(e.msg, "1024") &&
              strstr(e.msg, "--min-chunk"), "min chunk: %s", e.msg);
    uint64_t before = monotime_ms();
    usleep(2000);
    CHECK(store_upload_begin(s, "m", 1, 100, 100, &id, &e) == XERR_OK, "one small chunk holds the file: %s", e.msg);
    CHECK(store_expire(s, before) == 0, "an upload touched after the expiry clock was read is not expired");
    for (int i = 0; i < 2; i++)
        CHECK(store_upload_begin_owned(s, 7, "o", 1, 10, 10, &id, &e) == XERR_OK, "owned %d: %s", i, e.msg);
    CHECK(store_upload_begin_owned(s, 7, "o", 1, 10, 10, &id, &e) == XERR_RESOURCE_EXHAUSTED &&
              strstr(e.msg, "limit 2") && strstr(e.msg, "--max-uploads-per-conn"), "per conn: %s", e.msg);
    CHECK(store_upload_begin_owned(s, 8, "o", 1, 10, 10, &id, &e) == XERR_OK, "another owner: %s", e.msg);
    store_upload_abort_owner(s, 7);
    CHECK(store_open_uploads(s) == 2, "the owner's uploads aborted, the others kept");
    CHECK(store_upload_begin_owned(s, 7, "o", 1, 10, 10, &id, &e) == XERR_OK, "owner has room again: %s", e.msg);
    /* staged: 100 + 10 + 10 open */
    CHECK(store_upload_begin(s, "b", 1, 9000, 1024, &big, &e) == XERR_OK, "big: %s", e.msg);
    CHECK(store_upload_begin(s, "c", 1, 1000, 1024, &id, &e) == XERR_RESOURCE_EXHAUSTED &&
              strstr(e.msg, "10000") && strstr(e.msg, "--max-staged-bytes"), "staged: %s", e.msg);
    CHECK(store_upload_abort(s, big, &e) == XERR_OK, "abort big");
    CHECK(store_upload_begin(s, "c", 1, 1000, 1024, &id, &e) == XERR_OK, "released by abort: %s", e.msg);
    uint32_t crc;
    CHECK(store_upload_commit(s, id, 0, &rcv, &crc, &e) == XERR_FAILED_PRECONDITION, "failed commit");
    CHECK(store_upload_begin(s, "d", 1, 10000 - 120, 4096, &big, &e) == XERR_OK,
          "released by the failed commit: all but 120 bytes free: %s", e.msg);
    usleep(80 * 1000);
    CHECK(store_expire(s, monotime_ms()) == 4 && store_open_uploads(s) == 0, "idle expiry");
    CHECK(store_upload_begin_owned(s, 8, "o", 1, 10, 10, &id, &e) == XERR_OK &&
              store_upload_begin_owned(s, 8, "o", 1, 10, 10, &id, &e) == XERR_OK &&
              store_upload_begin(s, "e", 1, 9980, 4096, &id, &e) == XERR_OK,
          "expiry released the slots and the bytes: %s", e.msg);
    store_close(s);
    if (kind == STORE_DISK) {
        char cmd[64];
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        CHECK(system(cmd) == 0, "cleanup");
    }
}

/* The disk store refuses a symlinked tmp/ and never names a server path in a call's error. */
static void test_store_disk_trust(void) {
    char dir[] = "/tmp/xferd-c-unit-XXXXXX", path[256], target[256];
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    store_config cfg = {.kind = STORE_DISK, .max_file_size = 1 << 20, .max_chunk = 4096, .max_uploads = 4,
                        .upload_idle_timeout_ms = 60000};
    snprintf(cfg.dir, sizeof cfg.dir, "%s/store", dir);
    snprintf(target, sizeof target, "%s/target", dir);
    snprintf(path, sizeof path, "%s/store/tmp", dir);
    CHECK(mkdir(target, 0755) == 0 && mkdir(cfg.dir, 0755) == 0 && symlink(target, path) == 0, "setup");
    char err[512] = "";
    store *s = store_open(&cfg, err, sizeof err);
    CHECK(s == NULL && strstr(err, "symlink"), "symlinked tmp refused: %s", err);
    store_close(s);
    CHECK(unlink(path) == 0, "unlink");
    s = store_open(&cfg, err, sizeof err);
    CHECK(s != NULL, "store_open: %s", err);
    if (s) {
        uint64_t id, rcv;
        uint32_t crc;
        xerr e;
        CHECK(store_upload_begin(s, "gone", 4, 3, 3, &id, &e) == XERR_OK, "begin");
        CHECK(put_chunk(s, id, (const uint8_t *)"abc", 0, 3, &rcv, &e) == XERR_OK, "chunk");
        snprintf(path, sizeof path, "%s/store/tmp/%016llx.part", dir, (unsigned long long)id);
        CHECK(unlink(path) == 0, "staged file removed under the store");
        CHECK(store_upload_commit(s, id, (uint32_t)crc32(0, (const Bytef *)"abc", 3), &rcv, &crc, &e) ==
                      XERR_INTERNAL &&
                  strstr(e.msg, "\"gone\"") && !strchr(e.msg, '/'),
              "internal error names no path: %s", e.msg);
        store_close(s);
    }
    snprintf(path, sizeof path, "rm -rf %s", dir);
    CHECK(system(path) == 0, "cleanup");
}

/* ---------- handlers ---------- */

static handler_result call(const handler_ctx *hc, const char *method, uint64_t seq, const ProtobufCMessage *req) {
    uint8_t body[512];
    size_t bl = req ? protobuf_c_message_pack(req, body) : 0;
    handler_result r;
    reqhdr h = {method, strlen(method), seq};
    CHECK(handle_request(hc, method_lookup(method, h.method_len), &h, body, bl, NULL, &r) == 0 &&
              handler_result_flatten(&r) == 0,
          "handle %s", method);
    return r;
}

static Xfer__V1__ResponseHeader *resp_header(const handler_result *r, frame_parts *p) {
    size_t total;
    xerr e;
    CHECK(frame_parse(r->frame, r->len, FRAME_DEFAULT_MAX, &total, &e) == FRAME_OK && total == r->len, "frame");
    frame_split(r->frame, r->len, p);
    return xfer__v1__response_header__unpack(NULL, p->header_len, p->header);
}

/* Checks that the response in r carries exactly the error text want, then frees r's frame. */
static void check_error(handler_result *r, const char *want, const char *what) {
    frame_parts p;
    Xfer__V1__ResponseHeader *h = resp_header(r, &p);
    CHECK(h && strcmp(h->error, want) == 0, "%s: %s", what, h ? h->error : "?");
    xfer__v1__response_header__free_unpacked(h, NULL);
    mem_free(r->frame);
}

/* ---------- meta.vectors, through the whole handler ---------- */

static int n_meta;

static void meta_vector(const vec_line *l, void *ctx) {
    (void)ctx;
    if (l->nfields < 4) { CHECK(0, "meta.vectors line %d: %d fields", l->line, l->nfields); return; }
    handler_ctx hc = {.max_meta_entries = (uint32_t)strtoul(l->field[1], NULL, 10), .max_chunk = 1 << 20};
    size_t bl, wl;
    uint8_t *body = vec_hex(l->field[2], &bl);
    const char *want = l->field[3];
    int ok = strncmp(want, "ok:", 3) == 0;
    uint8_t *wbody = ok ? vec_hex(strcmp(want + 3, "-") == 0 ? "" : want + 3, &wl) : NULL;
    reqhdr h = {"Xfer.Meta", 9, 7};
    handler_result r;
    CHECK(body && handle_request(&hc, M_META, &h, body, bl, NULL, &r) == 0 && handler_result_flatten(&r) == 0,
          "meta %s handled", l->field[0]);
    frame_parts p;
    Xfer__V1__ResponseHeader *rh = resp_header(&r, &p);
    if (ok) {
        CHECK(rh && rh->error[0] == 0 && p.body_len == wl && memcmp(p.body, wbody, wl) == 0, "meta %s: %s",
              l->field[0], rh ? rh->error : "?");
    } else {
        const char *colon = strchr(want, ':');
        size_t cl = colon ? (size_t)(colon - want) : 0;
        CHECK(rh && colon && strncmp(rh->error, want, cl) == 0 && rh->error[cl] == ':' &&
                  strstr(rh->error, colon + 1) != NULL,
              "meta %s: got %s, want %s", l->field[0], rh ? rh->error : "?", want);
    }
    xfer__v1__response_header__free_unpacked(rh, NULL);
    mem_free(r.frame);
    free(body);
    free(wbody);
    n_meta++;
}

/* Echo, an unknown method, a malformed body. */
static void handlers_echo_and_errors(const handler_ctx *hc) {
    frame_parts p;
    Xfer__V1__EchoRequest echo = XFER__V1__ECHO_REQUEST__INIT;
    echo.payload.data = (uint8_t *)"ping";
    echo.payload.len = 4;
    handler_result r = call(hc, "Xfer.Echo", 9, &echo.base);
    Xfer__V1__ResponseHeader *h = resp_header(&r, &p);
    CHECK(h && h->seq == 9 && strcmp(h->method, "Xfer.Echo") == 0 && h->error[0] == 0 && r.code == XERR_OK, "echo hdr");
    CHECK(p.body_len == 6 && memcmp(p.body, "\x0a\x04ping", 6) == 0, "echo body");
    xfer__v1__response_header__free_unpacked(h, NULL);
    mem_free(r.frame);

    r = call(hc, "Xfer.Nope", 3, NULL);
    h = resp_header(&r, &p);
    CHECK(h && strcmp(h->error, "unimplemented: unknown method \"Xfer.Nope\"") == 0 && p.body_len == 0 &&
              r.code == XERR_UNIMPLEMENTED, "unknown method: %s", h ? h->error : "?");
    xfer__v1__response_header__free_unpacked(h, NULL);
    mem_free(r.frame);

    handler_result bad;
    reqhdr chunk_hdr = {"Xfer.UploadChunk", 16, 4};
    CHECK(handle_request(hc, M_UPLOAD_CHUNK, &chunk_hdr, (const uint8_t *)"\xff\xff\xff", 3, NULL, &bad) == 0 &&
              bad.code == XERR_INVALID_ARGUMENT, "malformed body");
    check_error(&bad, "invalid_argument: malformed UploadChunkRequest body", "malformed body");
}

/* Read of gen content, checked against gen_fill and gen_crc; the manual encoding equals protobuf-c's. Then
 * offsets at and past the end, and length 0. */
static void handlers_read_gen(const handler_ctx *hc) {
    frame_parts p;
    Xfer__V1__ReadRequest rd = XFER__V1__READ_REQUEST__INIT;
    rd.name = "gen:100:42";
    rd.offset = 64;
    rd.length = 100;
    handler_result r = call(hc, "Xfer.Read", 5, &rd.base);
    Xfer__V1__ResponseHeader *h = resp_header(&r, &p);
    Xfer__V1__ReadResponse *rr = xfer__v1__read_response__unpack(NULL, p.body_len, p.body);
    uint8_t want[36];
    gen_fill(42, 64, want, 36);
    CHECK(rr && rr->data.len == 36 && memcmp(rr->data.data, want, 36) == 0 && rr->size == 100 &&
              rr->crc32 == 0x1587afe2u, "read gen");
    if (rr) {
        uint8_t packed[128];
        size_t pn = xfer__v1__read_response__pack(rr, packed);
        CHECK(pn == p.body_len && memcmp(packed, p.body, pn) == 0, "manual ReadResponse is canonical");
        xfer__v1__read_response__free_unpacked(rr, NULL);
    }
    xfer__v1__response_header__free_unpacked(h, NULL);
    mem_free(r.frame);

    rd.offset = 101;
    r = call(hc, "Xfer.Read", 6, &rd.base);
    CHECK(r.code == XERR_OUT_OF_RANGE, "read past end");
    mem_free(r.frame);
    rd.offset = 100;
    r = call(hc, "Xfer.Read", 6, &rd.base);
    CHECK(r.code == XERR_OK, "read at end gives empty data");
    mem_free(r.frame);
    rd.length = 0;
    r = call(hc, "Xfer.Read", 6, &rd.base);
    CHECK(r.code == XERR_INVALID_ARGUMENT, "length 0");
    mem_free(r.frame);
}

static void test_handlers(void) {
    store_config cfg = {.kind = STORE_MEM, .max_file_size = 1 << 20, .max_chunk = 4096, .max_uploads = 8,
                        .upload_idle_timeout_ms = 60000};
    char err[128];
    store *s = store_open(&cfg, err, sizeof err);
    handler_ctx hc = {.st = s, .max_file_size = cfg.max_file_size, .max_chunk = cfg.max_chunk};
    handlers_echo_and_errors(&hc);
    handlers_read_gen(&hc);

    Xfer__V1__StatRequest st = XFER__V1__STAT_REQUEST__INIT;
    st.name = "missing.bin";
    handler_result r = call(&hc, "Xfer.Stat", 7, &st.base);
    check_error(&r, "not_found: file \"missing.bin\" not found", "stat missing");

    Xfer__V1__UploadBeginRequest ub = XFER__V1__UPLOAD_BEGIN_REQUEST__INIT;
    ub.name = "gen:1:2";
    ub.size = 1;
    ub.chunk_size = 1;
    r = call(&hc, "Xfer.UploadBegin", 8, &ub.base);
    check_error(&r, "invalid_argument: name \"gen:1:2\" is reserved for generated content", "reserved");
    store_close(s);
}

/* ---------- generated content across cache blocks ---------- */

/* The whole-file CRC-32 combined from block CRC-32s equals zlib's over the generated bytes, for sizes that end
 * inside, at and past block boundaries, of one seed (sharing its blocks) and another; cached spans hold the
 * generated bytes. */
static void test_gen_blocks(void) {
    gen_crc_cache_reset();
    size_t max = 3 * GEN_BLOCK + 4096;
    uint8_t *want = malloc(max);
    gen_fill(77, 0, want, max);
    const size_t sizes[] = {max, GEN_BLOCK, GEN_BLOCK - 1, 2 * GEN_BLOCK + 1, 5, 0};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        uint32_t z = (uint32_t)crc32(0, want, (uInt)sizes[i]);
        CHECK(gen_crc(sizes[i], 77) == z, "gen crc of %zu bytes", sizes[i]);
        CHECK(gen_crc(sizes[i], 78) == gencache_crc(sizes[i], 78), "another seed, %zu bytes", sizes[i]);
    }
    blk_span sp[RESULT_SPANS];
    int n = gencache_spans(77, GEN_BLOCK - 10, 30, sp, RESULT_SPANS);
    CHECK(n == 2 && sp[0].len == 10 && sp[1].len == 20 && memcmp(sp[0].p, want + GEN_BLOCK - 10, 10) == 0 &&
              memcmp(sp[1].p, want + GEN_BLOCK, 20) == 0,
          "spans across a block boundary");
    for (int k = 0; k < n; k++) blk_unref(sp[k].ref);
    CHECK(gencache_spans(77, 0, (RESULT_SPANS + 1) * (size_t)GEN_BLOCK, sp, RESULT_SPANS) == -1, "too many blocks");
    free(want);
    gen_crc_cache_reset();
}

/* The drain deadline cuts the CRC-32 pass over a new seed (PROTOCOL.md "Shutdown"): with the cancel flag set,
 * gen_crc_until and gencache_crc_until stop before the first block and leave *out alone, a cut pass caches
 * no wrong CRC-32, and a Read or Stat of that seed ends in `internal` at once; with the flag clear they give
 * gen_crc's answer. */
static void test_gen_cancel(void) {
    gen_crc_cache_reset();
    atomic_bool cancel = true;
    uint64_t big = 64 * (uint64_t)GEN_BLOCK + 5;
    uint32_t c = 0xdeadbeefu;
    CHECK(gencache_crc_until(big, 91, &cancel, &c) == -1 && c == 0xdeadbeefu, "gencache pass cut");
    CHECK(gen_crc_until(big, 91, &cancel, &c) == -1 && c == 0xdeadbeefu, "gen_crc pass cut");
    store_config cfg = {.kind = STORE_MEM, .max_file_size = 1ull << 40, .max_chunk = 4096, .max_uploads = 8,
                        .upload_idle_timeout_ms = 60000};
    char err[128];
    store *s = store_open(&cfg, err, sizeof err);
    handler_ctx hc = {.st = s, .max_file_size = cfg.max_file_size, .max_chunk = cfg.max_chunk, .cancel = &cancel};
    Xfer__V1__ReadRequest rd = XFER__V1__READ_REQUEST__INIT;
    rd.name = "gen:1099511627776:91"; /* 1 TiB: hours of work if the flag were not looked at */
    rd.length = 16;
    handler_result r = call(&hc, "Xfer.Read", 5, &rd.base);
    CHECK(r.code == XERR_INTERNAL, "read cut at the deadline: code %d", (int)r.code);
    mem_free(r.frame);
    Xfer__V1__StatRequest st = XFER__V1__STAT_REQUEST__INIT;
    st.name = rd.name;
    r = call(&hc, "Xfer.Stat", 6, &st.base);
    CHECK(r.code == XERR_INTERNAL, "stat cut at the deadline: code %d", (int)r.code);
    mem_free(r.frame);
    store_close(s);
    atomic_store(&cancel, false);
    uint64_t small = 3 * (uint64_t)GEN_BLOCK + 5;
    CHECK(gen_crc_until(small, 91, &cancel, &c) == 0 && c == gencache_crc(small, 91), "not cut: the same CRC-32");
    uint8_t *want = malloc(small);
    gen_fill(91, 0, want, small);
    CHECK(c == (uint32_t)crc32(0, want, (uInt)small), "not cut: zlib's CRC-32");
    free(want);
    gen_crc_cache_reset();
}

/* Threads missing on the same blocks at once leave one cache entry per block: a duplicate would take a slot,
 * and a scan as large as the cache would then miss on every block for as long as it runs. */
#define GEN_RACE_THREADS 3
#define GEN_RACE_BLOCKS 8

static void *gen_race_scan(void *arg) {
    (void)arg;
    blk_span sp[1];
    for (uint64_t k = 0; k < GEN_RACE_BLOCKS; k++)
        if (gencache_spans(91, k * GEN_BLOCK, 1, sp, 1) == 1) blk_unref(sp[0].ref);
    return NULL;
}

static void test_gen_racing_misses(void) {
    gencache_reset();
    pthread_t th[GEN_RACE_THREADS];
    int started = 0;
    for (int i = 0; i < GEN_RACE_THREADS; i++) started += pthread_create(&th[i], NULL, gen_race_scan, NULL) == 0;
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    CHECK(started == GEN_RACE_THREADS, "started %d scanning threads", started);
    CHECK(gencache_duplicates() == 0, "%d duplicate cache entries after racing misses", gencache_duplicates());
    gencache_reset();
}

/* ---------- in-place request bodies ---------- */

typedef struct {
    const char *what, *hex;
    int ok; /* whether the in-place decoder under test accepts the body */
} body_case;

static int echo_accepts(const uint8_t *b, size_t n) {
    rb_echo e;
    return rb_echo_decode(b, n, &e) == 0;
}

static int read_accepts(const uint8_t *b, size_t n) {
    rb_read r;
    return rb_read_decode(b, n, &r) == 0;
}

/* Each body must be accepted or refused as protobuf-c (after pbwire_check) does, with equal fields, and the
 * in-place decoder (named in failures as decoder) must accept exactly the cases marked ok. */
static void check_body_cases(const body_case *cases, size_t ncases, const char *decoder,
                             int (*accepts)(const uint8_t *, size_t)) {
    for (size_t i = 0; i < ncases; i++) {
        size_t n;
        uint8_t *b = vec_hex(cases[i].hex, &n);
        char why[256];
        CHECK(b && bodydiff_check(b, n, why, sizeof why) == 0, "%s: %s", cases[i].what, b ? why : "hex");
        CHECK(b && accepts(b, n) == cases[i].ok, "%s: %s %s", cases[i].what, decoder,
              cases[i].ok ? "accepts" : "refuses");
        free(b);
    }
}

/* Bodies at the edges of the wire format, for EchoRequest and for ReadRequest's 32-bit field and strings. */
static void test_reqbody(void) {
    static const body_case cases[] = { /* ok: whether EchoRequest accepts it */
        {"empty", "", 1},
        {"payload", "0a03616263", 1},
        {"last occurrence wins", "0a01610a026263", 1},
        {"unknown varint field", "109601", 1},
        {"unknown fixed64 field", "110102030405060708", 1},
        {"unknown fixed32 field", "1501020304", 1},
        {"unknown length-delimited field", "1a0278790a0161", 1},
        {"5-byte tag", "8a80808000" "0161", 1},
        {"6-byte tag", "8a8080808000" "0161", 0},
        {"5-byte length prefix", "0a8180808000" "61", 1},
        {"6-byte length prefix", "0a818080808000" "61", 0},
        {"field number 0", "0261", 0},
        {"field 0 by a long tag", "820000", 0},
        {"group", "0b0c", 0},
        {"wire type 6", "0e", 0},
        {"payload as a varint", "0801", 0},
        {"payload as fixed32", "0d01020304", 0},
        {"truncated length", "0a05616263", 0},
        {"truncated varint", "1080", 0},
        {"11-byte varint", "10ffffffffffffffffffff01", 0},
        {"10-byte varint past 64 bits", "10ffffffffffffffffff02", 0},
        {"10-byte varint at 64 bits", "10ffffffffffffffffff01", 1},
    };
    check_body_cases(cases, sizeof cases / sizeof cases[0], "echo", echo_accepts);
    /* 32-bit fields, strings: ReadRequest{name, offset, length} */
    static const body_case reads[] = {
        {"length at 2^32-1", "18ffffffff0f", 1},
        {"length at 2^32", "188080808010", 0},
        {"name not UTF-8", "0a01ff", 0},
        {"name with NUL (UTF-8; names.c refuses it)", "0a03610062", 1},
        {"earlier name not UTF-8", "0a01ff0a0161", 0},
    };
    check_body_cases(reads, sizeof reads / sizeof reads[0], "read", read_accepts);
    /* in place: the chunk's bytes are the body's own */
    static const uint8_t chunk[] = {0x08, 0x07, 0x10, 0x80, 0x20, 0x1a, 0x03, 'x', 'y', 'z'};
    rb_upload_chunk c;
    CHECK(rb_upload_chunk_decode(chunk, sizeof chunk, &c) == 0 && c.upload_id == 7 && c.offset == 4096 &&
              c.data.p == chunk + 7 && c.data.len == 3,
          "chunk data decoded in place");
}

/* Bulk bytes go from block to block by reference: a mem store file's chunks are the blocks they arrived in,
 * a large Echo answers from the request's block, a small one is copied. */
static void test_zero_copy(void) {
    store_config cfg = {.kind = STORE_MEM, .max_file_size = 1 << 20, .max_chunk = 65536, .max_uploads = 8,
                        .upload_idle_timeout_ms = 60000};
    store *s = open_test_store(&cfg, NULL);
    if (!s) return;
    uint64_t id, rcv, size;
    uint32_t crc;
    xerr e;
    blk *b = blk_new(8192);
    for (size_t i = 0; i < 8192; i++) b->data[i] = (uint8_t)(i * 31);
    CHECK(store_upload_begin(s, "zc", 2, 8000, 8000, &id, &e) == XERR_OK, "begin");
    CHECK(store_upload_chunk(s, id, 0, b->data + 100, 8000, b, &rcv, &e) == XERR_OK, "chunk");
    CHECK(atomic_load(&b->refs) == 2, "the store holds the block, no copy");
    CHECK(store_upload_commit(s, id, (uint32_t)crc32(0, b->data + 100, 8000), &size, &crc, &e) == XERR_OK, "commit");
    store_file *f = store_file_get(s, "zc", 2, &e);
    blk_span sp[RESULT_SPANS];
    int n = f ? store_file_spans(f, 50, 1000, sp, RESULT_SPANS) : -1;
    CHECK(n == 1 && sp[0].p == b->data + 150 && sp[0].len == 1000 && sp[0].ref == b, "Read spans the arrived block");
    for (int k = 0; k < n; k++) blk_unref(sp[k].ref);
    store_file_release(f);

    /* a small chunk in a large read buffer is copied, so it pins nothing */
    blk *big = blk_new(65536);
    memset(big->data, 'q', 100);
    CHECK(store_upload_begin(s, "small", 5, 100, 100, &id, &e) == XERR_OK &&
              store_upload_chunk(s, id, 0, big->data, 100, big, &rcv, &e) == XERR_OK && atomic_load(&big->refs) == 1,
          "small chunk copied");
    blk_unref(big);

    handler_ctx hc = {.st = s, .max_file_size = cfg.max_file_size, .max_chunk = cfg.max_chunk};
    blk *req = blk_new(4096);
    static const uint8_t lead[] = {0x0a, 0xe8, 0x1f}; /* EchoRequest{payload: 4072 bytes} */
    memcpy(req->data, lead, sizeof lead);
    memset(req->data + sizeof lead, 'e', 4072);
    reqhdr h = {"Xfer.Echo", 9, 3};
    handler_result r;
    CHECK(handle_request(&hc, M_ECHO, &h, req->data, 4075, req, &r) == 0 && r.nspan == 1 &&
              r.span[0].p == req->data + 3 && atomic_load(&req->refs) == 2,
          "large Echo answers from the request's block");
    size_t total = handler_result_size(&r);
    CHECK(handler_result_flatten(&r) == 0 && r.len == total && atomic_load(&req->refs) == 1 &&
              memcmp(r.frame + total - 4072, req->data + 3, 4072) == 0,
          "flattened answer holds the payload");
    mem_free(r.frame);
    static const uint8_t small[] = {0x0a, 0x02, 'h', 'i'};
    memcpy(req->data, small, sizeof small);
    CHECK(handle_request(&hc, M_ECHO, &h, req->data, sizeof small, req, &r) == 0 && r.nspan == 0 &&
              atomic_load(&req->refs) == 1,
          "small Echo copied");
    handler_result_release(&r);
    blk_unref(req);
    blk_unref(b);
    store_close(s);
}

/* ---------- pool ---------- */

#define XT_ITEMS 20000
#define XT_RING 16

typedef struct {
    void *ring[XT_RING];
    unsigned head, tail;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;
} xt_queue;

static void *producer(void *arg) {
    xt_queue *q = arg;
    for (int i = 0; i < XT_ITEMS; i++) {
        size_t n = (i % 3 == 0) ? 1 << 20 : (size_t)(64 + i % 300);
        unsigned char *b = mem_alloc(n);
        b[0] = (unsigned char)i;
        b[n - 1] = (unsigned char)i;
        pthread_mutex_lock(&q->mu);
        while (q->head - q->tail == XT_RING) pthread_cond_wait(&q->cv, &q->mu);
        q->ring[q->head++ % XT_RING] = b;
        pthread_cond_broadcast(&q->cv);
        pthread_mutex_unlock(&q->mu);
    }
    pthread_mutex_lock(&q->mu);
    q->done = 1;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
    mem_thread_flush();
    return NULL;
}

static void *consumer(void *arg) {
    xt_queue *q = arg;
    for (;;) {
        pthread_mutex_lock(&q->mu);
        while (q->head == q->tail && !q->done) pthread_cond_wait(&q->cv, &q->mu);
        if (q->head == q->tail && q->done) {
            pthread_mutex_unlock(&q->mu);
            break;
        }
        void *b = q->ring[q->tail++ % XT_RING];
        pthread_cond_broadcast(&q->cv);
        pthread_mutex_unlock(&q->mu);
        mem_free(b); /* freed on a foreign thread */
    }
    mem_thread_flush();
    return NULL;
}

static void test_pool(void) {
    gen_crc_cache_reset(); /* its blocks came from the other mode */
    mem_init(MEM_POOL);
    void *a = mem_alloc(100), *b = mem_alloc(100);
    CHECK(a && b && a != b && ((uintptr_t)a % 16) == 0, "alloc aligned");
    mem_free(a);
    void *c = mem_alloc(100); /* same class: reused */
    CHECK(c == a, "same-thread reuse");
    mem_free(b);
    mem_free(c);
    void *big = mem_alloc(POOL_MAX_BLOCK + 1);
    CHECK(big != NULL, "large falls back to malloc");
    mem_free(big);

    xt_queue q = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    pthread_t pt, ct;
    pthread_create(&pt, NULL, producer, &q);
    pthread_create(&ct, NULL, consumer, &q);
    pthread_join(pt, NULL);
    pthread_join(ct, NULL);
    pool_stats ps;
    pool_stats_get(&ps);
    CHECK(ps.allocated == 0, "every block handed back: allocated %lld", (long long)ps.allocated);
    CHECK(ps.remote_frees >= XT_ITEMS, "cross-thread frees counted: %llu", (unsigned long long)ps.remote_frees);
    CHECK(ps.news < ps.gets / 4, "the pool reused blocks across threads: news %llu gets %llu",
          (unsigned long long)ps.news, (unsigned long long)ps.gets);
    CHECK(ps.resident > 0 && ps.resident < (int64_t)64 << 20, "resident bounded: %lld", (long long)ps.resident);
    mem_shutdown();
    mem_init(MEM_SYSTEM);
}

int main(int argc, char **argv) {
    vdir = argc > 1 ? argv[1] : "../../proto/testdata";
    mem_init(MEM_SYSTEM);
    int nf = vec_each(vdir, "frames.vectors", frame_vector, NULL);
    int nb = vec_each(vdir, "bodies.vectors", body_vector, NULL);
    int ng = vec_each(vdir, "gen.vectors", gen_vector, NULL);
    int ns = vec_each(vdir, "size.vectors", size_vector, NULL);
    int nd = vec_each(vdir, "duration.vectors", duration_vector, NULL);
    CHECK(nf > 0 && nb > 0 && ng > 0 && ns > 0 && nd > 0, "vectors readable in %s", vdir);
    test_gen_names();
    test_pbwire();
    test_names();
    test_store_kind(STORE_MEM);
    test_store_kind(STORE_DISK);
    test_store_limits(STORE_MEM);
    test_store_limits(STORE_DISK);
    test_store_disk_trust();
    test_handlers();
    CHECK(vec_each(vdir, "meta.vectors", meta_vector, NULL) > 0, "meta.vectors readable");
    test_reqbody();
    test_zero_copy();
    test_gen_blocks();
    test_gen_cancel();
    test_gen_racing_misses();
    test_pool();
    failures += allocmetrics_run(&checks);
    failures += edges_run(vdir, &checks);
    /* the same store and handler paths again with the pool serving every buffer */
    gen_crc_cache_reset();
    mem_init(MEM_POOL);
    test_store_kind(STORE_MEM);
    test_handlers();
    vec_each(vdir, "meta.vectors", meta_vector, NULL); /* Meta's many small allocations from the pool */
    test_zero_copy();
    gen_crc_cache_reset();
    mem_shutdown();
    mem_init(MEM_SYSTEM);
    failures += tlsunit_run(&checks); /* last: it ends with OPENSSL_cleanup */
    mem_shutdown();
    printf("vectors: %d request, %d response, %d parse, %d bodies, %d gen, %d size, %d duration, %d meta\n", n_req,
           n_resp, n_parse, n_bodies, n_gen, n_size, n_duration, n_meta);
    printf("%d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
