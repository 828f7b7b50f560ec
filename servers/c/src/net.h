/* net: socket helpers in the anet manner: they take an error buffer and return -1 on failure. */
#ifndef XFERD_NET_H
#define XFERD_NET_H

#include <stddef.h>

#define NET_BACKLOG 511

/* Binds and listens on "host:port" (IPv4 literal or "localhost"); the socket is non-blocking and
 * close-on-exec. Writes the bound address into bound (host:port). Returns the fd or -1. */
int net_listen(const char *addr, char *bound, size_t boundlen, char *err, size_t errlen);
int net_set_nonblock(int fd, char *err, size_t errlen);
void net_set_nodelay(int fd);

#endif
