/* tlsunit: see tlsunit.h. */
#include "tlsunit.h"

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "tls.h"
#include "tlsmem.h"

static int failures, checks;

#define PUMP_ROUNDS 64 /* handshake steps of both ends; a handshake takes a few */

/* ---------------- OpenSSL's allocations ---------------- */

static void test_tlsmem(void) {
    tlsmem_counts before, mid, after;
    tlsmem_counts_get(&before);
    uint8_t *p = tlsmem_malloc(100, __FILE__, __LINE__);
    CHECK(p && ((uintptr_t)p & 15) == 0, "a block aligned as malloc's");
    for (int i = 0; i < 100; i++) p[i] = (uint8_t)i;
    p = tlsmem_realloc(p, 5000, __FILE__, __LINE__);
    int same = p != NULL;
    for (int i = 0; same && i < 100; i++) same = p[i] == (uint8_t)i;
    CHECK(same, "realloc to a larger size keeps the bytes");
    p = tlsmem_realloc(p, 10, __FILE__, __LINE__);
    CHECK(p && p[9] == 9, "realloc to a smaller size keeps what fits");
    void *q = tlsmem_realloc(NULL, 32, __FILE__, __LINE__);
    CHECK(q != NULL, "realloc of NULL allocates");
    tlsmem_counts_get(&mid);
    CHECK(mid.allocations == before.allocations + 4, "every malloc and realloc counted: %llu",
          (unsigned long long)(mid.allocations - before.allocations));
    CHECK(mid.live_bytes == before.live_bytes + 10 + 32, "live bytes are the sizes held: %lld",
          (long long)(mid.live_bytes - before.live_bytes));
    CHECK(tlsmem_realloc(q, 0, __FILE__, __LINE__) == NULL, "realloc to 0 frees");
    tlsmem_free(p, __FILE__, __LINE__);
    tlsmem_free(NULL, __FILE__, __LINE__);
    tlsmem_counts_get(&after);
    CHECK(after.live_bytes == before.live_bytes, "every byte given back: %lld",
          (long long)(after.live_bytes - before.live_bytes));
}

/* ---------------- certificates ---------------- */

typedef struct {
    char cert[64], key[64];
    X509 *x509;
} cert_files;

/* A self-signed certificate for localhost and its key, written as PEM files. */
static int make_cert(cert_files *cf, long serial) {
    EVP_PKEY *k = EVP_EC_gen("P-256");
    X509 *x = X509_new();
    if (!k || !x) return -1;
    X509_set_version(x, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(x), serial);
    X509_gmtime_adj(X509_getm_notBefore(x), -3600);
    X509_gmtime_adj(X509_getm_notAfter(x), 3600);
    X509_set_pubkey(x, k);
    X509_NAME *name = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)"localhost", -1, -1, 0);
    X509_set_issuer_name(x, name);
    X509_sign(x, k, EVP_sha256());
    snprintf(cf->cert, sizeof cf->cert, "/tmp/xferd-tlsunit-cert-XXXXXX");
    snprintf(cf->key, sizeof cf->key, "/tmp/xferd-tlsunit-key-XXXXXX");
    int cfd = mkstemp(cf->cert), kfd = mkstemp(cf->key);
    FILE *cfp = cfd >= 0 ? fdopen(cfd, "w") : NULL, *kfp = kfd >= 0 ? fdopen(kfd, "w") : NULL;
    int ok = cfp && kfp && PEM_write_X509(cfp, x) && PEM_write_PrivateKey(kfp, k, NULL, NULL, 0, NULL, NULL);
    if (cfp) fclose(cfp);
    if (kfp) fclose(kfp);
    EVP_PKEY_free(k);
    cf->x509 = x;
    return ok ? 0 : -1;
}

static void drop_cert(cert_files *cf) {
    unlink(cf->cert);
    unlink(cf->key);
    X509_free(cf->x509);
}

/* ---------------- a server and a client in memory ---------------- */

typedef struct {
    SSL *srv, *cli;
    int srv_rc, cli_rc; /* the last SSL_do_handshake answers */
} pair;

/* A client of ctx trusting `trusted`, at most TLS version max_version (0: any), resuming sess (NULL: none). */
static SSL_CTX *client_ctx(X509 *trusted, int max_version) {
    SSL_CTX *c = SSL_CTX_new(TLS_client_method());
    SSL_CTX_set_verify(c, SSL_VERIFY_PEER, NULL);
    X509_STORE_add_cert(SSL_CTX_get_cert_store(c), trusted);
    if (max_version) {
        SSL_CTX_set_min_proto_version(c, 0);
        SSL_CTX_set_max_proto_version(c, max_version);
        SSL_CTX_set_cipher_list(c, "DEFAULT:@SECLEVEL=0"); /* TLS 1.1 needs it to be offered at all */
    }
    return c;
}

