/* libFuzzer target: the frame parser on a byte stream, then for every complete frame the in-place body
 * decoder against protobuf-c's unpack for every request type (test/bodydiff.c), the strict request header
 * decoder (reqhdr.c) and the full handler path (in-place body decode, store, response encode) against an in-memory store with small limits and sequential upload ids (so chunk/commit paths are
 * reachable). Every response must itself be one well-formed frame whose header fits PROTOCOL.md's bound
 * and whose method and error are valid UTF-8. Every body is also given to the Meta decoder (meta.c), whose
 * answer, when it accepts, must be within the entry limits, sorted by key and carry the digest of its entries. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../test/bodydiff.h"
#include "blk.h"
#include "frame.h"
#include "handlers.h"
#include "mem.h"
#include "meta.h"
#include "store.h"
#include "utf8.h"
#include "xfer/v1/frame.pb-c.h"

#define FUZZ_MAX_FRAME (1u << 20)
#define FUZZ_MAX_FRAMES 64        /* frames handled per input */
#define FUZZ_STORE_RESET 2000     /* inputs between fresh stores, so memory stays bounded */
#define RESPONSE_HEADER_BOUND 400 /* PROTOCOL.md "Quoting": the largest response header */
#define FUZZ_MAX_META_ENTRIES 64  /* small, so the over-limit refusal is reachable */

static store *st;
static handler_ctx hc;
static unsigned runs;

static void open_store(void) {
    store_config cfg = {.kind = STORE_MEM, .max_file_size = 1 << 20, .max_chunk = 65536, .max_uploads = 16,
                        .upload_idle_timeout_ms = 60000, .sequential_ids = 1};
    char err[256];
    st = store_open(&cfg, err, sizeof err);
    if (!st) abort();
    hc.st = st;
    hc.max_file_size = cfg.max_file_size;
    hc.max_chunk = cfg.max_chunk;
    hc.max_meta_entries = FUZZ_MAX_META_ENTRIES;
}

/* Aborts unless response frame f (r.len bytes, already parsed) has a header within the bound that decodes. */
static void check_response_header(const uint8_t *f, size_t len) {
    frame_parts p;
    frame_split(f, len, &p);
    if (p.header_len > RESPONSE_HEADER_BOUND) abort();
    Xfer__V1__ResponseHeader *rh = xfer__v1__response_header__unpack(NULL, p.header_len, p.header);
    if (!rh || !utf8_valid(rh->error, strlen(rh->error)) || !utf8_valid(rh->method, strlen(rh->method))) abort();
    xfer__v1__response_header__free_unpacked(rh, NULL);
}

/* Aborts unless an accepted Meta body gives entries within the bounds, strictly sorted (so no duplicate
 * survived) and the digest of exactly those entries. */
static void check_meta(const uint8_t *body, size_t len) {
    meta_answer a;
    xerr e;
    e.code = XERR_OK;
    if (meta_prepare(body, len, FUZZ_MAX_META_ENTRIES, &a, &e) != 0) abort();
    if (e.code != XERR_OK) {
        if (e.code != XERR_INVALID_ARGUMENT || !utf8_valid(e.msg, strlen(e.msg))) abort();
        return;
    }
    if (a.n > FUZZ_MAX_META_ENTRIES) abort();
    for (size_t i = 0; i < a.n; i++) {
        size_t kl = strlen(a.sorted[i]->key);
        if (kl < 1 || kl > META_MAX_KEY || strlen(a.sorted[i]->value) > META_MAX_VALUE) abort();
        if (i && strcmp(a.sorted[i - 1]->key, a.sorted[i]->key) >= 0) abort();
    }
    if (a.digest != meta_digest(a.sorted, a.n)) abort();
    meta_release(&a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!st) {
        mem_init(MEM_SYSTEM);
        open_store();
    }
    if (++runs % FUZZ_STORE_RESET == 0) {
        store_close(st);
        open_store();
    }
    size_t pos = 0;
    for (int n = 0; n < FUZZ_MAX_FRAMES && pos < size; n++) {
        size_t total;
        xerr e;
        frame_status fs = frame_parse(data + pos, size - pos, FUZZ_MAX_FRAME, &total, &e);
        if (fs == FRAME_ERROR) {
            if (e.code != XERR_RESOURCE_EXHAUSTED && e.code != XERR_INVALID_ARGUMENT) abort();
            break;
        }
        if (fs == FRAME_NEED_MORE) break;
        if (total < FRAME_PREFIX_LEN || total > size - pos) abort();
        blk *frame = blk_new(total); /* exact size: ASan sees any read past the frame */
        memcpy(frame->data, data + pos, total);
        pos += total;
        frame_parts p;
        frame_split(frame->data, total, &p);
        char why[256];
        if (bodydiff_check(p.body, p.body_len, why, sizeof why) != 0) {
            fprintf(stderr, "in-place decoder differs from protobuf-c: %s\n", why);
            abort();
        }
        check_meta(p.body, p.body_len);
        reqhdr h;
        const char *herr = reqhdr_decode(p.header, p.header_len, &h);
        if (herr) {
            if (strncmp(herr, "invalid_argument: ", 18) != 0) abort();
            blk_unref(frame);
            break; /* a connection error: the server would close here */
        }
        if (h.seq == 0 || !utf8_valid(h.method, h.method_len)) abort();
        handler_result r;
        /* the frame sits in a block of its own, as a large frame does in the server, so Echo answers and mem
         * store chunks reference it (and ASan sees any use after the last reference) */
        if (handle_request(&hc, method_lookup(h.method, h.method_len), &h, p.body, p.body_len, frame, &r) == 0) {
            if (handler_result_flatten(&r) != 0) abort();
            size_t rt;
            xerr re;
            if (frame_parse(r.frame, r.len, UINT32_MAX, &rt, &re) != FRAME_OK || rt != r.len) abort();
            check_response_header(r.frame, r.len);
            mem_free(r.frame);
        }
        blk_unref(frame);
    }
    return 0;
}
