/* transport: the seam between a connection's frame logic (conn.h) and the bytes on its socket. The frame
 * code reads, writes and waits through these operations only, so it is the same over plaintext and over TLS
 * (tls.h): a transport turns what the frame code wants (read, write) into the epoll events the socket needs,
 * and the events epoll reports back into what the frame code can now do. A TLS read may need the socket
 * writable (and a write readable) while a handshake or a key update is in progress; plaintext never does.
 *
 * read and writev keep recv's and writev's contract: bytes moved (> 0), 0 at the peer's end of stream (read),
 * or -1 with errno (EAGAIN/EWOULDBLOCK: wait for the events interest() asks for; anything else: the
 * connection is broken). */
#ifndef XFERD_TRANSPORT_H
#define XFERD_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "stats.h"

typedef struct conn conn;

/* What a handshake step came to. */
typedef enum { XPORT_HS_DONE, XPORT_HS_AGAIN, XPORT_HS_FAILED } xport_hs;

typedef struct transport {
    listener_id listener; /* whose connection count (and --max-conns) it belongs to */
    /* c's state for this transport (c->xp), before its first event; -1: out of memory, c is closed unopened */
    int (*open)(conn *c);
    /* One step of the handshake; NULL: none, the connection carries frames from its first byte. */
    xport_hs (*handshake)(conn *c);
    /* The handshake did not end within its deadline: counted, then c closes. */
    void (*handshake_expired)(conn *c);
    ssize_t (*read)(conn *c, void *buf, size_t len);
    ssize_t (*writev)(conn *c, const struct iovec *iov, int n);
    /* The epoll events for what the frame code wants (EPOLLIN|EPOLLRDHUP to read, EPOLLOUT to write). */
    uint32_t (*interest)(const conn *c, uint32_t want);
    /* The events epoll reported, as what the frame code can now try (EPOLLIN: read, EPOLLOUT: write). */
    uint32_t (*ready)(const conn *c, uint32_t events);
    /* Input already taken off the socket and not yet read: epoll will not report it, so it is read again
     * without waiting for an event. */
    bool (*buffered)(const conn *c);
    /* Part of a unit the transport cannot yet hand over (a TLS record) waits in it: a begun frame, as far as
     * --read-timeout is concerned. */
    bool (*partial)(const conn *c);
    /* Before the descriptor closes: a goodbye sent without blocking (TLS close_notify), state freed. */
    void (*close)(conn *c);
    bool peekable; /* the socket's bytes are the frames themselves: the frame code may peek at them */
} transport;

/* Plain TCP: recv and writev on the descriptor. */
extern const transport transport_plain;

#endif