static void pair_open(pair *p, SSL_CTX *sctx, SSL_CTX *cctx, SSL_SESSION *sess) {
    BIO *a, *b;
    BIO_new_bio_pair(&a, 0, &b, 0);
    p->srv = SSL_new(sctx);
    p->cli = SSL_new(cctx);
    SSL_set_bio(p->srv, a, a);
    SSL_set_bio(p->cli, b, b);
    SSL_set_accept_state(p->srv);
    SSL_set_connect_state(p->cli);
    SSL_set_tlsext_host_name(p->cli, "localhost");
    SSL_set1_host(p->cli, "localhost");
    if (sess) SSL_set_session(p->cli, sess);
}

static int fatal(SSL *s, int rc) {
    int e = SSL_get_error(s, rc);
    return rc != 1 && e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE;
}

/* Both handshakes to their end; 1 when both succeeded. */
static int pair_handshake(pair *p) {
    for (int i = 0; i < PUMP_ROUNDS; i++) {
        p->cli_rc = SSL_do_handshake(p->cli);
        p->srv_rc = SSL_do_handshake(p->srv);
        if (p->cli_rc == 1 && p->srv_rc == 1) return 1;
        if (fatal(p->cli, p->cli_rc) || fatal(p->srv, p->srv_rc)) return 0;
    }
    return 0;
}

/* The client takes what the server sent after its handshake (TLS 1.3's tickets) and returns its session. */
static SSL_SESSION *client_session(pair *p) {
    char b[16];
    SSL_read(p->cli, b, sizeof b); /* WANT_READ once the tickets are taken */
    return SSL_get1_session(p->cli);
}

static void pair_close(pair *p) {
    SSL_free(p->srv);
    SSL_free(p->cli);
    ERR_clear_error();
}

/* ---------------- the context ---------------- */

static SSL_CTX *server_ctx(const cert_files *cf, bool tickets) {
    char err[512];
    tls_settings ts = {.cert = cf->cert, .key = cf->key, .tickets = tickets};
    SSL_CTX *ctx = tls_ctx_new(&ts, err, sizeof err);
    CHECK(ctx != NULL, "server context: %s", err);
    return ctx;
}

/* A second connection offering the first's session resumes it only with tickets on. */
static void test_resumption(const cert_files *cf, bool tickets) {
    SSL_CTX *s = server_ctx(cf, tickets), *c = client_ctx(cf->x509, 0);
    if (!s) return;
    pair p1, p2;
    pair_open(&p1, s, c, NULL);
    CHECK(pair_handshake(&p1), "first handshake (tickets %s)", tickets ? "on" : "off");
    CHECK(SSL_version(p1.srv) == TLS1_3_VERSION, "TLS 1.3 when the client offers it");
    SSL_SESSION *sess = client_session(&p1);
    pair_open(&p2, s, c, sess);
    CHECK(pair_handshake(&p2), "second handshake (tickets %s)", tickets ? "on" : "off");
    CHECK(SSL_session_reused(p2.srv) == (tickets ? 1 : 0), "tickets %s: resumed %d", tickets ? "on" : "off",
          SSL_session_reused(p2.srv));
    SSL_SESSION_free(sess);
    pair_close(&p1);
    pair_close(&p2);
    SSL_CTX_free(s);
    SSL_CTX_free(c);
}

/* Over TLS 1.2 the client asks to renegotiate: the server refuses (a renegotiation a client could repeat would
 * cost the server a full handshake each time, outside the handshake's deadline and counters). */
static void test_no_renegotiation(const cert_files *cf) {
    SSL_CTX *s = server_ctx(cf, true), *c = client_ctx(cf->x509, TLS1_2_VERSION);
    if (!s) return;
    pair p;
    pair_open(&p, s, c, NULL);
    CHECK(pair_handshake(&p) && SSL_version(p.srv) == TLS1_2_VERSION, "a TLS 1.2 handshake");
    CHECK(SSL_renegotiate(p.cli) == 1, "the client asks to renegotiate");
    char b[16];
    int cli_rc = -1, steps = 0;
    for (; steps < PUMP_ROUNDS; steps++) {
        cli_rc = SSL_do_handshake(p.cli);
        if (cli_rc == 1 || fatal(p.cli, cli_rc)) break;
        SSL_read(p.srv, b, sizeof b); /* the server sees the new ClientHello here */
    }
    CHECK(steps > 0 && cli_rc != 1, "the renegotiation did not complete (%d steps)", steps);
    CHECK(SSL_renegotiate_pending(p.srv) == 0, "the server started none");
    pair_close(&p);
    SSL_CTX_free(s);
    SSL_CTX_free(c);
}

