/* tls: the OpenSSL server context and the TLS transport's operations. */
#include "tls.h"

#include <errno.h>
#include <limits.h>
#include <openssl/err.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "conn.h"
#include "mem.h"
#include "monotime.h"
#include "net.h"
#include "response.h"
#include "tlsmem.h"

/* A connection's TLS state (conn.xp). */
typedef struct {
    SSL *ssl;
    uint64_t t0_ns;     /* when its loop took it, for the handshake histogram (0 under --metrics off) */
    uint32_t hs_want;   /* what the handshake waits for: EPOLLIN or EPOLLOUT */
    bool saw_first;     /* its first byte was a TLS handshake record's */
    bool read_wants_out, write_wants_in; /* the last SSL_read needs the socket writable, SSL_write readable */
    bool established;   /* the handshake ended */
    bool broken;        /* a fatal error or the peer gone: no close_notify (OpenSSL forbids it) */
} tls_conn;

static SSL_CTX *server_ctx;
static uint8_t *not_tls_frame; /* the plaintext seq-0 answer to a client that did not start a handshake */
static size_t not_tls_len;

/* ---------------- the context ---------------- */

/* "<flag> <file>: <what> (<OpenSSL's library: reason>)", from the oldest error OpenSSL queued (the cause). */
static void load_error(char *err, size_t errlen, const char *flag, const char *file, const char *what) {
    unsigned long e = ERR_peek_error();
    const char *lib = ERR_lib_error_string(e), *reason = ERR_reason_error_string(e);
    snprintf(err, errlen, "%s %s: %s (%s: %s)", flag, file, what, lib ? lib : "OpenSSL", reason ? reason : "unknown");
    ERR_clear_error();
}

/* The certificate chain and its key, which must match. -1 with err. */
static int load_pair(SSL_CTX *ctx, const tls_settings *ts, char *err, size_t errlen) {
    if (SSL_CTX_use_certificate_chain_file(ctx, ts->cert) != 1) {
        load_error(err, errlen, "--tls-cert", ts->cert, "cannot load a PEM certificate chain");
        return -1;
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, ts->key, SSL_FILETYPE_PEM) != 1) {
        unsigned long e = ERR_peek_last_error(); /* loading a key checks it against the certificate already */
        bool other = ERR_GET_LIB(e) == ERR_LIB_X509 && ERR_GET_REASON(e) == X509_R_KEY_VALUES_MISMATCH;
        load_error(err, errlen, "--tls-key", ts->key,
                   other ? "does not match the certificate of --tls-cert" : "cannot load a PEM private key");
        return -1;
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
        load_error(err, errlen, "--tls-key", ts->key, "does not match the certificate of --tls-cert");
        return -1;
    }
    return 0;
}

SSL_CTX *tls_ctx_new(const tls_settings *ts, char *err, size_t errlen) {
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx) {
        snprintf(err, errlen, "OpenSSL: cannot create a server context");
        return NULL;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    /* TLS 1.2 renegotiation is refused (1.3 has none); partial writes let the loop hand SSL_write what it has
     * and learn how much went, and the buffer it retries with after WANT_WRITE may move (it is rebuilt) */
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    if (ts->tickets) {
        SSL_CTX_set_session_id_context(ctx, (const unsigned char *)"xferd-c", 7);
    } else { /* no resumption at all: neither tickets (1.2 and 1.3) nor the session-id cache */
        SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
        SSL_CTX_set_num_tickets(ctx, 0);
        SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    }
    if (load_pair(ctx, ts, err, errlen) != 0) {
        SSL_CTX_free(ctx);
        return NULL;
    }
    return ctx;
}

int tls_setup(const tls_settings *ts, char *err, size_t errlen) {
    if (tlsmem_install() != 0) {
        snprintf(err, errlen, "OpenSSL allocated memory before its allocator could be set");
        return -1;
    }
    /* no atexit handler: tls_teardown cleans up while the allocator layer still stands */
    if (!OPENSSL_init_ssl(OPENSSL_INIT_NO_ATEXIT | OPENSSL_INIT_LOAD_SSL_STRINGS, NULL)) {
        snprintf(err, errlen, "OpenSSL did not initialise");
        return -1;
    }
    if (!(server_ctx = tls_ctx_new(ts, err, errlen))) return -1;
    if (!(not_tls_frame = encode_error_frame("", 0, TLS_NOT_TLS_ERROR, &not_tls_len))) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    return 0;
}

const char *tls_library_version(void) { return OpenSSL_version(OPENSSL_VERSION_STRING); }

void tls_teardown(void) {
    SSL_CTX_free(server_ctx);
    server_ctx = NULL;
    mem_free(not_tls_frame);
    not_tls_frame = NULL;
    OPENSSL_cleanup();
    tlsmem_shutdown();
}

