/* test_s2n_stack.c - the second TLS stack (issue 33): s2n-tls on AWS-LC, AWS-LC's symbols
 * prefixed at its build (testbed/deps/build-stack.sh), in one program with the pinned OpenSSL.
 * Handshakes over a socketpair, one side per thread: s2n to s2n, s2n client to OpenSSL server and
 * OpenSSL client to s2n server, with chains pqs-server's generator makes (core/certs.c), ECDSA
 * and ML-DSA; each checks the version, the group both ends agree on and that the chain verified. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>

#include <s2n.h>

#include "certs.h"
#include "groups.h"
#include "unit.h"

/* s2n's security policy: TLS 1.3 preferring X25519MLKEM768, ML-DSA among its signature schemes. */
#define POLICY "20250512"
#define GROUP "X25519MLKEM768"

/* One side's credentials as PEM: the chain it sends, its key, the root that verifies it. */
typedef struct {
    char *chain, *key, *root;
} creds;

static char *bio_text(BIO *b)
{
    char *p = NULL;
    long n = BIO_get_mem_data(b, &p);
    char *s = malloc((size_t)n + 1);
    if (s != NULL) {
        memcpy(s, p, (size_t)n);
        s[n] = '\0';
    }
    BIO_free(b);
    return s;
}

static int make_creds(const char *sig, int depth, creds *out)
{
    pqs_chain c;
    char err[256];
    pqs_chain_spec spec = {.leaf = pqs_sig_lookup(sig), .depth = depth};
    if (spec.leaf == NULL || pqs_chain_make(NULL, &spec, PQS_CHAIN_SERVER, &c, err, sizeof err) != 0) {
        printf("# chain %s: %s\n", sig, spec.leaf ? err : "unknown algorithm");
        return -1;
    }
    BIO *chain = BIO_new(BIO_s_mem()), *key = BIO_new(BIO_s_mem()), *root = BIO_new(BIO_s_mem());
    PEM_write_bio_X509(chain, c.leaf);
    for (int i = 0; i < c.n_inter; i++)
        PEM_write_bio_X509(chain, c.inter[i]);
    PEM_write_bio_PrivateKey(key, c.leaf_key, NULL, NULL, 0, NULL, NULL);
    PEM_write_bio_X509(root, c.root);
    out->chain = bio_text(chain);
    out->key = bio_text(key);
    out->root = bio_text(root);
    pqs_chain_free(&c);
    return out->chain && out->key && out->root ? 0 : -1;
}

static void free_creds(creds *c)
{
    free(c->chain);
    free(c->key);
    free(c->root);
}

/* ---------------- s2n's side ---------------- */

typedef struct {
    int fd;
    int server;
    const creds *cr;
    int ok;
    int version;           /* s2n_connection_get_actual_protocol_version */
    char group[64];        /* s2n_connection_get_key_exchange_group */
    char err[160];
} s2n_side;

static void *s2n_run(void *arg)
{
    s2n_side *s = arg;
    struct s2n_config *cfg = s2n_config_new();
    struct s2n_cert_chain_and_key *ck = NULL;
    struct s2n_connection *conn = NULL;
    s2n_blocked_status blocked;
    const char *g = NULL;
    if (cfg == NULL || s2n_config_set_cipher_preferences(cfg, POLICY) != 0)
        goto fail;
    if (s->server) {
        if ((ck = s2n_cert_chain_and_key_new()) == NULL || s2n_cert_chain_and_key_load_pem(ck, s->cr->chain, s->cr->key) != 0
            || s2n_config_add_cert_chain_and_key_to_store(cfg, ck) != 0)
            goto fail;
    } else if (s2n_config_add_pem_to_trust_store(cfg, s->cr->root) != 0) {
        goto fail;
    }
    if ((conn = s2n_connection_new(s->server ? S2N_SERVER : S2N_CLIENT)) == NULL || s2n_connection_set_config(conn, cfg) != 0
        || s2n_connection_set_fd(conn, s->fd) != 0 || (!s->server && s2n_set_server_name(conn, "localhost") != 0))
        goto fail;
    if (s2n_negotiate(conn, &blocked) != 0)
        goto fail;
    s->version = s2n_connection_get_actual_protocol_version(conn);
    if (s2n_connection_get_key_exchange_group(conn, &g) == 0 && g != NULL)
        snprintf(s->group, sizeof s->group, "%s", g);
    s->ok = 1;
    s2n_shutdown(conn, &blocked);
    goto done;
fail:
    snprintf(s->err, sizeof s->err, "%s: %s", s2n_strerror_name(s2n_errno), s2n_strerror_debug(s2n_errno, "EN"));
done:
    if (conn)
        s2n_connection_free(conn);
    if (ck)
        s2n_cert_chain_and_key_free(ck);
    if (cfg)
        s2n_config_free(cfg);
    shutdown(s->fd, SHUT_WR);
    return NULL;
}

