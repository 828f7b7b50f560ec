/* metricshttp: the endpoint's thread, its scrapes and their deadlines. */
#include "metricshttp.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "monotime.h"
#include "net.h"

/* One scrape in progress: reading its request, then writing its response; either ends at deadline_ms. */
typedef struct {
    int fd; /* -1: free slot */
    uint64_t deadline_ms;
    char req[METRICSHTTP_REQ_MAX + 1];
    size_t rlen;
    char *out; /* malloc'd response (head and body), NULL while reading */
    size_t olen, ooff;
} scrape;

struct metricshttp {
    int fd, stop_fd, spare_fd;
    pthread_t th;
    metrics_info mi;
    scrape clients[METRICSHTTP_MAX_CLIENTS];
};

static char *dup_text(const char *t, size_t *len) {
    *len = strlen(t);
    char *p = malloc(*len + 1);
    if (p) memcpy(p, t, *len + 1);
    return p;
}

/* The whole HTTP/1.0 response to one request, or NULL when out of memory. */
static char *respond(const metricshttp *ms, const char *req, size_t *len) {
    if (!(strncmp(req, "GET /metrics", 12) == 0 || strncmp(req, "HEAD /metrics", 13) == 0))
        return dup_text("HTTP/1.0 404 Not Found\r\nContent-Type: text/plain\r\nContent-Length: 23\r\n"
                        "Connection: close\r\n\r\nnot found: try /metrics",
                        len);
    const char *after = req + (req[0] == 'G' ? 12 : 13);
    if (*after != ' ' && *after != '?' && *after != '\r')
        return dup_text("HTTP/1.0 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", len);
    size_t blen;
    char *body = metrics_render(&ms->mi, &blen);
    if (!body)
        return dup_text("HTTP/1.0 500 Internal Server Error\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                        len);
    char hdr[256];
    int hl = snprintf(hdr, sizeof hdr,
                      "HTTP/1.0 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
                      "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                      blen);
    if (req[0] == 'H') blen = 0;
    char *out = malloc((size_t)hl + blen);
    if (out) {
        memcpy(out, hdr, (size_t)hl);
        memcpy(out + hl, body, blen);
        *len = (size_t)hl + blen;
    }
    free(body);
    return out;
}

static void scrape_end(scrape *c) {
    shutdown(c->fd, SHUT_WR);
    close(c->fd);
    free(c->out);
    c->out = NULL;
    c->fd = -1;
}

/* Reads what arrived; once the request is whole (or the peer stops sending) the response is built. */
static void scrape_read(const metricshttp *ms, scrape *c) {
    ssize_t r = recv(c->fd, c->req + c->rlen, METRICSHTTP_REQ_MAX - c->rlen, MSG_DONTWAIT);
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
    if (r > 0) c->rlen += (size_t)r;
    c->req[c->rlen] = '\0';
    bool whole = strstr(c->req, "\r\n\r\n") || strstr(c->req, "\n\n") || c->rlen == METRICSHTTP_REQ_MAX;
    if (r < 0 || (r == 0 && c->rlen == 0)) {
        scrape_end(c);
        return;
    }
    if (!whole && r > 0) return;
    c->out = respond(ms, c->req, &c->olen);
    c->ooff = 0;
    if (!c->out) scrape_end(c);
}

static void scrape_write(scrape *c) {
    ssize_t w = send(c->fd, c->out + c->ooff, c->olen - c->ooff, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
    if (w > 0) c->ooff += (size_t)w;
    if (w <= 0 || c->ooff == c->olen) scrape_end(c);
}

static void accept_scrapes(metricshttp *ms, bool *pause) {
    for (int i = 0; i < METRICSHTTP_MAX_CLIENTS; i++) {
        if (ms->clients[i].fd >= 0) continue;
        int fd = net_accept(ms->fd, &ms->spare_fd, NULL, 0);
        if (fd == NET_ACCEPT_SHED) continue;
        if (fd < 0) {
            *pause = fd == NET_ACCEPT_PAUSE;
            return;
        }
        scrape *c = &ms->clients[i];
        c->fd = fd;
        c->rlen = 0;
        c->deadline_ms = monotime_ms() + METRICSHTTP_IO_TIMEOUT_MS;
    }
}

/* Serves up to METRICSHTTP_MAX_CLIENTS scrapes at once, each within METRICSHTTP_IO_TIMEOUT_MS, from one poll
 * loop: a slow client delays nobody and stopping never waits for one. */
static void *metricshttp_main(void *arg) {
    metricshttp *ms = arg;
    struct pollfd pf[2 + METRICSHTTP_MAX_CLIENTS];
    int slot[METRICSHTTP_MAX_CLIENTS];
    bool pause = false;
    for (;;) {
        uint64_t now = monotime_ms();
        int n = 0, timeout = pause ? NET_ACCEPT_PAUSE_MS : -1, free_slots = 0;
        pf[n++] = (struct pollfd){.fd = ms->stop_fd, .events = POLLIN};
        for (int i = 0; i < METRICSHTTP_MAX_CLIENTS; i++) {
            scrape *c = &ms->clients[i];
            if (c->fd < 0) {
                free_slots++;
                continue;
            }
            if (now >= c->deadline_ms) {
                scrape_end(c);
                free_slots++;
                continue;
            }
            int left = (int)(c->deadline_ms - now);
            if (timeout < 0 || left < timeout) timeout = left;
            slot[n - 1] = i;
            pf[n++] = (struct pollfd){.fd = c->fd, .events = c->out ? POLLOUT : POLLIN};
        }
        int nclients = n - 1;
        if (free_slots && !pause) pf[n++] = (struct pollfd){.fd = ms->fd, .events = POLLIN};
        pause = false;
        int r = poll(pf, (nfds_t)n, timeout);
        if (r < 0 && errno != EINTR) break;
        if (r <= 0) continue;
        if (pf[0].revents) break;
        for (int k = 1; k <= nclients; k++) {
            if (!pf[k].revents) continue;
            scrape *c = &ms->clients[slot[k - 1]];
            if (c->out) scrape_write(c);
            else scrape_read(ms, c);
            if (c->fd >= 0 && c->out && c->ooff == 0) scrape_write(c); /* usually goes out at once */
        }
        if (n > nclients + 1 && pf[n - 1].revents) accept_scrapes(ms, &pause);
    }
    for (int i = 0; i < METRICSHTTP_MAX_CLIENTS; i++)
        if (ms->clients[i].fd >= 0) scrape_end(&ms->clients[i]);
    return NULL;
}

metricshttp *metricshttp_start(int fd, const metrics_info *mi, char *err, size_t errlen) {
    metricshttp *ms = calloc(1, sizeof *ms);
    if (!ms) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    ms->fd = fd;
    ms->mi = *mi;
    for (int i = 0; i < METRICSHTTP_MAX_CLIENTS; i++) ms->clients[i].fd = -1;
    ms->spare_fd = net_spare_open();
    ms->stop_fd = eventfd(0, EFD_CLOEXEC);
    if (ms->stop_fd < 0 || ms->spare_fd < 0 || pthread_create(&ms->th, NULL, metricshttp_main, ms) != 0) {
        snprintf(err, errlen, "starting the metrics thread: %s", strerror(errno));
        if (ms->stop_fd >= 0) close(ms->stop_fd);
        if (ms->spare_fd >= 0) close(ms->spare_fd);
        free(ms);
        return NULL;
    }
    return ms;
}

void metricshttp_stop(metricshttp *ms) {
    if (!ms) return;
    net_wake(ms->stop_fd);
    pthread_join(ms->th, NULL);
    close(ms->stop_fd);
    close(ms->spare_fd);
    close(ms->fd);
    free(ms);
}
