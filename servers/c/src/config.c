/* config: defaults, XFERD_* env, flags. */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allocstat.h"
#include "frame.h"

/* T_SIZE32/T_SIZE64 take bytes with an optional KiB/MiB/GiB suffix; T_CONNS a number or "auto". */
typedef enum { T_STR, T_U32, T_U64, T_DUR, T_SIZE32, T_SIZE64, T_CONNS } ftype;

typedef struct {
    const char *name; /* without "--" */
    const char *arg;  /* what the value looks like, for --help */
    ftype type;
    size_t offset;
    size_t size; /* for strings */
    const char *help;
} flag;

#define F(n, a, t, field, h) {n, a, t, offsetof(config, field), sizeof(((config *)0)->field), h}
static const flag flags[] = {
    F("frame-addr", "HOST:PORT", T_STR, frame_addr, "frame listener (port 0: any free port)"),
    F("tls-frame-addr", "HOST:PORT", T_STR, tls_frame_addr,
      "frame listener over TLS, beside the plaintext one (needs --tls-cert and --tls-key; none: no TLS)"),
    F("tls-cert", "FILE", T_STR, tls_cert, "PEM certificate chain of the TLS listener, the server's own first"),
    F("tls-key", "FILE", T_STR, tls_key, "PEM private key of --tls-cert"),
    F("tls-tickets", "on|off", T_STR, tls_tickets, "TLS session tickets, so clients can resume (off: no resumption)"),
    F("tls-handshake-timeout", "DURATION", T_DUR, tls_handshake_timeout_ms,
      "a TLS handshake must end within this from the connection's accept"),
    F("metrics-addr", "HOST:PORT", T_STR, metrics_addr, "/metrics listener"),
    F("store", "mem|disk:DIR", T_STR, store_spec, "file store, in memory or in a directory"),
    F("alloc", "NAME", T_STR, alloc, "allocator: glibc, jemalloc, tcmalloc, mimalloc or pool"),
    F("metrics", "on|off", T_STR, metrics,
      "per-call instrumentation; off: no counter or histogram is touched on the request path, and /metrics "
      "keeps only the gauges read at scrape time (xfer_instrumentation_enabled 0)"),
    F("alloc-sample", "N", T_U32, alloc_sample,
      "time one allocation in N per thread into xfer_alloc_duration_seconds (0: none; nothing is timed under "
      "--metrics off)"),
    F("io-threads", "N", T_U32, io_threads, "event-loop threads"),
    F("workers", "N", T_U32, workers, "worker threads executing calls"),
    F("max-file-size", "SIZE", T_SIZE64, max_file_size, "largest declared file size"),
    F("max-frame", "SIZE", T_SIZE32, max_frame, "largest frame_len"),
    F("max-chunk", "SIZE", T_SIZE32, max_chunk, "largest chunk, Read length and Echo payload"),
    F("min-chunk", "SIZE", T_SIZE32, min_chunk, "smallest upload chunk unless one chunk holds the file"),
    F("max-conns", "N|auto", T_CONNS, max_conns, "open connections (auto: from RLIMIT_NOFILE)"),
    F("max-conn-calls", "N", T_U32, max_conn_calls, "outstanding calls per connection before reading pauses"),
    F("max-conn-unsent", "SIZE", T_SIZE64, max_conn_unsent, "unwritten response bytes per connection before reading pauses"),
    F("max-uploads", "N", T_U32, max_uploads, "open uploads, server-wide"),
    F("max-uploads-per-conn", "N", T_U32, max_uploads_per_conn, "open uploads begun on one connection"),
    F("max-staged-bytes", "SIZE", T_SIZE64, max_staged_bytes, "declared sizes of all open uploads"),
    F("read-timeout", "DURATION", T_DUR, read_timeout_ms, "a begun frame must arrive whole within this"),
    F("write-timeout", "DURATION", T_DUR, write_timeout_ms, "a response the client does not take for this long closes it"),
    F("upload-idle-timeout", "DURATION", T_DUR, upload_idle_timeout_ms, "an upload with no call for this long is aborted"),
    F("drain-timeout", "DURATION", T_DUR, drain_timeout_ms, "calls in flight at SIGTERM finish within this"),
    F("max-meta-entries", "N", T_U32, max_meta_entries, "entries of one Meta call"),
};
#define NFLAGS (sizeof flags / sizeof flags[0])
_Static_assert(NFLAGS <= 64, "config.given has a bit per flag");

static int parse_u64(const char *s, uint64_t *out) {
    if (!*s || !isdigit((unsigned char)*s)) return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end) return -1;
    *out = v;
    return 0;
}