/* ---------------- OpenSSL's side ---------------- */

typedef struct {
    int fd;
    int server;
    const creds *cr;
    int ok;
    int version;
    char group[64];
    char err[160];
} ossl_side;

static int use_pem(SSL_CTX *ctx, const creds *cr)
{
    BIO *b = BIO_new_mem_buf(cr->chain, -1);
    X509 *x = PEM_read_bio_X509(b, NULL, NULL, NULL);
    int ok = x != NULL && SSL_CTX_use_certificate(ctx, x) == 1;
    X509_free(x);
    while (ok && (x = PEM_read_bio_X509(b, NULL, NULL, NULL)) != NULL)
        ok = SSL_CTX_add1_chain_cert(ctx, x) == 1, X509_free(x);
    BIO_free(b);
    ERR_clear_error(); /* the end of the PEM list */
    b = BIO_new_mem_buf(cr->key, -1);
    EVP_PKEY *k = PEM_read_bio_PrivateKey(b, NULL, NULL, NULL);
    ok = ok && k != NULL && SSL_CTX_use_PrivateKey(ctx, k) == 1;
    EVP_PKEY_free(k);
    BIO_free(b);
    return ok ? 0 : -1;
}

static int trust_pem(SSL_CTX *ctx, const char *pem)
{
    BIO *b = BIO_new_mem_buf(pem, -1);
    X509 *x = PEM_read_bio_X509(b, NULL, NULL, NULL);
    int ok = x != NULL && X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx), x) == 1;
    X509_free(x);
    BIO_free(b);
    return ok ? 0 : -1;
}

static void *ossl_run(void *arg)
{
    ossl_side *s = arg;
    SSL_CTX *ctx = SSL_CTX_new(s->server ? TLS_server_method() : TLS_client_method());
    SSL *ssl = NULL;
    if (ctx == NULL || SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) != 1 || SSL_CTX_set1_groups_list(ctx, GROUP) != 1)
        goto fail;
    if (s->server ? use_pem(ctx, s->cr) != 0 : trust_pem(ctx, s->cr->root) != 0)
        goto fail;
    if (!s->server)
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    if ((ssl = SSL_new(ctx)) == NULL || SSL_set_fd(ssl, s->fd) != 1)
        goto fail;
    if (!s->server && (SSL_set_tlsext_host_name(ssl, "localhost") != 1 || SSL_set1_dnsname(ssl, "localhost") != 1))
        goto fail;
    if ((s->server ? SSL_accept(ssl) : SSL_connect(ssl)) != 1)
        goto fail;
    s->version = SSL_version(ssl);
    const char *g = SSL_get0_group_name(ssl);
    snprintf(s->group, sizeof s->group, "%s", g ? g : "");
    s->ok = 1;
    SSL_shutdown(ssl);
    goto done;
fail:
    ERR_error_string_n(ERR_peek_last_error(), s->err, sizeof s->err);
done:
    SSL_free(ssl);
    SSL_CTX_free(ctx);
    shutdown(s->fd, SHUT_WR);
    return NULL;
}

