/* allocmetrics: unit tests of the allocator layer's own figures (allocstat.h, pool.h): the sampled latency
 * histogram's count, failed allocations, the pool's cross-thread frees, each exact in a deterministic run. */
#ifndef XFERD_TEST_ALLOCMETRICS_H
#define XFERD_TEST_ALLOCMETRICS_H

/* Runs every test; adds its checks to *checks and returns its failures. Leaves the layer in MEM_SYSTEM
 * mode with sampling off. */
int allocmetrics_run(int *checks);

#endif