int config_parse_size(const char *s, uint64_t limit, uint64_t *out) {
    static const struct {
        const char *suffix;
        unsigned shift;
    } units[] = {{"KiB", 10}, {"MiB", 20}, {"GiB", 30}};
    char num[32];
    size_t n = strlen(s);
    unsigned shift = 0;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        size_t k = strlen(units[i].suffix);
        if (n > k && strcmp(s + n - k, units[i].suffix) == 0) {
            shift = units[i].shift;
            n -= k;
            break;
        }
    }
    if (n >= sizeof num) return -1;
    memcpy(num, s, n);
    num[n] = '\0';
    uint64_t v;
    if (parse_u64(num, &v) || v > (limit >> shift)) return -1;
    *out = v << shift;
    return 0;
}

#define DUR_HELP                                                                                                     \
    "a number with h, m, s, ms or us, or several in that order (500ms, 10s, 2m, 1m30s, 1.5s); a bare number is "     \
    "seconds (15)"
#define DUR_MAX_US ((uint64_t)INT64_MAX / 1000u) /* whole microseconds that fit 64-bit signed nanoseconds */
#define DUR_MAX_TEXT "2562047h47m16.854775s"
#define DUR_MAX_FRACTION 9 /* digits after a number's point */

static int is_digit(char c) { return c >= '0' && c <= '9'; }

int config_parse_duration(const char *s, uint64_t *us) {
    /* the units in the order terms must come, in microseconds */
    static const struct {
        const char *name;
        uint64_t us;
    } units[] = {{"h", 3600000000ull}, {"m", 60000000ull}, {"s", 1000000ull}, {"ms", 1000ull}, {"us", 1ull}};
    enum { NUNITS = sizeof units / sizeof units[0], SECONDS = 2 };
    if (!*s) return -1;
    uint64_t total = 0;
    int last = -1, over = 0;
    for (const char *p = s; *p;) {
        const char *w = p, *f = NULL, *fe = NULL;
        while (is_digit(*p)) p++;
        if (p == w) return -1;
        const char *we = p;
        if (*p == '.') {
            f = ++p;
            while (is_digit(*p)) p++;
            fe = p;
            if (fe == f || fe - f > DUR_MAX_FRACTION) return -1;
        }
        const char *u = p;
        while (*p && !is_digit(*p) && *p != '.') p++;
        size_t ul = (size_t)(p - u);
        int rank = -1;
        if (ul == 0) {
            if (w != s || *p) return -1; /* a bare number is the whole duration: "1m30" is not one */
            rank = SECONDS;
        } else {
            for (int r = 0; r < (int)NUNITS; r++)
                if (strlen(units[r].name) == ul && strncmp(units[r].name, u, ul) == 0) rank = r;
            if (rank <= last) return -1; /* unknown, repeated or out of order */
        }
        last = rank;
        uint64_t unit = units[rank].us, whole = 0;
        for (const char *q = w; q < we && whole <= DUR_MAX_US; q++) whole = whole * 10 + (uint64_t)(*q - '0');
        if (whole > DUR_MAX_US / unit) {
            over = 1;
            continue;
        }
        uint64_t term = whole * unit;
        if (f) {
            uint64_t frac = 0, pow = 1;
            for (const char *q = f; q < fe; q++) {
                frac = frac * 10 + (uint64_t)(*q - '0');
                pow *= 10;
            }
            if (frac * unit % pow) return -1; /* not whole microseconds; frac * unit < 10^9 * 3.6e9 fits */
            term += frac * unit / pow;
        }
        total += term;
        if (total > DUR_MAX_US) over = 1;
    }
    if (over) return -2;
    *us = total;
    return 0;
}

/* The message for a value flag f does not take: "<origin> <flag>: <value> <what is wrong>". */
static int bad_value(char *err, size_t errlen, const char *origin, const flag *f, const char *val, const char *why) {
    snprintf(err, errlen, "%s %s: %s %s", origin, f->name, val, why);
    return -1;
}

/* A duration flag's value in whole milliseconds into *ms: NULL, or what is wrong with it. */
static const char *duration_ms(const char *val, uint64_t *ms) {
    uint64_t us;
    int rc = config_parse_duration(val, &us);
    if (rc == -1) return "is not a duration: want " DUR_HELP;
    if (rc) return "exceeds the largest duration, " DUR_MAX_TEXT;
    if (us % 1000) return "is not whole milliseconds (xferd-c counts its timeouts in ms)";
    *ms = us / 1000;
    return NULL;
}

