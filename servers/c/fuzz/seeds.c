/* Writes a libFuzzer seed corpus from proto/testdata: every request frame and parse input of
 * frames.vectors, every request body of bodies.vectors wrapped in a frame of its method, and every header
 * of headers.vectors wrapped in a frame with an Echo body, and every body of meta.vectors in an Xfer.Meta frame.
 * Usage: xferd-c-seeds <testdata dir> <corpus dir> */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"
#include "../test/vectors.h"

static const char *outdir;
static int written;

static void write_seed(const char *kind, const uint8_t *b, size_t n) {
    char path[4096];
    snprintf(path, sizeof path, "%s/seed-%s-%03d", outdir, kind, written++);
    FILE *f = fopen(path, "wb");
    if (!f) {
        fprintf(stderr, "xferd-c-seeds: cannot write %s\n", path);
        exit(1);
    }
    if (n) fwrite(b, 1, n, f);
    fclose(f);
}

static void from_frames(const vec_line *l, void *ctx) {
    (void)ctx;
    const char *hex = NULL;
    if (strcmp(l->field[0], "request") == 0 && l->nfields >= 5) hex = l->field[4];
    else if (strcmp(l->field[0], "parse") == 0 && l->nfields >= 4) hex = l->field[3];
    if (!hex) return;
    size_t n;
    uint8_t *b = vec_hex(hex, &n);
    if (b) write_seed("frame", b, n);
    free(b);
}

static void from_bodies(const vec_line *l, void *ctx) {
    (void)ctx;
    const char *type = l->field[0];
    size_t tl = strlen(type);
    if (tl < 8 || strcmp(type + tl - 7, "Request") != 0 || l->nfields < 3) return;
    char method[96];
    snprintf(method, sizeof method, "Xfer.%.*s", (int)(tl - 7), type);
    size_t n;
    uint8_t *body = vec_hex(l->field[2], &n);
    if (!body) return;
    size_t fl = frame_request_size(method, 1, n);
    uint8_t *f = malloc(fl);
    if (f) {
        frame_encode_request(f, method, 1, body, n);
        write_seed("body", f, fl);
    }
    free(f);
    free(body);
}

static void from_meta(const vec_line *l, void *ctx) {
    (void)ctx;
    size_t n;
    uint8_t *body = l->nfields >= 3 ? vec_hex(l->field[2], &n) : NULL;
    if (!body) return;
    size_t fl = frame_request_size("Xfer.Meta", 1, n);
    uint8_t *f = malloc(fl);
    if (f) {
        frame_encode_request(f, "Xfer.Meta", 1, body, n);
        write_seed("meta", f, fl);
    }
    free(f);
    free(body);
}

static void from_headers(const vec_line *l, void *ctx) {
    (void)ctx;
    static const uint8_t echo_body[] = {0x0a, 0x02, 'h', 'i'};
    size_t n;
    uint8_t *h = vec_hex(l->field[0], &n);
    uint8_t *f = h ? malloc(FRAME_PREFIX_LEN + n + sizeof echo_body) : NULL;
    if (f) {
        frame_put_be32(f, (uint32_t)(FRAME_MIN_LEN + n + sizeof echo_body));
        frame_put_be32(f + 4, (uint32_t)n);
        memcpy(f + FRAME_PREFIX_LEN, h, n);
        memcpy(f + FRAME_PREFIX_LEN + n, echo_body, sizeof echo_body);
        write_seed("header", f, FRAME_PREFIX_LEN + n + sizeof echo_body);
    }
    free(f);
    free(h);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: xferd-c-seeds <testdata dir> <corpus dir>\n");
        return 2;
    }
    outdir = argv[2];
    if (vec_each(argv[1], "frames.vectors", from_frames, NULL) < 0 ||
        vec_each(argv[1], "bodies.vectors", from_bodies, NULL) < 0 ||
        vec_each(argv[1], "headers.vectors", from_headers, NULL) < 0 ||
        vec_each(argv[1], "meta.vectors", from_meta, NULL) < 0) {
        fprintf(stderr, "xferd-c-seeds: cannot read vectors in %s\n", argv[1]);
        return 1;
    }
    /* a whole upload conversation with sequential id 1: begin, chunk, commit, read back */
    static const char *const conv[][2] = {
        {"Xfer.UploadBegin", "0a05612e62696e10031803"},
        {"Xfer.UploadChunk", "08011a03616263"},
        {"Xfer.UploadCommit", "080110c28391a903"},
        {"Xfer.Read", "0a05612e62696e1803"},
    };
    uint8_t buf[1024];
    size_t pos = 0;
    for (size_t i = 0; i < sizeof conv / sizeof conv[0]; i++) {
        size_t n;
        uint8_t *body = vec_hex(conv[i][1], &n);
        if (!body) return 1;
        pos += frame_encode_request(buf + pos, conv[i][0], i + 1, body, n);
        free(body);
    }
    write_seed("conversation", buf, pos);
    printf("xferd-c-seeds: %d seeds in %s\n", written, outdir);
    return 0;
}
