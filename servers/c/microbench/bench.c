/* xferd-c-bench: a closed-loop load driver for the frame protocol, bounded by --seconds.
 * Each of --conns threads keeps --depth calls in flight on its own connection and matches answers by seq
 * (servers answer in any order). Methods:
 *   echo    Echo calls of --size bytes;
 *   upload  files of --file-size bytes in --size chunks: UploadBegin, the chunks pipelined, UploadCommit
 *           (names bench-<conn>-<k mod 4>, so a later read run finds them);
 *   read    Read calls of --size bytes over --name (default gen:<file-size>:1), offsets cycling through it.
 * Prints one line: calls/s, MB/s of payload, p50/p99 latency (log-bucket histogram), calls and errors.
 * Requests are written with writev straight from one prepared content buffer, so the client copies nothing. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "frame.h"
#include "monotime.h"
#include "varint.h"
#include "xfer/v1/frame.pb-c.h"

#define BENCH_MAX_CONNS 64
#define BENCH_MAX_DEPTH 256
#define BENCH_NAMES 4       /* upload names per connection, reused in turn */
#define HIST_BUCKETS 64     /* bucket k: latency in [2^(k/2), 2^((k+1)/2)) microseconds, roughly */
#define PREFIX_ROOM 256     /* frame prefix + header + body fields before a chunk's data */
#define RESP_SLACK 4096     /* a response's header and small fields beyond its data */

typedef enum { B_ECHO, B_UPLOAD, B_READ } bench_method;

typedef struct {
    struct sockaddr_in sa;
    bench_method method;
    int id, depth, seconds;
    size_t size, file_size;
    const uint8_t *content; /* file_size bytes (echo: size bytes) */
    uint32_t content_crc;
    const char *name;
    unsigned long long calls, errors, bytes;
    unsigned long long hist[HIST_BUCKETS];
} worker;

typedef struct {
    int fd;
    uint64_t seq;
    uint8_t *resp;
    size_t resp_cap;
    double sent_at[BENCH_MAX_DEPTH];
    uint64_t slot_seq[BENCH_MAX_DEPTH]; /* seq of the call in flight in each slot, 0 when free */
} conn;

static double now_s(void) { return (double)monotime_ns() / 1e9; }

