/* worker: queue hand-over and the call's run on a worker thread. */
#include "worker.h"

#include "frame.h"
#include "loop.h"
#include "mem.h"
#include "monotime.h"
#include "stats.h"

void workq_init(work_queue *q) {
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->cv, NULL);
}

void workq_push(work_queue *q, job *head, job *tail, size_t n) {
    pthread_mutex_lock(&q->mu);
    if (q->tail) q->tail->next = head;
    else q->head = head;
    q->tail = tail;
    int wake_n = q->idle < (int)n ? q->idle : (int)n;
    pthread_mutex_unlock(&q->mu);
    for (int k = 0; k < wake_n; k++) pthread_cond_signal(&q->cv);
}

void workq_stop(work_queue *q) {
    pthread_mutex_lock(&q->mu);
    q->stop = true;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
}

void workq_destroy(work_queue *q) {
    for (job *j = q->head, *n; j; j = n) {
        n = j->next;
        job_drop(j);
    }
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->cv);
}

/* The next call, waiting for one; NULL once the queue is stopped (at the drain deadline queued calls are
 * dropped, not run). */
static job *workq_take(work_queue *q) {
    pthread_mutex_lock(&q->mu);
    while (!q->head && !q->stop) {
        pthread_mutex_unlock(&q->mu);
        mem_thread_flush(); /* hand foreign frees back before sleeping */
        pthread_mutex_lock(&q->mu);
        if (q->head || q->stop) break;
        q->idle++;
        pthread_cond_wait(&q->cv, &q->mu);
        q->idle--;
    }
    job *j = q->head;
    if (!j || q->stop) {
        pthread_mutex_unlock(&q->mu);
        return NULL;
    }
    q->head = j->next;
    if (!q->head) q->tail = NULL;
    pthread_mutex_unlock(&q->mu);
    j->next = NULL;
    return j;
}

/* Runs one call and hands its answer to its connection's loop. */
static void worker_run(const worker *w, job *j) {
    frame_parts p;
    frame_split(j->frame, j->len, &p);
    handler_ctx hc = *w->hc;
    hc.conn_id = j->c->id; /* immutable once the conn is created: safe to read here */
    hc.cancel = w->cancel;
    if (handle_request(&hc, j->m, &j->hdr, p.body, p.body_len, j->req, &j->res) != 0) {
        j->res.frame = NULL;
        j->res.code = XERR_INTERNAL;
    }
    /* done with the request (the header points into it); a block of its own, allocated on the loop
     * thread, is freed here */
    blk_unref(j->req);
    j->req = NULL;
    j->frame = NULL;
    if (stats_enabled)
        stats_record(j->m, j->res.code, monotime_ns() - j->t0_ns, j->res.in_bytes, j->res.out_bytes);
    loop_hand_done(j->c->lp, j);
}

void *worker_main(void *arg) {
    const worker *w = arg;
    for (job *j; (j = workq_take(w->wq)) != NULL;) worker_run(w, j);
    mem_thread_flush();
    atomic_fetch_add(w->returned, 1); /* last: nothing of the server is touched after this */
    return NULL;
}