tls_fail_reason tls_classify(int ssl_error, unsigned long err, int sys_errno) {
    (void)sys_errno; /* a reset (ECONNRESET) and an end of stream (0) are both the client gone */
    if (ssl_error == SSL_ERROR_SYSCALL || ssl_error == SSL_ERROR_ZERO_RETURN) return TLS_FAIL_EOF;
    if (ssl_error != SSL_ERROR_SSL) return TLS_FAIL_INTERNAL;
    int reason = ERR_GET_REASON(err);
    if (ERR_GET_LIB(err) == ERR_LIB_SSL) {
        if (reason == SSL_R_UNEXPECTED_EOF_WHILE_READING) return TLS_FAIL_EOF;
        /* an alert received is reported as its code plus this offset (SSL_R_TLSV1_ALERT_UNKNOWN_CA, ...) */
        if (reason >= SSL_AD_REASON_OFFSET && reason < SSL_AD_REASON_OFFSET + 256) return TLS_FAIL_CLIENT_ALERT;
    }
    if (reason == ERR_R_MALLOC_FAILURE) return TLS_FAIL_INTERNAL;
    return TLS_FAIL_PROTOCOL;
}

/* ---------------- a connection ---------------- */

static int tls_open(conn *c) {
    tls_conn *t = mem_calloc(1, sizeof *t);
    SSL *ssl = t ? SSL_new(server_ctx) : NULL;
    if (!ssl || SSL_set_fd(ssl, c->fd) != 1) {
        SSL_free(ssl);
        mem_free(t);
        ERR_clear_error();
        tlsstats_handshake_failed(TLS_FAIL_INTERNAL);
        return -1;
    }
    SSL_set_accept_state(ssl);
    t->ssl = ssl;
    t->hs_want = EPOLLIN; /* the ClientHello */
    t->t0_ns = stats_enabled ? monotime_ns() : 0;
    c->xp = t;
    return 0;
}

static xport_hs hs_failed(tls_conn *t, tls_fail_reason why) {
    t->broken = true;
    ERR_clear_error();
    tlsstats_handshake_failed(why);
    return XPORT_HS_FAILED;
}

/* The first byte, peeked: a TLS client's is a handshake record's. Anything else is not given to OpenSSL (whose
 * answer, an alert record, a frame client would misread as an 8 MiB frame): one plaintext connection error says
 * what went wrong, then the connection closes. */
static xport_hs check_first_byte(conn *c, tls_conn *t) {
    uint8_t b;
    ssize_t n = recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return XPORT_HS_AGAIN;
    if (n <= 0) return hs_failed(t, TLS_FAIL_EOF);
    if (b == TLS_RECORD_HANDSHAKE) {
        t->saw_first = true;
        return XPORT_HS_DONE;
    }
    xport_hs failed = hs_failed(t, TLS_FAIL_NOT_TLS); /* counted before the answer: a client that has it and
                                                        * reads /metrics finds the failure there */
    ssize_t w = send(c->fd, not_tls_frame, not_tls_len, MSG_DONTWAIT | MSG_NOSIGNAL);
    (void)w; /* best effort: the connection closes either way */
    net_half_close(c->fd); /* what it sent is dropped, so the close does not reset the answer away */
    return failed;
}

static xport_hs tls_handshake(conn *c) {
    tls_conn *t = c->xp;
    if (!t->saw_first) {
        xport_hs first = check_first_byte(c, t);
        if (first != XPORT_HS_DONE) return first;
    }
    ERR_clear_error();
    int r = SSL_do_handshake(t->ssl);
    int saved = errno;
    if (r == 1) {
        t->established = true;
        tlsstats_handshake_done(t->t0_ns ? monotime_ns() - t->t0_ns : 0, SSL_session_reused(t->ssl) == 1);
        return XPORT_HS_DONE;
    }
    int e = SSL_get_error(t->ssl, r);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        t->hs_want = e == SSL_ERROR_WANT_READ ? EPOLLIN : EPOLLOUT;
        return XPORT_HS_AGAIN;
    }
    return hs_failed(t, tls_classify(e, ERR_peek_last_error(), saved));
}

static void tls_handshake_expired(conn *c) {
    tls_conn *t = c->xp;
    if (t) t->broken = true; /* a handshake cut short ends without close_notify */
    tlsstats_handshake_failed(TLS_FAIL_TIMEOUT);
}

/* A fatal SSL_read or SSL_write: no close_notify later. An end of stream without one (a client that just
 * closes) reads as plaintext's end of stream; anything else is a broken connection (-1, errno). */
static ssize_t tls_broken(tls_conn *t, int ssl_error, int saved, bool reading) {
    unsigned long e = ERR_peek_last_error();
    t->broken = true;
    ERR_clear_error();
    if (reading && tls_classify(ssl_error, e, saved) == TLS_FAIL_EOF && saved != ECONNRESET) return 0;
    errno = saved && ssl_error == SSL_ERROR_SYSCALL ? saved : ECONNRESET;
    return -1;
}