static int read_full(int fd, uint8_t *b, size_t n) {
    while (n) {
        ssize_t r = recv(fd, b, n, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        b += r;
        n -= (size_t)r;
    }
    return 0;
}

static int writev_full(int fd, struct iovec *iov, int n) {
    while (n > 0) {
        ssize_t w = writev(fd, iov, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        size_t left = (size_t)w;
        while (n > 0 && left >= iov->iov_len) {
            left -= iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            iov->iov_base = (uint8_t *)iov->iov_base + left;
            iov->iov_len -= left;
        }
    }
    return 0;
}

static int bucket_of(double us) {
    int k = 0;
    double lim = 1.41421356;
    while (k < HIST_BUCKETS - 1 && us >= lim) { lim *= 1.41421356; k++; }
    return k;
}

/* Sends one call: body = fixed (packed message without the bytes field) + optional bytes field 'tag' of
 * data[0..dlen). The frame's prefix and header are built here; data goes out by writev, uncopied. */
static int send_call(conn *c, const char *method, const uint8_t *fixed, size_t flen, uint8_t tag,
                     const uint8_t *data, size_t dlen, int with_bytes) {
    uint8_t pre[PREFIX_ROOM];
    Xfer__V1__RequestHeader h = XFER__V1__REQUEST_HEADER__INIT;
    h.method = (char *)method;
    h.seq = ++c->seq;
    size_t hl = xfer__v1__request_header__pack(&h, pre + FRAME_PREFIX_LEN);
    uint8_t *p = pre + FRAME_PREFIX_LEN + hl;
    memcpy(p, fixed, flen);
    p += flen;
    if (with_bytes) {
        *p++ = tag;
        p = varint_put(p, dlen);
    }
    size_t head = (size_t)(p - pre);
    frame_put_be32(pre, (uint32_t)(head - 4 + (with_bytes ? dlen : 0)));
    frame_put_be32(pre + 4, (uint32_t)hl);
    struct iovec iov[2] = {{pre, head}, {(void *)data, with_bytes ? dlen : 0}};
    return writev_full(c->fd, iov, with_bytes && dlen ? 2 : 1);
}

/* Reads one response; returns its seq (0 on a connection error) and whether it carried an error, and leaves
 * the body at *body. -1 when the connection broke. */
static int recv_reply(conn *c, uint64_t *seq, int *failed, const uint8_t **body, size_t *blen) {
    uint8_t pre[8];
    if (read_full(c->fd, pre, 8)) return -1;
    size_t rest = frame_be32(pre) - 4, hl = frame_be32(pre + 4);
    if (rest > c->resp_cap || hl > rest || read_full(c->fd, c->resp, rest)) return -1;
    Xfer__V1__ResponseHeader *h = xfer__v1__response_header__unpack(NULL, hl, c->resp);
    if (!h) return -1;
    *seq = h->seq;
    *failed = h->error[0] != 0;
    if (*failed) fprintf(stderr, "xferd-c-bench: %s\n", h->error);
    xfer__v1__response_header__free_unpacked(h, NULL);
    *body = c->resp + hl;
    *blen = rest - hl;
    return 0;
}

static size_t put_varint_field(uint8_t *p, uint8_t tag, uint64_t v) {
    if (!v) return 0;
    p[0] = tag;
    return (size_t)(varint_put(p + 1, v) - p);
}

/* A synchronous call (begin, commit); returns its body or NULL. */
static const uint8_t *call_sync(worker *w, conn *c, const char *method, const uint8_t *body, size_t bl, size_t *rl) {
    if (send_call(c, method, body, bl, 0, NULL, 0, 0)) return NULL;
    uint64_t seq;
    int failed;
    const uint8_t *rb;
    if (recv_reply(c, &seq, &failed, &rb, rl) || failed || seq != c->seq) {
        w->errors++;
        return NULL;
    }
    return rb;
}

/* Keeps depth calls in flight; next(k) sends the k-th call of the run, returns 1 when there are no more. */
typedef int (*next_fn)(worker *w, conn *c, uint64_t k);

static int run_pipelined(worker *w, conn *c, uint64_t ncalls, next_fn next, double end) {
    int inflight = 0;
    uint64_t sent = 0;
    while (sent < ncalls || inflight) {
        while (inflight < w->depth && sent < ncalls && now_s() < end) {
            if (next(w, c, sent)) return -1;
            int slot = 0; /* a free slot: answers come in any order */
            while (c->slot_seq[slot]) slot++;
            c->slot_seq[slot] = c->seq;
            c->sent_at[slot] = now_s();
            sent++;
            inflight++;
        }
        if (!inflight) break;
        uint64_t seq;
        int failed;
        const uint8_t *b;
        size_t bl;
        if (recv_reply(c, &seq, &failed, &b, &bl)) {
            fprintf(stderr, "xferd-c-bench: connection lost\n");
            return -1;
        }
        int slot = 0;
        while (slot < w->depth && (seq == 0 || c->slot_seq[slot] != seq)) slot++;
        if (slot == w->depth) {
            fprintf(stderr, "xferd-c-bench: answer with unexpected seq %llu\n", (unsigned long long)seq);
            return -1;
        }
        c->slot_seq[slot] = 0;
        w->hist[bucket_of((now_s() - c->sent_at[slot]) * 1e6)]++;
        w->calls++;
        if (failed) w->errors++;
        inflight--;
        if (now_s() >= end) ncalls = sent;
    }
    return 0;
}

static int next_echo(worker *w, conn *c, uint64_t k) {
    (void)k;
    w->bytes += w->size;
    return send_call(c, "Xfer.Echo", NULL, 0, 0x0a, w->content, w->size, 1);
}

static _Thread_local uint64_t upload_id;

static int next_chunk(worker *w, conn *c, uint64_t k) {
    uint8_t fixed[32];
    uint64_t off = k * w->size;
    size_t n = put_varint_field(fixed, 0x08, upload_id);
    n += put_varint_field(fixed + n, 0x10, off);
    size_t len = w->file_size - off < w->size ? w->file_size - off : w->size;
    w->bytes += len;
    return send_call(c, "Xfer.UploadChunk", fixed, n, 0x1a, w->content + off, len, 1);
}

static int next_read(worker *w, conn *c, uint64_t k) {
    uint8_t fixed[512];
    size_t nl = strlen(w->name), n = 0;
    uint64_t nreads = w->file_size / w->size ? w->file_size / w->size : 1;
    uint64_t off = (k % nreads) * w->size;
    fixed[n++] = 0x0a; /* names are at most 255 bytes (checked in main): fixed holds one */
    n = (size_t)(varint_put(fixed + n, nl) - fixed);
    memcpy(fixed + n, w->name, nl);
    n += nl;
    n += put_varint_field(fixed + n, 0x10, off);
    n += put_varint_field(fixed + n, 0x18, w->size);
    w->bytes += w->size;
    return send_call(c, "Xfer.Read", fixed, n, 0, NULL, 0, 0);
}

static int upload_one(worker *w, conn *c, unsigned k, double end) {
    char name[64];
    int nl = snprintf(name, sizeof name, "bench-%d-%u", w->id, k % BENCH_NAMES);
    uint8_t body[128];
    size_t n = 0;
    body[n++] = 0x0a;
    body[n++] = (uint8_t)nl;
    memcpy(body + n, name, (size_t)nl);
    n += (size_t)nl;
    n += put_varint_field(body + n, 0x10, w->file_size);
    n += put_varint_field(body + n, 0x18, w->size);
    size_t rl;
    const uint8_t *rb = call_sync(w, c, "Xfer.UploadBegin", body, n, &rl);
    if (!rb) return -1;
    Xfer__V1__UploadBeginResponse *r = xfer__v1__upload_begin_response__unpack(NULL, rl, rb);
    if (!r) return -1;
    upload_id = r->upload_id;
    xfer__v1__upload_begin_response__free_unpacked(r, NULL);
    uint64_t nchunks = (w->file_size + w->size - 1) / w->size;
    if (run_pipelined(w, c, nchunks, next_chunk, end + 3600)) return -1; /* a begun file is finished */
    n = put_varint_field(body, 0x08, upload_id);
    n += put_varint_field(body + n, 0x10, w->content_crc);
    return call_sync(w, c, "Xfer.UploadCommit", body, n, &rl) ? 0 : -1;
}

static void *run(void *arg) {
    worker *w = arg;
    conn c = {.fd = socket(AF_INET, SOCK_STREAM, 0)};
    int one = 1;
    setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (c.fd < 0 || connect(c.fd, (struct sockaddr *)&w->sa, sizeof w->sa) != 0) {
        perror("xferd-c-bench: connect");
        exit(1);
    }
    c.resp_cap = w->size + RESP_SLACK;
    c.resp = malloc(c.resp_cap);
    double end = now_s() + w->seconds;
    if (w->method == B_ECHO) {
        run_pipelined(w, &c, UINT64_MAX, next_echo, end);
    } else if (w->method == B_READ) {
        run_pipelined(w, &c, UINT64_MAX, next_read, end);
    } else {
        for (unsigned k = 0; now_s() < end; k++)
            if (upload_one(w, &c, k, end)) {
                w->errors++;
                break;
            }
    }
    close(c.fd);
    free(c.resp);
    return NULL;
}

static double pct(const unsigned long long *h, unsigned long long total, double q) {
    unsigned long long want = (unsigned long long)(q * (double)total), seen = 0;
    double lim = 1.41421356;
    for (int k = 0; k < HIST_BUCKETS; k++, lim *= 1.41421356) {
        seen += h[k];
        if (seen > want) return lim;
    }
    return lim;
}

static int usage(void) {
    fprintf(stderr, "usage: xferd-c-bench --addr H:P [--method echo|upload|read] --conns N --depth D --size BYTES "
                    "[--file-size BYTES] [--name NAME] --seconds S\n");
    return 2;
}

typedef struct {
    const char *addr, *name;
    int conns, depth, seconds;
    size_t size, file_size;
    bench_method method;
} bench_options;

/* The flags into o. 0, or the exit status after the message. */
static int parse_args(int argc, char **argv, bench_options *o) {
    *o = (bench_options){.addr = "127.0.0.1:7071", .conns = 2, .depth = 16, .seconds = 3, .size = 64,
                         .file_size = 64u << 20, .method = B_ECHO};
    for (int i = 1; i < argc; i += 2) {
        if (i + 1 >= argc) return usage();
        const char *v = argv[i + 1];
        if (!strcmp(argv[i], "--addr")) o->addr = v;
        else if (!strcmp(argv[i], "--conns")) o->conns = atoi(v);
        else if (!strcmp(argv[i], "--depth")) o->depth = atoi(v);
        else if (!strcmp(argv[i], "--seconds")) o->seconds = atoi(v);
        else if (!strcmp(argv[i], "--size")) o->size = (size_t)strtoull(v, NULL, 10);
        else if (!strcmp(argv[i], "--file-size")) o->file_size = (size_t)strtoull(v, NULL, 10);
        else if (!strcmp(argv[i], "--name")) o->name = v;
        else if (!strcmp(argv[i], "--method")) {
            if (!strcmp(v, "echo")) o->method = B_ECHO;
            else if (!strcmp(v, "upload")) o->method = B_UPLOAD;
            else if (!strcmp(v, "read")) o->method = B_READ;
            else {
                fprintf(stderr, "xferd-c-bench: --method %s: want echo, upload or read\n", v);
                return 2;
            }
        } else return usage();
    }
    return 0;
}

/* The options' ranges; --name defaults to gen:<file-size>:1 (written into gen_name). 0, or 2 after the
 * message. */
static int check_options(bench_options *o, const char *prog, char *gen_name, size_t cap) {
    if (o->conns < 1 || o->conns > BENCH_MAX_CONNS || o->depth < 1 || o->depth > BENCH_MAX_DEPTH || o->seconds < 1) {
        fprintf(stderr, "xferd-c-bench: conns 1..%d, depth 1..%d, seconds >= 1\n", BENCH_MAX_CONNS, BENCH_MAX_DEPTH);
        return 2;
    }
    if (o->method != B_ECHO && (o->size == 0 || o->file_size == 0)) {
        fprintf(stderr, "xferd-c-bench: --size and --file-size must be at least 1 for %s\n", prog);
        return 2;
    }
    if (!o->name) {
        snprintf(gen_name, cap, "gen:%zu:1", o->file_size);
        o->name = gen_name;
    }
    if (strlen(o->name) > 255) {
        fprintf(stderr, "xferd-c-bench: --name is longer than 255 bytes\n");
        return 2;
    }
    return 0;
}

/* --addr as a socket address. 0, or 2 after the message. */
static int resolve_addr(const char *addr, struct sockaddr_in *sa) {
    *sa = (struct sockaddr_in){.sin_family = AF_INET};
    char host[64];
    const char *colon = strrchr(addr, ':');
    snprintf(host, sizeof host, "%.*s", colon ? (int)(colon - addr) : 0, addr);
    if (!colon || inet_pton(AF_INET, host, &sa->sin_addr) != 1) {
        fprintf(stderr, "xferd-c-bench: bad --addr %s\n", addr);
        return 2;
    }
    sa->sin_port = htons((uint16_t)atoi(colon + 1));
    return 0;
}

/* Runs the connections' threads to the end and prints the line. The exit status: 1 when a call failed. */
static int run_and_report(const bench_options *o, const struct sockaddr_in *sa, const uint8_t *content,
                          uint32_t crc) {
    worker *ws = calloc((size_t)o->conns, sizeof *ws);
    pthread_t th[BENCH_MAX_CONNS];
    double t0 = now_s();
    for (int i = 0; i < o->conns; i++) {
        ws[i] = (worker){.sa = *sa, .method = o->method, .id = i, .depth = o->depth, .seconds = o->seconds,
                         .size = o->size, .file_size = o->file_size, .content = content, .content_crc = crc,
                         .name = o->name};
        pthread_create(&th[i], NULL, run, &ws[i]);
    }
    unsigned long long calls = 0, errors = 0, bytes = 0, hist[HIST_BUCKETS] = {0};
    for (int i = 0; i < o->conns; i++) {
        pthread_join(th[i], NULL);
        calls += ws[i].calls;
        errors += ws[i].errors;
        bytes += ws[i].bytes;
        for (int k = 0; k < HIST_BUCKETS; k++) hist[k] += ws[i].hist[k];
    }
    double el = now_s() - t0;
    printf("calls_per_s=%.0f mb_per_s=%.1f p50_us=%.0f p99_us=%.0f calls=%llu errors=%llu\n", (double)calls / el,
           (double)bytes / el / 1e6, pct(hist, calls, 0.5), pct(hist, calls, 0.99), calls, errors);
    free(ws);
    return errors ? 1 : 0;
}

int main(int argc, char **argv) {
    bench_options o;
    char gen_name[64];
    struct sockaddr_in sa;
    int rc = parse_args(argc, argv, &o);
    if (rc == 0) rc = check_options(&o, argv[0], gen_name, sizeof gen_name);
    if (rc == 0) rc = resolve_addr(o.addr, &sa);
    if (rc != 0) return rc;
    size_t clen = o.method == B_ECHO ? o.size : o.file_size;
    uint8_t *content = malloc(clen ? clen : 1);
    if (!content) {
        fprintf(stderr, "xferd-c-bench: out of memory for %zu bytes of content\n", clen);
        return 1;
    }
    for (size_t i = 0; i < clen; i++) content[i] = (uint8_t)(i * 2654435761u >> 13);
    uint32_t crc = (uint32_t)crc32(crc32(0L, Z_NULL, 0), content, (uInt)clen);
    rc = run_and_report(&o, &sa, content, crc);
    free(content);
    return rc;
}
