/* tls: the frame transport over TLS with OpenSSL, inside the event loops (transport.h's TLS side). One server
 * context (TLS 1.2 and 1.3; renegotiation refused; session tickets on or off) built at start from PEM files;
 * per connection an SSL object on the non-blocking socket: SSL_do_handshake driven by the loop, its
 * WANT_READ/WANT_WRITE turned into epoll interest, then SSL_read/SSL_write under the frame code, with a read
 * that waits for the socket to be writable (or a write for it to be readable) handled as such, and
 * close_notify sent at close without waiting for an answer. A first byte that is not a TLS handshake record (a
 * plaintext frame, garbage) is answered with one plaintext seq-0 frame error and closed, never handed to
 * OpenSSL. The handshake's deadline and the connection limits are conn's and server's, as for any connection.
 * Every handshake is counted in tlsstats.h; OpenSSL's memory comes from the allocator layer (tlsmem.h). */
#ifndef XFERD_TLS_H
#define XFERD_TLS_H

#include <openssl/ssl.h>
#include <stdbool.h>
#include <stddef.h>

#include "tlsstats.h"
#include "transport.h"

#define TLS_RECORD_HANDSHAKE 0x16 /* the first byte of every ClientHello: its record's content type */
#define TLS_STAGE_BYTES 16384     /* the largest record's plaintext: small answer parts are joined up to this */
/* xferd-go's words (proto/PROTOCOL.md "TLS"), so a client reads one error from either server */
#define TLS_NOT_TLS_ERROR "invalid_argument: not a TLS handshake: this listener serves the frame protocol over TLS"

typedef struct {
    const char *cert; /* PEM chain, the server's certificate first */
    const char *key;  /* PEM private key */
    bool tickets;     /* session tickets (and the session cache): resumption on */
} tls_settings;

/* Routes OpenSSL's allocations through the allocator layer (first, before OpenSSL allocates), initialises it and
 * builds the server context. -1 with err (naming the flag and file at fault); the process exits 1. */
int tls_setup(const tls_settings *ts, char *err, size_t errlen);

/* The transport of the TLS listener's connections; after tls_setup. */
const transport *tls_transport(void);

/* The server context of ts, on its own (tls_setup keeps one; the unit tests make theirs). NULL with err. */
SSL_CTX *tls_ctx_new(const tls_settings *ts, char *err, size_t errlen);

/* The reason a failed handshake is counted under, from SSL_get_error's answer, the OpenSSL error it left
 * (ERR_peek_last_error) and errno as the handshake left it. */
tls_fail_reason tls_classify(int ssl_error, unsigned long err, int sys_errno);

/* OpenSSL's version, for the ready line ("3.0.19"). */
const char *tls_library_version(void);

/* After every connection closed: frees the context and OpenSSL's own state (OPENSSL_cleanup), so nothing of it
 * outlives the allocator layer. */
void tls_teardown(void);

#endif
