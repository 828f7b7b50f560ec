/* htab: a small chained hash table from byte-string keys to pointers (not thread-safe; the store
 * locks around it). Keys are copied. */
#ifndef XFERD_HTAB_H
#define XFERD_HTAB_H

#include <stddef.h>

#define HTAB_INITIAL_BUCKETS 64

typedef struct htab_entry {
    struct htab_entry *next;
    size_t hash;
    void *value;
    size_t klen;
    char key[]; /* klen bytes + NUL */
} htab_entry;

typedef struct {
    htab_entry **buckets;
    size_t nbuckets, count;
} htab;

int htab_init(htab *t);
void htab_free(htab *t); /* frees entries, not values */
void *htab_get(const htab *t, const void *key, size_t klen);
/* Sets key to value; *old gets the value it replaced (or NULL). Returns 0, or -1 when out of memory. */
int htab_put(htab *t, const void *key, size_t klen, void *value, void **old);
/* Removes key; returns its value or NULL. */
void *htab_del(htab *t, const void *key, size_t klen);

/* Visits every entry; fn returns nonzero to remove the entry (its value is the caller's to free). */
void htab_sweep(htab *t, int (*fn)(void *ctx, const char *key, size_t klen, void *value), void *ctx);

#endif
