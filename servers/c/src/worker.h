/* worker: the work queues and the worker threads that serve them (memcached's thread.c pairing): a server
 * has min(io_threads, workers) queues, loop i feeding queue i mod n and worker j serving queue j mod n, so no
 * queue is locked by every thread. A worker takes one call at a time, decodes its body in place, runs its
 * method's handler (handlers.h), drops the request's block (freeing it when the call held the last
 * reference: allocated on the loop thread), records it (stats.h) and hands the answer back to the call's
 * loop. */
#ifndef XFERD_WORKER_H
#define XFERD_WORKER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "conn.h"
#include "handlers.h"

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    job *head, *tail;
    int idle; /* workers waiting on cv */
    bool stop;
} work_queue;

/* One worker thread's view of the server. */
typedef struct {
    work_queue *wq;
    const handler_ctx *hc;        /* the server's; each call gets its own copy with its connection's id */
    const atomic_bool *cancel;    /* the drain deadline passed: handlers stop long work */
    _Atomic uint32_t *returned;   /* counts the workers that returned, so the stop can wait with a deadline */
} worker;

void workq_init(work_queue *q);

/* Appends the calls head ... tail (n of them) under one lock, and wakes at most one idle worker per call. */
void workq_push(work_queue *q, job *head, job *tail, size_t n);

/* The workers return after the call each is running; queued calls are dropped, never run. */
void workq_stop(work_queue *q);

/* Single-threaded, after the workers returned: drops the calls left queued. */
void workq_destroy(work_queue *q);

/* The thread; arg is its worker. */
void *worker_main(void *arg);

#endif