static int set_flag(config *cfg, const flag *f, const char *val, const char *origin, char *err, size_t errlen) {
    char *at = (char *)cfg + f->offset;
    cfg->given |= 1ull << (f - flags);
    uint64_t v;
    const char *why;
    switch (f->type) {
    case T_STR:
        if (strlen(val) >= f->size) {
            snprintf(err, errlen, "%s %s: value too long", origin, f->name);
            return -1;
        }
        strcpy(at, val);
        return 0;
    case T_U32:
        if (parse_u64(val, &v) || v > UINT32_MAX)
            return bad_value(err, errlen, origin, f, val, "is not an unsigned 32-bit integer");
        *(uint32_t *)at = (uint32_t)v;
        return 0;
    case T_U64:
        if (parse_u64(val, &v)) return bad_value(err, errlen, origin, f, val, "is not an unsigned integer");
        *(uint64_t *)at = v;
        return 0;
    case T_SIZE32:
    case T_SIZE64:
        if (config_parse_size(val, f->type == T_SIZE32 ? UINT32_MAX : UINT64_MAX, &v))
            return bad_value(err, errlen, origin, f, val, "is not a size (bytes, or a number with KiB, MiB or GiB)");
        if (f->type == T_SIZE32) *(uint32_t *)at = (uint32_t)v;
        else *(uint64_t *)at = v;
        return 0;
    case T_CONNS:
        if (strcmp(val, "auto") == 0) v = CONFIG_CONNS_AUTO;
        else if (parse_u64(val, &v) || v < 1 || v > UINT32_MAX)
            return bad_value(err, errlen, origin, f, val, "is not auto or a positive integer");
        *(uint32_t *)at = (uint32_t)v;
        return 0;
    case T_DUR:
        if ((why = duration_ms(val, &v)) != NULL) return bad_value(err, errlen, origin, f, val, why);
        *(uint64_t *)at = v;
        return 0;
    }
    return -1;
}

/* The defaults of PROTOCOL.md's limit table and of docs/DESIGN.md's ports. */
static void config_defaults(config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    strcpy(cfg->frame_addr, "127.0.0.1:7071");
    strcpy(cfg->metrics_addr, "127.0.0.1:9102");
    strcpy(cfg->store_spec, "mem");
    cfg->max_file_size = 1ull << 30;
    cfg->max_frame = FRAME_DEFAULT_MAX;
    cfg->max_chunk = 4u << 20;
    cfg->max_conns = CONFIG_CONNS_AUTO;
    cfg->max_conn_calls = 256;
    cfg->max_conn_unsent = 32u << 20;
    cfg->write_timeout_ms = 10000;
    cfg->drain_timeout_ms = 5000;
    cfg->max_meta_entries = 1024;
    cfg->max_uploads = 1024;
    cfg->max_uploads_per_conn = 64;
    cfg->max_staged_bytes = 4ull << 30;
    cfg->min_chunk = 1024;
    cfg->read_timeout_ms = 10000;
    cfg->upload_idle_timeout_ms = 60000;
    cfg->io_threads = 2;
    cfg->workers = 2;
    strcpy(cfg->tls_tickets, "on");
    cfg->tls_handshake_timeout_ms = 10000;
    strcpy(cfg->alloc, "glibc");
    strcpy(cfg->metrics, "on");
    cfg->alloc_sample = ALLOCSTAT_DEFAULT_SAMPLE;
}

/* The flag's environment variable: XFERD_ and the name in upper case, '-' as '_'. */
static void env_name(const flag *f, char *out, size_t cap) {
    size_t k = (size_t)snprintf(out, cap, "XFERD_");
    for (const char *p = f->name; *p && k + 1 < cap; p++) out[k++] = *p == '-' ? '_' : (char)toupper((unsigned char)*p);
    out[k] = '\0';
}

void config_format_ms(char *out, size_t cap, uint64_t ms) {
    if (ms % 1000 == 0) snprintf(out, cap, "%llus", (unsigned long long)(ms / 1000));
    else snprintf(out, cap, "%llums", (unsigned long long)ms);
}

/* A flag's value in cfg, written as the flag takes it. */
static void format_value(const config *cfg, const flag *f, char *out, size_t cap) {
    const char *at = (const char *)cfg + f->offset;
    switch (f->type) {
    case T_STR: snprintf(out, cap, "%s", *at ? at : "none"); return;
    case T_U32:
    case T_SIZE32: snprintf(out, cap, "%u", (unsigned)*(const uint32_t *)at); return;
    case T_U64:
    case T_SIZE64: snprintf(out, cap, "%llu", (unsigned long long)*(const uint64_t *)at); return;
    case T_CONNS:
        if (*(const uint32_t *)at == CONFIG_CONNS_AUTO) snprintf(out, cap, "auto");
        else snprintf(out, cap, "%u", (unsigned)*(const uint32_t *)at);
        return;
    case T_DUR: config_format_ms(out, cap, *(const uint64_t *)at); return;
    }
}

