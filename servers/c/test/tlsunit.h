/* tlsunit: unit tests of the TLS side (tls.h, tlsmem.h): OpenSSL's allocations through the allocator layer,
 * counted and sized across realloc; the server context as the flags make it, driven in memory against an
 * OpenSSL client (handshake, resumption with tickets on and none with them off, TLS 1.2 renegotiation refused,
 * a TLS 1.1 client refused, a client alert), the reasons failures are counted under, and the load errors that
 * name the flag and file at fault. */
#ifndef XFERD_TEST_TLSUNIT_H
#define XFERD_TEST_TLSUNIT_H

/* Runs every test; adds its checks to *checks and returns its failures. It installs tlsmem (so it must be the
 * first user of OpenSSL in the process) and ends with OPENSSL_cleanup: call it last, in MEM_SYSTEM mode. */
int tlsunit_run(int *checks);

#endif