/* A failed server handshake and the reason it is counted under. */
static tls_fail_reason failed_reason(SSL_CTX *s, SSL_CTX *c) {
    pair p;
    pair_open(&p, s, c, NULL);
    int ok = pair_handshake(&p);
    tls_fail_reason r = TLS_FAIL__COUNT;
    if (!ok && p.srv_rc != 1) r = tls_classify(SSL_get_error(p.srv, p.srv_rc), ERR_peek_last_error(), 0);
    pair_close(&p);
    return r;
}

static void test_refusals(const cert_files *cf, const cert_files *other) {
    SSL_CTX *s = server_ctx(cf, true);
    if (!s) return;
    SSL_CTX *old = client_ctx(cf->x509, TLS1_1_VERSION);
    CHECK(failed_reason(s, old) == TLS_FAIL_PROTOCOL, "a TLS 1.1 client is refused: protocol");
    SSL_CTX *distrust = client_ctx(other->x509, 0); /* it trusts another certificate only */
    CHECK(failed_reason(s, distrust) == TLS_FAIL_CLIENT_ALERT, "a client refusing the certificate: client_alert");
    SSL_CTX_free(old);
    SSL_CTX_free(distrust);
    SSL_CTX_free(s);
}

static void test_classify(void) {
    CHECK(tls_classify(SSL_ERROR_SYSCALL, 0, 0) == TLS_FAIL_EOF, "end of stream: eof");
    CHECK(tls_classify(SSL_ERROR_SYSCALL, 0, 104) == TLS_FAIL_EOF, "a reset: eof");
    CHECK(tls_classify(SSL_ERROR_SSL, ERR_PACK(ERR_LIB_SSL, 0, SSL_R_UNEXPECTED_EOF_WHILE_READING), 0) ==
              TLS_FAIL_EOF, "OpenSSL's unexpected EOF: eof");
    CHECK(tls_classify(SSL_ERROR_SSL, ERR_PACK(ERR_LIB_SSL, 0, SSL_R_TLSV1_ALERT_UNKNOWN_CA), 0) ==
              TLS_FAIL_CLIENT_ALERT, "unknown_ca received: client_alert");
    CHECK(tls_classify(SSL_ERROR_SSL, ERR_PACK(ERR_LIB_SSL, 0, SSL_R_WRONG_VERSION_NUMBER), 0) == TLS_FAIL_PROTOCOL,
          "a bad record: protocol");
    CHECK(strcmp(tlsstats_reason_name(TLS_FAIL_NOT_TLS), "not_tls") == 0, "reason label");
}

/* A missing file and a key of another certificate: refused, naming the flag and the file. */
static void test_load_errors(const cert_files *cf, const cert_files *other) {
    char err[512];
    tls_settings missing = {.cert = "/nonexistent/cert.pem", .key = cf->key, .tickets = true};
    CHECK(tls_ctx_new(&missing, err, sizeof err) == NULL && strstr(err, "--tls-cert /nonexistent/cert.pem"),
          "a missing certificate is named: %s", err);
    tls_settings mismatch = {.cert = cf->cert, .key = other->key, .tickets = true};
    CHECK(tls_ctx_new(&mismatch, err, sizeof err) == NULL && strstr(err, "--tls-key") && strstr(err, "match"),
          "a key of another certificate: %s", err);
    tls_settings notpem = {.cert = cf->key, .key = cf->key, .tickets = true};
    CHECK(tls_ctx_new(&notpem, err, sizeof err) == NULL && strstr(err, "--tls-cert"), "a key as the certificate: %s",
          err);
}

int tlsunit_run(int *total_checks) {
    CHECK(tlsmem_install() == 0, "OpenSSL's allocator set before its first allocation");
    test_tlsmem();
    cert_files cf, other;
    if (make_cert(&cf, 1) != 0 || make_cert(&other, 2) != 0) {
        CHECK(0, "making test certificates failed");
    } else {
        tlsmem_counts before, after;
        tlsmem_counts_get(&before);
        test_resumption(&cf, true);
        test_resumption(&cf, false);
        test_no_renegotiation(&cf);
        test_refusals(&cf, &other);
        test_load_errors(&cf, &other);
        tlsmem_counts_get(&after);
        CHECK(after.allocations > before.allocations + 100, "handshakes allocate through the layer: %llu",
              (unsigned long long)(after.allocations - before.allocations));
        drop_cert(&cf);
        drop_cert(&other);
    }
    test_classify();
    OPENSSL_cleanup();
    tlsmem_counts end;
    tlsmem_counts_get(&end);
    CHECK(end.live_bytes == 0, "after OPENSSL_cleanup OpenSSL holds nothing: %lld", (long long)end.live_bytes);
    tlsmem_shutdown();
    *total_checks += checks;
    return failures;
}
