/* perthread: joining, walking and freeing the registry's blocks. */
#include "perthread.h"

#include <stdlib.h>

void *perthread_join(perthread_reg *r, size_t size) {
    perthread_link *b = calloc(1, size);
    if (!b) return NULL;
    pthread_mutex_lock(&r->mu);
    if (r->max && r->count >= r->max) {
        pthread_mutex_unlock(&r->mu);
        free(b);
        return NULL;
    }
    b->id = r->count++;
    b->next = r->head;
    r->head = b;
    pthread_mutex_unlock(&r->mu);
    return b;
}

void perthread_each(perthread_reg *r, void (*fn)(void *block, void *arg), void *arg) {
    pthread_mutex_lock(&r->mu);
    for (perthread_link *b = r->head; b; b = b->next) fn(b, arg);
    pthread_mutex_unlock(&r->mu);
}

void perthread_clear(perthread_reg *r, void (*fini)(void *block)) {
    pthread_mutex_lock(&r->mu);
    while (r->head) {
        perthread_link *next = r->head->next;
        if (fini) fini(r->head);
        free(r->head);
        r->head = next;
    }
    r->count = 0;
    pthread_mutex_unlock(&r->mu);
}
