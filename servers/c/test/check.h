/* check.h: the unit tests' one assertion. It counts and reports a failure and goes on, so one run lists
 * every failure; each test file keeps its own `static int failures, checks;` for the macro to count in. */
#ifndef XFERD_TEST_CHECK_H
#define XFERD_TEST_CHECK_H

#include <stdio.h>

#define CHECK(cond, ...)                                                    \
    do {                                                                    \
        checks++;                                                           \
        if (!(cond)) {                                                      \
            failures++;                                                     \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                   \
            fputc('\n', stderr);                                            \
        }                                                                   \
    } while (0)

#endif
