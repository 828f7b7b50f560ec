/* allocdet: preload, detection, statistics. */
#include "allocdet.h"

#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define XFERD_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define XFERD_ASAN 1
#endif
#ifdef XFERD_ASAN
#include <sanitizer/allocator_interface.h>
#endif

extern char **environ;

static const char *lib_for(const char *want) {
    if (strcmp(want, "jemalloc") == 0) return ALLOCDET_JEMALLOC_LIB;
    if (strcmp(want, "tcmalloc") == 0) return ALLOCDET_TCMALLOC_LIB;
    if (strcmp(want, "mimalloc") == 0) return ALLOCDET_MIMALLOC_LIB;
    return NULL;
}

int allocdet_preload(const char *want, char **argv, char *err, size_t errlen) {
    const char *lib = lib_for(want);
    if (!lib || getenv(ALLOCDET_MARKER_ENV)) return 0;
#ifdef XFERD_ASAN
    snprintf(err, errlen, "--alloc %s: a sanitizer build serves malloc itself; preloading %s is not possible",
             want, lib);
    return -1;
#endif
    const char *over = getenv(ALLOCDET_OVERRIDE_ENV);
    if (over && *over) lib = over;
    if (access(lib, R_OK) != 0) {
        snprintf(err, errlen, "--alloc %s needs %s: %s", want, lib, strerror(errno));
        return -1;
    }
    char pre[8192];
    const char *old = getenv("LD_PRELOAD");
    if (old && *old) snprintf(pre, sizeof pre, "%s:%s", lib, old);
    else snprintf(pre, sizeof pre, "%s", lib);
    if (setenv("LD_PRELOAD", pre, 1) != 0 || setenv(ALLOCDET_MARKER_ENV, want, 1) != 0) {
        snprintf(err, errlen, "setenv: %s", strerror(errno));
        return -1;
    }
    execv("/proc/self/exe", argv);
    snprintf(err, errlen, "re-executing with LD_PRELOAD=%s: %s", pre, strerror(errno));
    return -1;
}

const char *allocdet_name(malloc_impl m) {
    switch (m) {
    case MALLOC_GLIBC: return "glibc";
    case MALLOC_JEMALLOC: return "jemalloc";
    case MALLOC_TCMALLOC: return "tcmalloc";
    case MALLOC_MIMALLOC: return "mimalloc";
    case MALLOC_ASAN: return "asan";
    default: return "unknown";
    }
}

malloc_impl allocdet_expected(const char *want) {
    if (strcmp(want, "jemalloc") == 0) return MALLOC_JEMALLOC;
    if (strcmp(want, "tcmalloc") == 0) return MALLOC_TCMALLOC;
    if (strcmp(want, "mimalloc") == 0) return MALLOC_MIMALLOC;
#ifdef XFERD_ASAN
    return MALLOC_ASAN;
#else
    return MALLOC_GLIBC;
#endif
}

malloc_impl allocdet_detect(char *lib, size_t liblen) {
    void *m = dlsym(RTLD_DEFAULT, "malloc");
    Dl_info di;
    const char *fname = "";
    if (m && dladdr(m, &di) && di.dli_fname) fname = di.dli_fname;
    snprintf(lib, liblen, "%s", fname[0] ? fname : "?");
#ifdef XFERD_ASAN
    return MALLOC_ASAN; /* the sanitizer runtime in this binary intercepts malloc */
#endif
    if (strstr(fname, "jemalloc") && dlsym(RTLD_DEFAULT, "mallctl")) return MALLOC_JEMALLOC;
    if (strstr(fname, "mimalloc") && dlsym(RTLD_DEFAULT, "mi_version")) return MALLOC_MIMALLOC;
    if (strstr(fname, "tcmalloc") &&
        (dlsym(RTLD_DEFAULT, "MallocExtension_GetNumericProperty") || dlsym(RTLD_DEFAULT, "tc_version")))
        return MALLOC_TCMALLOC;
    if (strstr(fname, "/libc.so") || strstr(fname, "/libc-")) return MALLOC_GLIBC;
    return MALLOC_UNKNOWN;
}

typedef int (*mallctl_fn)(const char *, void *, size_t *, void *, size_t);
typedef int (*tc_prop_fn)(const char *, size_t *);
typedef void (*mi_info_fn)(size_t *, size_t *, size_t *, size_t *, size_t *, size_t *, size_t *, size_t *);