static void usage(void) {
    config d;
    config_defaults(&d);
    printf("usage: xferd-c [flags]\n\n"
           "The C file-transfer server of xferbench: the frame protocol over epoll, with a switchable allocator\n"
           "(proto/PROTOCOL.md, servers/c/README.md).\n\n"
           "Every flag can also be set by the environment variable named beside it; the command line wins.\n"
           "Sizes: bytes, or a whole number with KiB, MiB or GiB (65536, 64KiB, 4MiB).\n"
           "Durations: " DUR_HELP ".\n"
           "Allocator tunables (MALLOC_*, GLIBC_TUNABLES, TCMALLOC_*, MIMALLOC_*) pass through to the allocator.\n"
           "XFERD_C_PRELOAD_LIB=PATH replaces the library --alloc preloads (a test hook); XFERD_C_PRELOADED is\n"
           "set by xferd-c itself when it re-executes with the allocator preloaded.\n\n");
    for (size_t i = 0; i < NFLAGS; i++) {
        char env[64], def[STORE_PATH_MAX + 8];
        env_name(&flags[i], env, sizeof env);
        format_value(&d, &flags[i], def, sizeof def);
        printf("  --%s %s   [env %s]\n        %s (default %s)\n", flags[i].name, flags[i].arg, env, flags[i].help, def);
    }
    printf("  --version\n        print the version and exit\n  -h, --help\n        print this help and exit\n");
}

/* The XFERD_<FLAG> variables set in the environment. */
static int apply_env(config *cfg, char *err, size_t errlen) {
    for (size_t i = 0; i < NFLAGS; i++) {
        char env[64];
        env_name(&flags[i], env, sizeof env);
        const char *v = getenv(env);
        if (v && set_flag(cfg, &flags[i], v, env, err, errlen)) return -1;
    }
    return 0;
}

/* The flag named by name[0..nl), or NULL. */
static const flag *find_flag(const char *name, size_t nl) {
    const flag *f = NULL;
    for (size_t i = 0; i < NFLAGS; i++)
        if (strlen(flags[i].name) == nl && strncmp(flags[i].name, name, nl) == 0) f = &flags[i];
    return f;
}

/* The command line: --flag value or --flag=value, --help, --version. 0, -1 with err, CONFIG_HELP (printed)
 * or CONFIG_VERSION. */
static int apply_args(config *cfg, int argc, char **argv, char *err, size_t errlen) {
    for (int a = 1; a < argc; a++) {
        const char *arg = argv[a];
        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
            usage();
            return CONFIG_HELP;
        }
        if (strcmp(arg, "--version") == 0) return CONFIG_VERSION;
        if (strncmp(arg, "--", 2) != 0) {
            snprintf(err, errlen, "unexpected argument %s", arg);
            return -1;
        }
        const char *name = arg + 2, *eq = strchr(name, '=');
        size_t nl = eq ? (size_t)(eq - name) : strlen(name);
        const flag *f = find_flag(name, nl);
        if (!f) {
            snprintf(err, errlen, "unknown flag %.*s", (int)nl + 2, arg);
            return -1;
        }
        const char *val = eq ? eq + 1 : (a + 1 < argc ? argv[++a] : NULL);
        if (!val) {
            snprintf(err, errlen, "flag --%s needs a value", f->name);
            return -1;
        }
        if (set_flag(cfg, f, val, "flag", err, errlen)) return -1;
    }
    return 0;
}

/* --store: mem, or disk:DIR. */
static int derive_store(config *cfg, char *err, size_t errlen) {
    if (strcmp(cfg->store_spec, "mem") == 0) {
        cfg->store = STORE_MEM;
    } else if (strncmp(cfg->store_spec, "disk:", 5) == 0 && cfg->store_spec[5]) {
        cfg->store = STORE_DISK;
        snprintf(cfg->store_dir, sizeof cfg->store_dir, "%s", cfg->store_spec + 5);
    } else {
        snprintf(err, errlen, "--store %s: want mem or disk:DIR", cfg->store_spec);
        return -1;
    }
    return 0;
}

