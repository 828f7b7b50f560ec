/* edges: see edges.h. */
#include "edges.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"
#include "handlers.h"
#include "mem.h"
#include "pbwire.h"
#include "reqhdr.h"
#include "varint.h"
#include "check.h"
#include "vectors.h"
#include "xfer/v1/file_transfer.pb-c.h"
#include "xfer/v1/frame.pb-c.h"

static int failures, checks;


/* What a server makes of header bytes, in the words of headers.vectors. */
static void header_outcome(const uint8_t *b, size_t len, char *out, size_t cap) {
    reqhdr h;
    xerr e;
    const char *err = reqhdr_decode(b, len, &h);
    if (err) {
        snprintf(out, cap, "conn_error:%.*s", (int)strcspn(err, ":"), err);
        return;
    }
    if (reqhdr_check_method(&h, &e) != XERR_OK) {
        snprintf(out, cap, "call_error:%s", xerr_name(e.code));
        return;
    }
    int n = snprintf(out, cap, "ok:%llu:", (unsigned long long)h.seq);
    for (size_t i = 0; i < h.method_len && (size_t)n + 3 < cap; i++)
        n += snprintf(out + n, cap - (size_t)n, "%02x", (unsigned char)h.method[i]);
    if (h.method_len == 0) snprintf(out + n, cap - (size_t)n, "-");
}

static void header_vector(const vec_line *l, void *ctx) {
    (void)ctx;
    size_t len;
    uint8_t *b = vec_hex(l->field[0], &len);
    char got[4096];
    header_outcome(b, len, got, sizeof got);
    CHECK(strcmp(got, l->field[1]) == 0, "line %d: %s, want %s", l->line, got, l->field[1]);
    free(b);
}

static void quote_vector(const vec_line *l, void *ctx) {
    (void)ctx;
    size_t len;
    uint8_t *b = vec_hex(l->field[0], &len);
    char got[XERR_QUOTE_MAX];
    xerr_quote(got, sizeof got, (const char *)b, len);
    CHECK(strcmp(got, l->field[1]) == 0, "line %d: %s, want %s", l->line, got, l->field[1]);
    free(b);
}

/* A body of one varint field. */
static size_t varint_body(uint8_t *b, unsigned field, uint64_t v) {
    b[0] = (uint8_t)(field << 3);
    return (size_t)(varint_put(b + 1, v) - b);
}

static void test_body_check(void) {
    uint8_t b[16];
    size_t n = varint_body(b, 3, UINT32_MAX);
    CHECK(pbwire_check(b, n, &xfer__v1__read_request__descriptor) == 0, "length 2^32-1 fits");
    n = varint_body(b, 3, (uint64_t)1 << 32);
    CHECK(pbwire_check(b, n, &xfer__v1__read_request__descriptor) != 0, "length 2^32 overflows");
    n = varint_body(b, 2, UINT64_MAX);
    CHECK(pbwire_check(b, n, &xfer__v1__read_request__descriptor) == 0, "offset is 64-bit");
    n = varint_body(b, 2, (uint64_t)1 << 40);
    CHECK(pbwire_check(b, n, &xfer__v1__upload_commit_request__descriptor) != 0, "crc32 overflows");
    static const uint8_t bad_name[] = {0x0a, 0x02, 'a', 0xff}, nul_name[] = {0x0a, 0x02, 'a', 0x00};
    CHECK(pbwire_check(bad_name, sizeof bad_name, &xfer__v1__stat_request__descriptor) != 0, "non-UTF-8 name");
    CHECK(pbwire_check(nul_name, sizeof nul_name, &xfer__v1__stat_request__descriptor) == 0,
          "a NUL is UTF-8 (names.c refuses it)");
}

/* Handles one call and returns its decoded response header (NULL when it does not decode). */
static Xfer__V1__ResponseHeader *answer(const char *method, size_t mlen, const uint8_t *body, size_t bl,
                                        size_t *header_len) {
    handler_ctx hc = {.st = NULL, .max_file_size = 1 << 20, .max_chunk = 4096};
    reqhdr h = {method, mlen, 7};
    handler_result r;
    if (handle_request(&hc, method_lookup(method, mlen), &h, body, bl, NULL, &r) != 0) return NULL;
    frame_parts p;
    frame_split(r.frame, r.len, &p);
    *header_len = p.header_len;
    Xfer__V1__ResponseHeader *rh = xfer__v1__response_header__unpack(NULL, p.header_len, p.header);
    mem_free(r.frame);
    return rh;
}

static void test_handler_edges(void) {
    size_t hl;
    Xfer__V1__ResponseHeader *h = answer("Xfer.Echo\0", 10, NULL, 0, &hl);
    CHECK(h && strcmp(h->error, "invalid_argument: method \"Xfer.Echo\\x00\" contains NUL") == 0 && h->seq == 7,
          "NUL method: %s", h ? h->error : "?");
    if (h) xfer__v1__response_header__free_unpacked(h, NULL);

    char long_method[1000];
    memset(long_method, 0xff, sizeof long_method);
    h = answer(long_method, sizeof long_method, NULL, 0, &hl);
    CHECK(h && h->method[0] == '\0' && hl <= 400 && strncmp(h->error, "unimplemented: unknown method \"\\xff", 35) == 0,
          "long method: %zu-byte header, %s", hl, h ? h->error : "?");
    if (h) xfer__v1__response_header__free_unpacked(h, NULL);

    uint8_t body[16];
    size_t bl = varint_body(body, 3, ((uint64_t)1 << 32) + 5);
    h = answer("Xfer.Read", 9, body, bl, &hl);
    CHECK(h && strcmp(h->error, "invalid_argument: malformed ReadRequest body") == 0 && strcmp(h->method, "Xfer.Read") == 0,
          "length over 32 bits: %s", h ? h->error : "?");
    if (h) xfer__v1__response_header__free_unpacked(h, NULL);
}

int edges_run(const char *dir, int *total_checks) {
    int nh = vec_each(dir, "headers.vectors", header_vector, NULL);
    int nq = vec_each(dir, "quote.vectors", quote_vector, NULL);
    CHECK(nh > 0 && nq > 0, "headers.vectors and quote.vectors readable in %s", dir);
    test_body_check();
    test_handler_edges();
    printf("vectors: %d headers, %d quote\n", nh, nq);
    *total_checks += checks;
    return failures;
}
