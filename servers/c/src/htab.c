/* htab: chained hash table with FNV-1a hashing and doubling. */
#include "htab.h"

#include "mem.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static size_t hash_bytes(const void *key, size_t n) {
    const unsigned char *p = key;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
    return (size_t)h;
}

int htab_init(htab *t) {
    t->nbuckets = HTAB_INITIAL_BUCKETS;
    t->count = 0;
    t->buckets = mem_calloc(t->nbuckets, sizeof *t->buckets);
    return t->buckets ? 0 : -1;
}

void htab_free(htab *t) {
    for (size_t i = 0; i < t->nbuckets; i++) {
        htab_entry *e = t->buckets[i];
        while (e) {
            htab_entry *n = e->next;
            mem_free(e);
            e = n;
        }
    }
    mem_free(t->buckets);
    t->buckets = NULL;
    t->nbuckets = t->count = 0;
}

static htab_entry **find(const htab *t, const void *key, size_t klen, size_t h) {
    htab_entry **pp = &t->buckets[h & (t->nbuckets - 1)];
    for (; *pp; pp = &(*pp)->next)
        if ((*pp)->hash == h && (*pp)->klen == klen && memcmp((*pp)->key, key, klen) == 0) return pp;
    return pp;
}

void *htab_get(const htab *t, const void *key, size_t klen) {
    htab_entry **pp = find(t, key, klen, hash_bytes(key, klen));
    return *pp ? (*pp)->value : NULL;
}

static void grow(htab *t) {
    size_t nb = t->nbuckets * 2;
    htab_entry **b = mem_calloc(nb, sizeof *b);
    if (!b) return; /* keep the longer chains; still correct */
    for (size_t i = 0; i < t->nbuckets; i++) {
        htab_entry *e = t->buckets[i];
        while (e) {
            htab_entry *n = e->next;
            e->next = b[e->hash & (nb - 1)];
            b[e->hash & (nb - 1)] = e;
            e = n;
        }
    }
    mem_free(t->buckets);
    t->buckets = b;
    t->nbuckets = nb;
}

int htab_put(htab *t, const void *key, size_t klen, void *value, void **old) {
    size_t h = hash_bytes(key, klen);
    htab_entry **pp = find(t, key, klen, h);
    if (*pp) {
        if (old) *old = (*pp)->value;
        (*pp)->value = value;
        return 0;
    }
    if (old) *old = NULL;
    htab_entry *e = mem_alloc(sizeof *e + klen + 1);
    if (!e) return -1;
    e->next = NULL;
    e->hash = h;
    e->value = value;
    e->klen = klen;
    memcpy(e->key, key, klen);
    e->key[klen] = '\0';
    *pp = e;
    if (++t->count > t->nbuckets) grow(t);
    return 0;
}

void *htab_del(htab *t, const void *key, size_t klen) {
    htab_entry **pp = find(t, key, klen, hash_bytes(key, klen));
    htab_entry *e = *pp;
    if (!e) return NULL;
    void *v = e->value;
    *pp = e->next;
    mem_free(e);
    t->count--;
    return v;
}

void htab_sweep(htab *t, int (*fn)(void *ctx, const char *key, size_t klen, void *value), void *ctx) {
    for (size_t i = 0; i < t->nbuckets; i++) {
        htab_entry **pp = &t->buckets[i];
        while (*pp) {
            htab_entry *e = *pp;
            if (fn(ctx, e->key, e->klen, e->value)) {
                *pp = e->next;
                mem_free(e);
                t->count--;
            } else {
                pp = &e->next;
            }
        }
    }
}
