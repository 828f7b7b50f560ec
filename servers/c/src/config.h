/* config: flags and their XFERD_<FLAG> environment equivalents (the command line wins). */
#ifndef XFERD_CONFIG_H
#define XFERD_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "store.h"

#define CONFIG_ADDR_MAX 128

typedef struct {
    char frame_addr[CONFIG_ADDR_MAX];
    char metrics_addr[CONFIG_ADDR_MAX];
    char store_spec[STORE_PATH_MAX + 8]; /* "mem" or "disk:DIR" */
    store_kind store;
    char store_dir[STORE_PATH_MAX];
    uint64_t max_file_size;
    uint32_t max_frame;
    uint32_t max_chunk;
    uint32_t max_conns; /* CONFIG_CONNS_AUTO: from RLIMIT_NOFILE, resolved by main */
    uint32_t max_uploads;
    uint32_t max_uploads_per_conn;
    uint64_t max_staged_bytes;
    uint32_t min_chunk;
    uint64_t read_timeout_ms;
    uint64_t upload_idle_timeout_ms;
    uint32_t io_threads;
    uint32_t workers;
    uint32_t max_conn_calls;
    uint64_t max_conn_unsent;
    uint64_t write_timeout_ms;
    uint64_t drain_timeout_ms;
    uint32_t max_meta_entries;
    char tls_frame_addr[CONFIG_ADDR_MAX]; /* "": no TLS listener */
    char tls_cert[STORE_PATH_MAX];         /* PEM: the server's certificate, then any intermediates */
    char tls_key[STORE_PATH_MAX];          /* PEM: its private key */
    char tls_tickets[8];                   /* on | off: session tickets (resumption) */
    uint64_t tls_handshake_timeout_ms;
    char alloc[16]; /* glibc | jemalloc | tcmalloc | mimalloc | pool */
    char metrics[8]; /* on | off: per-call instrumentation (counters, histograms, allocation counts) */
    uint32_t alloc_sample; /* time 1 allocation in this many (0: none) */
    uint64_t given;        /* bit i: the i-th flag was set, by the environment or the command line */
} config;

#define CONFIG_MAX_THREADS 64
#define CONFIG_CONNS_AUTO 0 /* --max-conns auto */

#define CONFIG_HELP 1    /* config_parse printed the help */
#define CONFIG_VERSION 2 /* --version: the caller prints the version */

/* Fills cfg from defaults, then env, then argv. Returns 0; on a bad flag or value writes the message
 * into err and returns -1 (exit status 2). Returns CONFIG_HELP for --help (printed to stdout) and
 * CONFIG_VERSION for --version. */
int config_parse(config *cfg, int argc, char **argv, char *err, size_t errlen);

/* The size grammar of docs/DESIGN.md (proto/testdata/size.vectors): plain bytes, or a whole number
 * with KiB, MiB or GiB; at most limit. Returns 0 and sets *out, or -1. */
int config_parse_size(const char *s, uint64_t limit, uint64_t *out);

/* The duration grammar of docs/DESIGN.md (proto/testdata/duration.vectors): one or more terms <number><unit>,
 * units h, m, s, ms, us each at most once and in that order ("1m30s"), or a bare number of seconds ("15"); a
 * number may have a point and up to nine digits after it. Sets *us (whole microseconds, at most 2^63-1 ns) and
 * returns 0; -1 when s is not a duration, -2 when it is too large. */
int config_parse_duration(const char *s, uint64_t *us);

/* Writes a duration of ms milliseconds as the flags take it, in whole seconds when it is ("10s", "1500ms"). */
void config_format_ms(char *out, size_t cap, uint64_t ms);

#endif
