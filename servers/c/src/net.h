/* net: descriptor helpers in the anet manner (they take an error buffer and return -1 on failure): listening
 * sockets, non-blocking and nodelay, RLIMIT_NOFILE, accept with a spare descriptor, and eventfd wake-ups. */
#ifndef XFERD_NET_H
#define XFERD_NET_H

#include <stddef.h>

#define NET_BACKLOG 511

/* Binds and listens on "host:port" (IPv4 literal or "localhost"); the socket is non-blocking and
 * close-on-exec. Writes the bound address into bound (host:port). Returns the fd or -1. */
int net_listen(const char *addr, char *bound, size_t boundlen, char *err, size_t errlen);
int net_set_nonblock(int fd, char *err, size_t errlen);
void net_set_nodelay(int fd);

/* Raises the soft RLIMIT_NOFILE to the hard limit; returns the soft limit now in force. */
unsigned long long net_raise_nofile(void);

/* A descriptor held in reserve (on /dev/null) so that accept can still take, answer and close a
 * connection when the process is out of descriptors, as libev and nginx do. -1 when none. */
int net_spare_open(void);

/* Half-closes fd and drops what already arrived (up to 64 KiB, without blocking), so that what was sent last
 * is read by the peer rather than lost to a reset when fd closes. */
void net_half_close(int fd);

/* Sends refusal (NULL: nothing) without blocking, then half-closes (net_half_close) and closes fd. */
void net_drop(int fd, const void *refusal, size_t len);

#define NET_ACCEPT_NONE (-1)  /* nothing to accept now (EAGAIN, or a transient error) */
#define NET_ACCEPT_SHED (-2)  /* out of descriptors: one waiting connection was refused and closed */
#define NET_ACCEPT_PAUSE (-3) /* out of descriptors and even the spare did not help: stop accepting a while */
#define NET_ACCEPT_PAUSE_MS 100

/* Accepts one connection (non-blocking, close-on-exec) and returns its fd, or one of NET_ACCEPT_*.
 * On EMFILE/ENFILE it releases *spare, accepts the waiting connection, sends it `refusal` (may be NULL),
 * closes it and takes the spare again, so the listener neither fills up nor spins. */
int net_accept(int lfd, int *spare, const void *refusal, size_t refusal_len);

/* Wakes whoever polls the eventfd evfd (adds 1 to its counter). */
void net_wake(int evfd);

#endif
