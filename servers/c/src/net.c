/* net: listen, non-blocking, nodelay, descriptor limits, accept, wake. */
#include "net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

int net_set_nonblock(int fd, char *err, size_t errlen) {
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
        snprintf(err, errlen, "fcntl O_NONBLOCK: %s", strerror(errno));
        return -1;
    }
    return 0;
}

void net_set_nodelay(int fd) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

int net_listen(const char *addr, char *bound, size_t boundlen, char *err, size_t errlen) {
    char host[128];
    const char *colon = strrchr(addr, ':');
    if (!colon || (size_t)(colon - addr) >= sizeof host) {
        snprintf(err, errlen, "address %s: want host:port", addr);
        return -1;
    }
    memcpy(host, addr, (size_t)(colon - addr));
    host[colon - addr] = '\0';
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (!colon[1] || *end || port < 0 || port > 65535) {
        snprintf(err, errlen, "address %s: bad port", addr);
        return -1;
    }
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (strcmp(host, "localhost") == 0 || host[0] == '\0') strcpy(host, "127.0.0.1");
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
        snprintf(err, errlen, "address %s: host must be an IPv4 address", addr);
        return -1;
    }
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(err, errlen, "socket: %s", strerror(errno));
        return -1;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, NET_BACKLOG) < 0) {
        snprintf(err, errlen, "listening on %s: %s", addr, strerror(errno));
        close(fd);
        return -1;
    }
    socklen_t sl = sizeof sa;
    getsockname(fd, (struct sockaddr *)&sa, &sl);
    char ip[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &sa.sin_addr, ip, sizeof ip);
    snprintf(bound, boundlen, "%s:%u", ip, ntohs(sa.sin_port));
    return fd;
}

unsigned long long net_raise_nofile(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return 1024;
    if (rl.rlim_cur < rl.rlim_max) {
        struct rlimit raised = {.rlim_cur = rl.rlim_max, .rlim_max = rl.rlim_max};
        if (setrlimit(RLIMIT_NOFILE, &raised) == 0) rl = raised;
    }
    return (unsigned long long)rl.rlim_cur;
}

int net_spare_open(void) { return open("/dev/null", O_RDONLY | O_CLOEXEC); }

void net_half_close(int fd) {
    shutdown(fd, SHUT_WR);
    char sink[4096];
    for (int i = 0; i < 16 && recv(fd, sink, sizeof sink, MSG_DONTWAIT) > 0; i++) {}
}

void net_drop(int fd, const void *refusal, size_t len) {
    if (refusal) {
        ssize_t w = send(fd, refusal, len, MSG_DONTWAIT | MSG_NOSIGNAL);
        (void)w; /* best effort: the connection is dropped either way */
    }
    net_half_close(fd);
    close(fd);
}

int net_accept(int lfd, int *spare, const void *refusal, size_t refusal_len) {
    int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) return fd;
    if (errno != EMFILE && errno != ENFILE) return NET_ACCEPT_NONE;
    if (*spare < 0) return NET_ACCEPT_PAUSE;
    close(*spare);
    *spare = -1;
    fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    bool still_out = fd < 0 && (errno == EMFILE || errno == ENFILE);
    if (fd >= 0) net_drop(fd, refusal, refusal_len);
    *spare = net_spare_open();
    if (still_out || *spare < 0) return NET_ACCEPT_PAUSE;
    return fd >= 0 ? NET_ACCEPT_SHED : NET_ACCEPT_NONE;
}

void net_wake(int evfd) {
    uint64_t one = 1;
    ssize_t n = write(evfd, &one, sizeof one);
    (void)n; /* a full counter still wakes the reader */
}
