/* loop: an event-loop thread (redis's ae, with memcached's thread.c hand-over). It owns an epoll instance over
 * its connections (conn.h) and an eventfd through which other threads hand it work under its lock: new
 * connections from the acceptor, finished calls from the workers. Each round it serves the ready
 * connections, queues the calls they parsed on its work queue at once (one lock, worker.h), takes what was
 * handed to it, and every LOOP_TICK_MS checks its connections' read and write timeouts. */
#ifndef XFERD_LOOP_H
#define XFERD_LOOP_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "conn.h"
#include "server.h"
#include "worker.h"

#define LOOP_TICK_MS 100 /* how often loops check read and write timeouts */
#define LOOP_MAX_EVENTS 128

/* What a server shares with its loops and their connections (server.c owns it). */
typedef struct {
    const server_config *cfg;
    _Atomic int64_t unsent; /* response bytes queued on every connection, for the drain */
    _Atomic bool draining;  /* no new calls: frames not yet parsed are dropped */
    _Atomic bool stop;      /* the loops return */
} loop_shared;

typedef struct newconn {
    struct newconn *next;
    int fd;
    const transport *tp;
} newconn;

struct loop {
    loop_shared *sh;
    bool expires_gencache; /* one loop also drops idle generated content (gencache_expire) */
    pthread_t th;
    int epfd, evfd;
    work_queue *wq;
    job *batch_head, *batch_tail; /* calls parsed in this round, queued at once */
    size_t batch_n;
    pthread_mutex_t mu; /* guards the two hand-over lists below */
    newconn *incoming;
    job *done_head, *done_tail;
    conn *conns; /* loop thread only */
    size_t nconns;
    conn *again; /* loop thread only: to read again without an event (conn_read_again) */
};

/* Sets lp up (its epoll and eventfd) to feed wq. -1 with err. */
int loop_init(loop *lp, loop_shared *sh, work_queue *wq, bool expires_gencache, char *err, size_t errlen);

/* The thread: runs until sh->stop (then a wake-up gets it out of epoll_wait at once). */
void *loop_main(void *arg);

/* Wakes the loop out of epoll_wait. */
void loop_wake(loop *lp);

/* From the acceptor: a connection for lp through transport tp, counted open (stats_conn_opened) and admitted
 * (stats_accepted) from here. -1 when out of memory: nothing was counted, the caller closes fd. */
int loop_hand_conn(loop *lp, int fd, const transport *tp);

/* From a worker: j's answer is ready (j->next NULL). */
void loop_hand_done(loop *lp, job *j);

/* From the loop thread (conn.c): a call parsed in this round, queued for the workers with the round's others. */
static inline void loop_queue_call(loop *lp, job *j) {
    if (lp->batch_tail) lp->batch_tail->next = j;
    else lp->batch_head = j;
    lp->batch_tail = j;
    lp->batch_n++;
}

/* After the thread returned: closes the connections handed over but not yet taken, and every open one. */
void loop_close_all(loop *lp);

/* Single-threaded, after the workers returned: drops the calls never taken back, closes the descriptors. */
void loop_destroy(loop *lp);

#endif
