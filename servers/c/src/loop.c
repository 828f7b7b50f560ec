/* loop: epoll rounds, hand-over lists, timeout sweeps. */
#include "loop.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "gencache.h"
#include "mem.h"
#include "monotime.h"
#include "net.h"
#include "stats.h"

int loop_init(loop *lp, loop_shared *sh, work_queue *wq, bool expires_gencache, char *err, size_t errlen) {
    lp->sh = sh;
    lp->wq = wq;
    lp->expires_gencache = expires_gencache;
    pthread_mutex_init(&lp->mu, NULL);
    lp->epfd = epoll_create1(EPOLL_CLOEXEC);
    lp->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL}; /* NULL: the eventfd, not a connection */
    if (lp->epfd < 0 || lp->evfd < 0 || epoll_ctl(lp->epfd, EPOLL_CTL_ADD, lp->evfd, &ev) != 0) {
        snprintf(err, errlen, "epoll/eventfd: %s", strerror(errno));
        return -1;
    }
    return 0;
}

void loop_wake(loop *lp) { net_wake(lp->evfd); }

int loop_hand_conn(loop *lp, int fd, const transport *tp) {
    newconn *nc = mem_alloc(sizeof *nc);
    if (!nc) return -1;
    stats_conn_opened(tp->listener);
    atomic_fetch_add(&stats_accepted, 1);
    nc->fd = fd;
    nc->tp = tp;
    pthread_mutex_lock(&lp->mu);
    nc->next = lp->incoming;
    lp->incoming = nc;
    pthread_mutex_unlock(&lp->mu);
    loop_wake(lp);
    return 0;
}

void loop_hand_done(loop *lp, job *j) {
    pthread_mutex_lock(&lp->mu);
    bool was_empty = lp->done_head == NULL;
    if (lp->done_tail) lp->done_tail->next = j;
    else lp->done_head = j;
    lp->done_tail = j;
    pthread_mutex_unlock(&lp->mu);
    if (was_empty) loop_wake(lp); /* otherwise a wake-up is on its way already */
}

/* Queues the calls parsed in this round for the workers. */
static void loop_flush_batch(loop *lp) {
    if (!lp->batch_head) return;
    workq_push(lp->wq, lp->batch_head, lp->batch_tail, lp->batch_n);
    lp->batch_head = lp->batch_tail = NULL;
    lp->batch_n = 0;
}

/* Takes what other threads handed over: new connections first, then finished calls. */
static void loop_take_handed(loop *lp) {
    pthread_mutex_lock(&lp->mu);
    newconn *list = lp->incoming;
    lp->incoming = NULL;
    job *done = lp->done_head;
    lp->done_head = lp->done_tail = NULL;
    pthread_mutex_unlock(&lp->mu);
    while (list) {
        newconn *n = list->next;
        conn_open(lp, list->fd, list->tp);
        mem_free(list);
        list = n;
    }
    while (done) {
        job *n = done->next;
        conn_call_done(done);
        done = n;
    }
}

static void loop_sweep(loop *lp, uint64_t now) {
    if (lp->expires_gencache) gencache_expire(now); /* an idle server holds no generated content */
    for (conn *c = lp->conns, *n; c; c = n) {
        n = c->next;
        conn_check_timeouts(c, now);
    }
}

void *loop_main(void *arg) {
    loop *lp = arg;
    struct epoll_event evs[LOOP_MAX_EVENTS];
    uint64_t last_sweep = monotime_ms();
    while (!atomic_load(&lp->sh->stop)) {
        mem_thread_flush();
        int n = epoll_wait(lp->epfd, evs, LOOP_MAX_EVENTS, lp->again ? 0 : LOOP_TICK_MS);
        if (n < 0 && errno != EINTR) break;
        /* Each conn in evs[] was registered, so alive, when epoll_wait returned, and appears there once.
         * While the batch is handled nothing may free a conn but its own event (under the reference
         * conn_on_event takes). Completed calls (loop_take_handed) can drop a closed conn's last reference,
         * so they are taken after the batch, never on the eventfd's event in the middle of it: a conn freed
         * there could still have an entry later in evs[] (a use after free; with glibc, "double free or
         * corruption" in conn_close). */
        for (int i = 0; i < n; i++) {
            if (evs[i].data.ptr == NULL) {
                uint64_t v;
                ssize_t r = read(lp->evfd, &v, sizeof v);
                (void)r;
                continue;
            }
            conn_on_event(evs[i].data.ptr, evs[i].events);
        }
        conn_read_again(lp); /* after the batch, for the same reason as completed calls */
        loop_flush_batch(lp);
        loop_take_handed(lp);
        loop_flush_batch(lp); /* frames a resumed connection had buffered */
        uint64_t now = monotime_ms();
        if (now - last_sweep >= LOOP_TICK_MS) {
            loop_sweep(lp, now);
            last_sweep = now;
        }
    }
    mem_thread_flush();
    return NULL;
}

void loop_close_all(loop *lp) {
    for (newconn *nc = lp->incoming, *n; nc; nc = n) {
        n = nc->next;
        close(nc->fd);
        stats_conn_closed(nc->tp->listener);
        mem_free(nc);
    }
    lp->incoming = NULL;
    conn_again_clear(lp);
    while (lp->conns) conn_close(lp->conns);
}

void loop_destroy(loop *lp) {
    for (job *j = lp->done_head, *n; j; j = n) {
        n = j->next;
        job_drop(j);
    }
    for (job *j = lp->batch_head, *n; j; j = n) { /* not reached: batches are queued before loops block */
        n = j->next;
        job_drop(j);
    }
    close(lp->epfd);
    close(lp->evfd);
    pthread_mutex_destroy(&lp->mu);
}