/* ---------------- pairs ---------------- */

typedef enum { S2N, OSSL } stack;

/* A handshake between a client on `cs` and a server on `ss` with the server's credentials cr. */
static void pair(const char *name, stack cs, stack ss, const creds *cr)
{
    int sv[2];
    char label[160];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
        CHECK(name, 0);
        return;
    }
    s2n_side s2c = {.fd = sv[0], .server = 0, .cr = cr}, s2s = {.fd = sv[1], .server = 1, .cr = cr};
    ossl_side oc = {.fd = sv[0], .server = 0, .cr = cr}, os = {.fd = sv[1], .server = 1, .cr = cr};
    pthread_t tc, ts;
    pthread_create(&ts, NULL, ss == S2N ? s2n_run : ossl_run, ss == S2N ? (void *)&s2s : (void *)&os);
    pthread_create(&tc, NULL, cs == S2N ? s2n_run : ossl_run, cs == S2N ? (void *)&s2c : (void *)&oc);
    pthread_join(tc, NULL);
    pthread_join(ts, NULL);
    close(sv[0]);
    close(sv[1]);
    int c_ok = cs == S2N ? s2c.ok : oc.ok, s_ok = ss == S2N ? s2s.ok : os.ok;
    const char *cg = cs == S2N ? s2c.group : oc.group, *sg = ss == S2N ? s2s.group : os.group;
    if (!c_ok || !s_ok)
        printf("# %s: client %s, server %s\n", name, c_ok ? "ok" : (cs == S2N ? s2c.err : oc.err),
               s_ok ? "ok" : (ss == S2N ? s2s.err : os.err));
    snprintf(label, sizeof label, "%s_handshake", name);
    CHECK(label, c_ok && s_ok);
    snprintf(label, sizeof label, "%s_tls13", name);
    CHECK(label, (cs == S2N ? s2c.version == S2N_TLS13 : oc.version == TLS1_3_VERSION)
                     && (ss == S2N ? s2s.version == S2N_TLS13 : os.version == TLS1_3_VERSION));
    /* both ends name the hybrid group (s2n: "X25519MLKEM768", OpenSSL: the same name) */
    snprintf(label, sizeof label, "%s_group_client", name);
    CHECK_STR(label, cg, GROUP);
    snprintf(label, sizeof label, "%s_group_server", name);
    CHECK_STR(label, sg, GROUP);
}

int main(void)
{
    /* the two libraries side by side: OpenSSL's own version, and s2n up on its libcrypto */
    CHECK_STR("openssl_is_pinned", OpenSSL_version(OPENSSL_VERSION_STRING), PQS_OPENSSL_VERSION);
    CHECK("s2n_init", s2n_init() == 0);
    static const struct {
        const char *sig;
        int depth;
    } chains[] = {{"ecdsa-p256", 1}, {"ecdsa-p256", 2}, {"ml-dsa-65", 2}};
    for (size_t i = 0; i < sizeof chains / sizeof chains[0]; i++) {
        creds cr = {0};
        char name[96];
        snprintf(name, sizeof name, "%s_depth%d_creds", chains[i].sig, chains[i].depth);
        CHECK(name, make_creds(chains[i].sig, chains[i].depth, &cr) == 0);
        if (cr.chain == NULL)
            continue;
        snprintf(name, sizeof name, "%s_depth%d_s2n_to_s2n", chains[i].sig, chains[i].depth);
        pair(name, S2N, S2N, &cr);
        snprintf(name, sizeof name, "%s_depth%d_s2n_to_openssl", chains[i].sig, chains[i].depth);
        pair(name, S2N, OSSL, &cr);
        snprintf(name, sizeof name, "%s_depth%d_openssl_to_s2n", chains[i].sig, chains[i].depth);
        pair(name, OSSL, S2N, &cr);
        free_creds(&cr);
    }
    s2n_cleanup_final();
    UNIT_EXIT();
}