static ssize_t tls_read(conn *c, void *buf, size_t len) {
    tls_conn *t = c->xp;
    t->read_wants_out = false;
    ERR_clear_error();
    int n = SSL_read(t->ssl, buf, len > INT_MAX ? INT_MAX : (int)len);
    int saved = errno;
    if (n > 0) return n;
    int e = SSL_get_error(t->ssl, n);
    switch (e) {
    case SSL_ERROR_WANT_WRITE: t->read_wants_out = true; /* fall through */
    case SSL_ERROR_WANT_READ: errno = EAGAIN; return -1;
    case SSL_ERROR_ZERO_RETURN: return 0; /* close_notify: the peer's end of stream */
    default: return tls_broken(t, e, saved, true);
    }
}

/* One SSL_write: the first part alone when it fills a record, else the parts joined up to a record (an answer's
 * header would otherwise go as a record of its own). After WANT_WRITE the queue is unchanged but for answers
 * added at its end, so the retry starts with the same bytes and is no shorter, as OpenSSL requires. */
static ssize_t tls_writev(conn *c, const struct iovec *iov, int n) {
    tls_conn *t = c->xp;
    uint8_t stage[TLS_STAGE_BYTES];
    const void *p = iov[0].iov_base;
    size_t len = iov[0].iov_len;
    if (len < sizeof stage && n > 1) {
        len = 0;
        for (int k = 0; k < n && len < sizeof stage; k++) {
            size_t take = iov[k].iov_len < sizeof stage - len ? iov[k].iov_len : sizeof stage - len;
            memcpy(stage + len, iov[k].iov_base, take);
            len += take;
        }
        p = stage;
    }
    t->write_wants_in = false;
    ERR_clear_error();
    int w = SSL_write(t->ssl, p, len > INT_MAX ? INT_MAX : (int)len);
    int saved = errno;
    if (w > 0) return w;
    int e = SSL_get_error(t->ssl, w);
    switch (e) {
    case SSL_ERROR_WANT_READ: t->write_wants_in = true; /* fall through */
    case SSL_ERROR_WANT_WRITE: errno = EAGAIN; return -1;
    default: return tls_broken(t, e, saved, false);
    }
}

static uint32_t tls_interest(const conn *c, uint32_t want) {
    const tls_conn *t = c->xp;
    if (!t) return want; /* closing: nothing of TLS left to wait for */
    if (c->handshaking) return t->hs_want == EPOLLOUT ? EPOLLOUT : EPOLLIN | EPOLLRDHUP;
    uint32_t ev = 0;
    if (want & EPOLLIN) ev |= t->read_wants_out ? EPOLLOUT : EPOLLIN | EPOLLRDHUP;
    if (want & EPOLLOUT) ev |= t->write_wants_in ? EPOLLIN : EPOLLOUT;
    return ev;
}

static uint32_t tls_ready(const conn *c, uint32_t events) {
    const tls_conn *t = c->xp;
    if (!t) return events;
    uint32_t can = events;
    if ((events & EPOLLIN) && t->write_wants_in) can |= EPOLLOUT;
    if ((events & EPOLLOUT) && t->read_wants_out) can |= EPOLLIN;
    return can;
}

/* Decrypted bytes of a record read in part (SSL_pending, not SSL_has_pending: the undecrypted part of a
 * record is still in the kernel too, and epoll reports it). */
static bool tls_buffered(const conn *c) {
    const tls_conn *t = c->xp;
    return t && !c->handshaking && SSL_pending(t->ssl) > 0;
}

/* Undecrypted bytes of a record OpenSSL has begun to read (with read-ahead off it holds no more than one). */
static bool tls_partial(const conn *c) {
    const tls_conn *t = c->xp;
    return t && !c->handshaking && SSL_has_pending(t->ssl) && SSL_pending(t->ssl) == 0;
}

/* close_notify once, without waiting for the client's; then the session is freed. Called again after the
 * first time (conn_finish, then conn_close), it does nothing. */
static void tls_close(conn *c) {
    tls_conn *t = c->xp;
    if (!t) return;
    if (t->established && !t->broken) {
        ERR_clear_error();
        SSL_shutdown(t->ssl); /* non-blocking: it writes what the socket takes, never waits */
    }
    if (t->established) tlsstats_closed();
    SSL_free(t->ssl);
    ERR_clear_error();
    mem_free(t);
    c->xp = NULL;
}

static const transport transport_tls = {
    .listener = LISTENER_TLS,
    .open = tls_open,
    .handshake = tls_handshake,
    .handshake_expired = tls_handshake_expired,
    .read = tls_read,
    .writev = tls_writev,
    .interest = tls_interest,
    .ready = tls_ready,
    .buffered = tls_buffered,
    .partial = tls_partial,
    .close = tls_close,
    .peekable = false,
};

const transport *tls_transport(void) { return &transport_tls; }
