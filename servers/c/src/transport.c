/* transport: plain TCP, the descriptor's bytes as they are. */
#include "transport.h"

#include <sys/epoll.h>
#include <sys/socket.h>

#include "conn.h"

static int plain_open(conn *c) {
    (void)c;
    return 0;
}

static ssize_t plain_read(conn *c, void *buf, size_t len) { return recv(c->fd, buf, len, 0); }

static ssize_t plain_writev(conn *c, const struct iovec *iov, int n) { return writev(c->fd, iov, n); }

static uint32_t plain_events(const conn *c, uint32_t events) {
    (void)c;
    return events;
}

static bool plain_buffered(const conn *c) {
    (void)c;
    return false; /* what the kernel holds, epoll reports */
}

static bool plain_partial(const conn *c) {
    (void)c;
    return false; /* the frame code sees every byte that came */
}

static void plain_close(conn *c) { (void)c; }

const transport transport_plain = {
    .listener = LISTENER_FRAME,
    .open = plain_open,
    .handshake = NULL,
    .handshake_expired = NULL,
    .read = plain_read,
    .writev = plain_writev,
    .interest = plain_events,
    .ready = plain_events,
    .buffered = plain_buffered,
    .partial = plain_partial,
    .close = plain_close,
    .peekable = true,
};