static int glibc_stats(alloc_stats *out) {
    struct mallinfo2 mi = mallinfo2();
    out->allocated = mi.uordblks + mi.hblkhd;
    out->resident = mi.arena + mi.hblkhd;
    out->have = ALLOC_HAVE_ALLOCATED | ALLOC_HAVE_RESIDENT;
    return 0;
}

static int jemalloc_stats(alloc_stats *out) {
    mallctl_fn f = (mallctl_fn)dlsym(RTLD_DEFAULT, "mallctl");
    if (!f) return -1;
    uint64_t epoch = 1;
    size_t sz = sizeof epoch;
    f("epoch", &epoch, &sz, &epoch, sz); /* refreshes the cached statistics */
    size_t a = 0, r = 0;
    sz = sizeof a;
    if (f("stats.allocated", &a, &sz, NULL, 0) != 0) return -1;
    sz = sizeof r;
    if (f("stats.resident", &r, &sz, NULL, 0) != 0) return -1;
    out->allocated = a;
    out->resident = r;
    out->have = ALLOC_HAVE_ALLOCATED | ALLOC_HAVE_RESIDENT;
    return 0;
}

static int tcmalloc_stats(alloc_stats *out) {
    tc_prop_fn f = (tc_prop_fn)dlsym(RTLD_DEFAULT, "MallocExtension_GetNumericProperty");
    if (!f) return -1;
    size_t a = 0, heap = 0, unmapped = 0, phys = 0;
    if (!f("generic.current_allocated_bytes", &a)) return -1;
    if (f("generic.total_physical_bytes", &phys)) {
        out->resident = phys;
    } else {
        f("generic.heap_size", &heap);
        f("tcmalloc.pageheap_unmapped_bytes", &unmapped);
        out->resident = heap - unmapped;
    }
    out->allocated = a;
    out->have = ALLOC_HAVE_ALLOCATED | ALLOC_HAVE_RESIDENT;
    return 0;
}

/* mimalloc 2.0 release builds count no allocated bytes, and mi_process_info's current_rss is an estimate made
 * from committed bytes, not a measurement: committed pages never touched are not resident (seen here: 44 MiB
 * "rss" in a 7 MiB process). So only commit is reported. */
static int mimalloc_stats(alloc_stats *out) {
    mi_info_fn f = (mi_info_fn)dlsym(RTLD_DEFAULT, "mi_process_info");
    if (!f) return -1;
    size_t el, ut, st, rss, prss, commit, pcommit, pf;
    f(&el, &ut, &st, &rss, &prss, &commit, &pcommit, &pf);
    out->committed = commit;
    out->have = ALLOC_HAVE_COMMITTED;
    return 0;
}

static int sanitizer_stats(alloc_stats *out) {
#ifdef XFERD_ASAN
    out->allocated = __sanitizer_get_current_allocated_bytes();
    out->resident = __sanitizer_get_heap_size();
    out->have = ALLOC_HAVE_ALLOCATED | ALLOC_HAVE_RESIDENT;
    return 0;
#else
    (void)out;
    return -1;
#endif
}

int allocdet_stats(malloc_impl m, alloc_stats *out) {
    out->have = 0;
    switch (m) {
    case MALLOC_GLIBC: return glibc_stats(out);
    case MALLOC_JEMALLOC: return jemalloc_stats(out);
    case MALLOC_TCMALLOC: return tcmalloc_stats(out);
    case MALLOC_MIMALLOC: return mimalloc_stats(out);
    case MALLOC_ASAN: return sanitizer_stats(out);
    default: return -1;
    }
}

static int is_tunable(const char *kv) {
    return strncmp(kv, "MALLOC_", 7) == 0 || strncmp(kv, "GLIBC_TUNABLES=", 15) == 0 ||
           strncmp(kv, "TCMALLOC_", 9) == 0 || strncmp(kv, "MIMALLOC_", 9) == 0;
}

void allocdet_env(char *out, size_t cap) {
    size_t o = 0;
    out[0] = '\0';
    for (char **e = environ; e && *e; e++) {
        if (!is_tunable(*e)) continue;
        if (o && o + 1 < cap) out[o++] = ';';
        for (const char *p = *e; *p && o + 4 < cap; p++) {
            if (*p == ' ' || *p == ';' || *p == '%') o += (size_t)snprintf(out + o, cap - o, "%%%02X", (unsigned char)*p);
            else out[o++] = *p;
        }
        out[o] = '\0';
    }
    if (o == 0) snprintf(out, cap, "-");
}
