/* monotime: the server's one clock, CLOCK_MONOTONIC (a vDSO read, no system call). Latencies, timeouts, the
 * drain deadline, idle uploads and the generated-content cache all read it here, so every deadline compares
 * times from the same clock. Inline: the request path reads it twice per call under --metrics on. */
#ifndef XFERD_MONOTIME_H
#define XFERD_MONOTIME_H

#include <stdint.h>
#include <time.h>

static inline uint64_t monotime_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline uint64_t monotime_ms(void) { return monotime_ns() / 1000000u; }

#endif
