/* edges: unit tests of the protocol's edges (PROTOCOL.md "Request headers", "Quoting", "Integers"):
 * headers.vectors, quote.vectors, the body check and the handlers' answers to those inputs. */
#ifndef XFERD_TEST_EDGES_H
#define XFERD_TEST_EDGES_H

/* Runs every edge test with the vectors of dir; adds its checks to *checks and returns its failures. */
int edges_run(const char *dir, int *checks);

#endif
