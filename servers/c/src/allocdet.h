/* allocdet: choosing, detecting and reading the allocator that really serves malloc.
 *
 * Third-party allocators are switched by re-executing the binary once with LD_PRELOAD naming the
 * Debian library (never dlopen: an allocator loaded late would mix pointers of two heaps). After
 * that, detection asks the dynamic linker which object defines malloc (dladdr) and confirms it with
 * the allocator's own API (mallctl, mi_version, MallocExtension_GetNumericProperty / tc_version). */
#ifndef XFERD_ALLOCDET_H
#define XFERD_ALLOCDET_H

#include <stddef.h>
#include <stdint.h>

#define ALLOCDET_JEMALLOC_LIB "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"
#define ALLOCDET_TCMALLOC_LIB "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4"
#define ALLOCDET_MIMALLOC_LIB "/usr/lib/x86_64-linux-gnu/libmimalloc.so.2"
/* Set in the re-executed process so it does not re-exec again. */
#define ALLOCDET_MARKER_ENV "XFERD_C_PRELOADED"
/* Test hook: the library to preload instead of the Debian one (e.g. to force a mismatch). */
#define ALLOCDET_OVERRIDE_ENV "XFERD_C_PRELOAD_LIB"

typedef enum { MALLOC_GLIBC, MALLOC_JEMALLOC, MALLOC_TCMALLOC, MALLOC_MIMALLOC, MALLOC_ASAN, MALLOC_UNKNOWN } malloc_impl;

/* For --alloc jemalloc|tcmalloc|mimalloc: when not yet preloaded, execs this binary again with
 * LD_PRELOAD set (does not return on success). Returns 0 when nothing is to be done, -1 with err. */
int allocdet_preload(const char *want, char **argv, char *err, size_t errlen);

/* Detects the allocator serving malloc; lib gets the path of the object that defines malloc. */
malloc_impl allocdet_detect(char *lib, size_t liblen);
const char *allocdet_name(malloc_impl m);

/* The malloc implementation --alloc asks for ("pool" sits on glibc). Under a sanitizer build, glibc
 * and pool are served by the sanitizer's allocator, which is what detection reports. */
malloc_impl allocdet_expected(const char *want);

/* What an allocator reports about itself. Each figure is exported only when the allocator really
 * measures it: a proxy under another figure's name would mislead an allocator comparison. */
enum { ALLOC_HAVE_ALLOCATED = 1, ALLOC_HAVE_RESIDENT = 2, ALLOC_HAVE_COMMITTED = 4 };

typedef struct {
    unsigned have; /* ALLOC_HAVE_* bits */
    uint64_t allocated, resident, committed;
} alloc_stats;

/* The active allocator's own statistics. Returns -1 when it reports none. */
int allocdet_stats(malloc_impl m, alloc_stats *out);

/* "NAME=value;NAME=value" of the allocator tunables in the environment (MALLOC_*, GLIBC_TUNABLES,
 * TCMALLOC_*, MIMALLOC_*), spaces as %20; "-" when none. */
void allocdet_env(char *out, size_t cap);

#endif