/* --alloc, --metrics and --alloc-sample: one of their values. */
static int check_choices(const config *cfg, char *err, size_t errlen) {
    const char *allocs[] = {"glibc", "jemalloc", "tcmalloc", "mimalloc", "pool"};
    int ok = 0;
    for (size_t i = 0; i < 5; i++) ok |= strcmp(cfg->alloc, allocs[i]) == 0;
    if (!ok) {
        snprintf(err, errlen, "--alloc %s: want glibc, jemalloc, tcmalloc, mimalloc or pool", cfg->alloc);
        return -1;
    }
    if (strcmp(cfg->metrics, "on") != 0 && strcmp(cfg->metrics, "off") != 0) {
        snprintf(err, errlen, "--metrics %s (XFERD_METRICS): want on or off", cfg->metrics);
        return -1;
    }
    if (cfg->alloc_sample > ALLOCSTAT_MAX_SAMPLE) {
        snprintf(err, errlen, "--alloc-sample %u: want 0 ... %u", (unsigned)cfg->alloc_sample, ALLOCSTAT_MAX_SAMPLE);
        return -1;
    }
    return 0;
}

/* A setting of the TLS listener (not its address). */
static bool is_tls_setting(const flag *f) {
    return strncmp(f->name, "tls-", 4) == 0 && strcmp(f->name, "tls-frame-addr") != 0;
}

/* The TLS listener's flags: its address with a certificate and key, or no setting of it at all. */
static int check_tls(const config *cfg, char *err, size_t errlen) {
    if (strcmp(cfg->tls_tickets, "on") != 0 && strcmp(cfg->tls_tickets, "off") != 0) {
        snprintf(err, errlen, "--tls-tickets %s (XFERD_TLS_TICKETS): want on or off", cfg->tls_tickets);
        return -1;
    }
    if (cfg->tls_frame_addr[0] && !strchr(cfg->tls_frame_addr, ':')) {
        snprintf(err, errlen, "--tls-frame-addr %s (XFERD_TLS_FRAME_ADDR): want HOST:PORT", cfg->tls_frame_addr);
        return -1;
    }
    if (cfg->tls_frame_addr[0] && (!cfg->tls_cert[0] || !cfg->tls_key[0])) {
        snprintf(err, errlen, "--tls-frame-addr %s needs --tls-cert and --tls-key (XFERD_TLS_CERT, XFERD_TLS_KEY)",
                 cfg->tls_frame_addr);
        return -1;
    }
    for (size_t i = 0; i < NFLAGS && !cfg->tls_frame_addr[0]; i++) /* unused, they would mislead */
        if ((cfg->given >> i & 1) && is_tls_setting(&flags[i])) {
            snprintf(err, errlen,
                     "--%s given without --tls-frame-addr (XFERD_TLS_FRAME_ADDR): no listener would use it",
                     flags[i].name);
            return -1;
        }
    if (cfg->tls_handshake_timeout_ms < 1) {
        snprintf(err, errlen, "--tls-handshake-timeout must be positive");
        return -1;
    }
    return 0;
}

/* Thread counts, limits and timeouts within their ranges. */
static int check_ranges(const config *cfg, char *err, size_t errlen) {
    if (cfg->io_threads < 1 || cfg->io_threads > CONFIG_MAX_THREADS || cfg->workers < 1 ||
        cfg->workers > CONFIG_MAX_THREADS) {
        snprintf(err, errlen, "--io-threads and --workers must be 1 ... %d", CONFIG_MAX_THREADS);
        return -1;
    }
    if (cfg->max_frame < 64 || cfg->max_chunk < 1 || cfg->max_uploads < 1 || cfg->max_conn_calls < 1 ||
        cfg->max_conn_unsent < 1) {
        snprintf(err, errlen, "--max-frame must be at least 64; --max-chunk, --max-uploads, --max-conn-calls, "
                              "--max-conn-unsent at least 1");
        return -1;
    }
    if (cfg->max_uploads_per_conn < 1 || cfg->max_staged_bytes < 1 || cfg->min_chunk < 1) {
        snprintf(err, errlen, "--max-uploads-per-conn, --max-staged-bytes and --min-chunk must be at least 1");
        return -1;
    }
    if (cfg->read_timeout_ms < 1 || cfg->upload_idle_timeout_ms < 1 || cfg->write_timeout_ms < 1) {
        snprintf(err, errlen, "timeouts must be positive");
        return -1;
    }
    return 0;
}

int config_parse(config *cfg, int argc, char **argv, char *err, size_t errlen) {
    config_defaults(cfg);
    if (apply_env(cfg, err, errlen) != 0) return -1;
    int rc = apply_args(cfg, argc, argv, err, errlen);
    if (rc != 0) return rc;
    if (derive_store(cfg, err, errlen) != 0 || check_choices(cfg, err, errlen) != 0 ||
        check_ranges(cfg, err, errlen) != 0 || check_tls(cfg, err, errlen) != 0)
        return -1;
    return 0;
}
