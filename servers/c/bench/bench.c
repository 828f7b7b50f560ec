/* xferd-c-bench: a closed-loop echo storm against a running server over the frame protocol.
 * Each of --conns threads keeps --depth Echo calls of --size bytes in flight for --seconds and
 * prints one line: calls/s, MB/s each way, p50/p99 latency (log-bucket histogram).
 * On the server each call crosses threads twice: the request buffer is allocated on an io thread
 * and freed on a worker, the response buffer allocated on the worker and freed on the io thread. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "frame.h"
#include "xfer/v1/file_transfer.pb-c.h"
#include "xfer/v1/frame.pb-c.h"

#define BENCH_MAX_CONNS 64
#define BENCH_MAX_DEPTH 256
#define HIST_BUCKETS 64 /* bucket k: latency in [2^(k/2), 2^((k+1)/2)) microseconds, roughly */

typedef struct {
    struct sockaddr_in sa;
    int depth, seconds;
    size_t size;
    uint8_t *req;
    size_t req_len;
    unsigned long long calls, errors;
    unsigned long long hist[HIST_BUCKETS];
} worker;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

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

static int write_full(int fd, const uint8_t *b, size_t n) {
    while (n) {
        ssize_t w = send(fd, b, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

static int bucket_of(double us) {
    int k = 0;
    double lim = 1.41421356;
    while (k < HIST_BUCKETS - 1 && us >= lim) { lim *= 1.41421356; k++; }
    return k;
}

static void *run(void *arg) {
    worker *w = arg;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (fd < 0 || connect(fd, (struct sockaddr *)&w->sa, sizeof w->sa) != 0) {
        perror("xferd-c-bench: connect");
        exit(1);
    }
    double sent_at[BENCH_MAX_DEPTH];
    uint8_t *resp = malloc(w->size + 4096);
    double end = now_s() + w->seconds;
    for (int i = 0; i < w->depth; i++) {
        sent_at[i] = now_s();
        if (write_full(fd, w->req, w->req_len)) exit(1);
    }
    int slot = 0;
    for (;;) {
        uint8_t pre[8];
        if (read_full(fd, pre, 8)) break;
        size_t rest = frame_be32(pre) - 4;
        if (rest > w->size + 4096 || read_full(fd, resp, rest)) break;
        Xfer__V1__ResponseHeader *h = xfer__v1__response_header__unpack(NULL, frame_be32(pre + 4), resp);
        if (!h || h->error[0]) w->errors++;
        if (h) xfer__v1__response_header__free_unpacked(h, NULL);
        double t = now_s();
        w->hist[bucket_of((t - sent_at[slot]) * 1e6)]++;
        w->calls++;
        if (t >= end) break;
        sent_at[slot] = now_s();
        if (write_full(fd, w->req, w->req_len)) break;
        slot = (slot + 1) % w->depth;
    }
    close(fd);
    free(resp);
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

int main(int argc, char **argv) {
    const char *addr = "127.0.0.1:7071";
    int conns = 2, depth = 16, seconds = 3;
    size_t size = 64;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--addr")) addr = argv[i + 1];
        else if (!strcmp(argv[i], "--conns")) conns = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--depth")) depth = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--seconds")) seconds = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--size")) size = (size_t)strtoull(argv[i + 1], NULL, 10);
        else {
            fprintf(stderr, "usage: xferd-c-bench --addr H:P --conns N --depth D --size BYTES --seconds S\n");
            return 2;
        }
    }
    if (conns < 1 || conns > BENCH_MAX_CONNS || depth < 1 || depth > BENCH_MAX_DEPTH || seconds < 1) {
        fprintf(stderr, "xferd-c-bench: conns 1..%d, depth 1..%d, seconds >= 1\n", BENCH_MAX_CONNS, BENCH_MAX_DEPTH);
        return 2;
    }
    struct sockaddr_in sa = {.sin_family = AF_INET};
    char host[64];
    const char *colon = strrchr(addr, ':');
    snprintf(host, sizeof host, "%.*s", colon ? (int)(colon - addr) : 0, addr);
    if (!colon || inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
        fprintf(stderr, "xferd-c-bench: bad --addr %s\n", addr);
        return 2;
    }
    sa.sin_port = htons((uint16_t)atoi(colon + 1));

    Xfer__V1__EchoRequest er = XFER__V1__ECHO_REQUEST__INIT;
    er.payload.len = size;
    er.payload.data = malloc(size ? size : 1);
    memset(er.payload.data, 0xab, size);
    size_t bl = xfer__v1__echo_request__get_packed_size(&er);
    uint8_t *body = malloc(bl);
    xfer__v1__echo_request__pack(&er, body);
    size_t fl = frame_request_size("Xfer.Echo", 1, bl);
    uint8_t *req = malloc(fl);
    frame_encode_request(req, "Xfer.Echo", 1, body, bl);

    worker *ws = calloc((size_t)conns, sizeof *ws);
    pthread_t th[BENCH_MAX_CONNS];
    double t0 = now_s();
    for (int i = 0; i < conns; i++) {
        ws[i] = (worker){.sa = sa, .depth = depth, .seconds = seconds, .size = size, .req = req, .req_len = fl};
        pthread_create(&th[i], NULL, run, &ws[i]);
    }
    unsigned long long calls = 0, errors = 0, hist[HIST_BUCKETS] = {0};
    for (int i = 0; i < conns; i++) {
        pthread_join(th[i], NULL);
        calls += ws[i].calls;
        errors += ws[i].errors;
        for (int k = 0; k < HIST_BUCKETS; k++) hist[k] += ws[i].hist[k];
    }
    double el = now_s() - t0;
    printf("calls_per_s=%.0f mb_per_s=%.1f p50_us=%.0f p99_us=%.0f calls=%llu errors=%llu\n", (double)calls / el,
           (double)calls * (double)size / el / 1e6, pct(hist, calls, 0.5), pct(hist, calls, 0.99), calls, errors);
    free(ws); free(req); free(body); free(er.payload.data);
    return errors ? 1 : 0;
}
