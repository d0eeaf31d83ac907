/* s2n_common.c - what the s2n stack's client and server share (s2n_stack.h). */
#include "tlsobs_ssl.h"
#include "s2n_stack.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "describe.h"
#include "groups.h"
#include "tcpinfo.h"
#include "tlsobs.h"

/* ---------------- security policies ---------------- */

#define CLASSICAL_SIGS "ecdsa-p256,ecdsa-p384,rsa-*"

/* s2n-tls configures groups only through its named security policies (s2n-tls 998d4bb,
 * tls/s2n_security_policies.c). The client sends a key share for its policy's first hybrid
 * and one for its first curve, so a group runs on an s2n client where a policy puts it first;
 * the server takes any group of its policy the client's key share names, so a group runs on
 * an s2n server where a policy has it at all (server_only: not first in any). */
static const struct {
    const char *group;       /* as --groups names it (OpenSSL's name) */
    const char *policy;
    const char *what;        /* for the refusal's list */
    const char *server_only; /* why the client cannot run it (NULL: both sides can) */
    /* The certificates its signature schemes take, as pqshake's algorithm registry names them
     * (a family as "rsa-*": RSA keys, signed with RSA-PSS); --describe gives them to the plan. */
    const char *sigs;
} policies[] = {
    {"X25519MLKEM768", "20250512", "ML-KEM hybrids X25519MLKEM768, SecP256r1MLKEM768; ECDSA, RSA-PSS, ML-DSA", NULL,
     CLASSICAL_SIGS ",ml-dsa-44,ml-dsa-65,ml-dsa-87"},
    {"SecP256r1MLKEM768", "20250512", "SecP256r1MLKEM768 second, on the server's side only",
     "s2n-tls's client offers SecP256r1MLKEM768 only after X25519MLKEM768 (policy 20250512, no policy puts it "
     "first): its key share would be X25519MLKEM768's and a server taking SecP256r1MLKEM768 alone would answer "
     "with a HelloRetryRequest; its server takes SecP256r1MLKEM768 from a client that offers it",
     CLASSICAL_SIGS ",ml-dsa-44,ml-dsa-65,ml-dsa-87"},
    {"secp256r1", "20240503", "P-256 first, no ML-KEM; ECDSA, RSA-PSS (no ML-DSA)", NULL, CLASSICAL_SIGS},
    {"x25519", "20240603", "x25519 first, no ML-KEM; ECDSA, RSA-PSS (no ML-DSA)", NULL, CLASSICAL_SIGS},
    /* CNSA 2.0 (its only pure ML-KEM policy): TLS 1.3, certificates ML-DSA-87 or ECDSA P-384 */
    {"MLKEM1024", "ELBSecurityPolicy-TLS13-1-3-CNSA2-INTEROP1-FIPS-PQ-2026-07", "pure ML-KEM-1024; ML-DSA-87, ECDSA P-384", NULL,
     "ml-dsa-87,ecdsa-p384"},
};
#define DEFAULT_POLICY "20250512"

void pqs_s2n_describe(pqs_doc *d, const void *row)
{
    (void)row;
    pqs_doc_arr(d, "groups"); /* the groups a policy puts first, or has (server_only) */
    for (size_t k = 0; k < sizeof policies / sizeof policies[0]; k++)
        pqs_doc_str(d, NULL, policies[k].group);
    pqs_doc_end(d, ']');
    pqs_doc_arr(d, "policies");
    for (size_t k = 0; k < sizeof policies / sizeof policies[0]; k++) {
        pqs_doc_obj(d, NULL);
        pqs_doc_str(d, "group", policies[k].group);
        pqs_doc_str(d, "policy", policies[k].policy);
        pqs_doc_str(d, "what", policies[k].what);
        pqs_doc_str(d, "client", policies[k].server_only);
        pqs_doc_list(d, "sigs", policies[k].sigs);
        pqs_doc_end(d, '}');
    }
    pqs_doc_end(d, ']');
}

const char *pqs_s2n_policy(const char *groups, bool server, char *why, size_t whylen)
{
    if (groups == NULL)
        return DEFAULT_POLICY;
    for (size_t k = 0; k < sizeof policies / sizeof policies[0]; k++) {
        if (strcasecmp(groups, policies[k].group) != 0)
            continue;
        if (!server && policies[k].server_only != NULL) {
            snprintf(why, whylen, "'%s' with --tls-stack s2n: %s", groups, policies[k].server_only);
            return NULL;
        }
        return policies[k].policy;
    }
    size_t n = (size_t)snprintf(why, whylen, "'%s' with --tls-stack s2n: s2n-tls takes named security policies, "
                                "not group lists; one group of", groups);
    for (size_t k = 0; k < sizeof policies / sizeof policies[0]; k++)
        n += (size_t)snprintf(why + (n < whylen ? n : whylen), n < whylen ? whylen - n : 0, "%s %s (policy %s: %s)",
                              k ? "," : "", policies[k].group, policies[k].policy, policies[k].what);
    return NULL;
}

bool pqs_s2n_groups_check(const char *groups, bool server, char *why, size_t whylen)
{
    return pqs_s2n_policy(groups, server, why, whylen) != NULL;
}

/* ---------------- init and errors ---------------- */

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static int init_rc = -1;
static char init_why[256];

static void init_s2n(void)
{
    /* pqs-timer and pqs-server load OpenSSL themselves: s2n-tls must not touch AWS-LC's
     * atexit handlers twice, and its own cleanup runs at exit. */
    init_rc = s2n_init();
    if (init_rc != 0)
        pqs_s2n_error(s2n_errno, init_why, sizeof init_why);
}

bool pqs_s2n_init(char *why, size_t whylen)
{
    pthread_once(&init_once, init_s2n);
    if (init_rc != 0)
        snprintf(why, whylen, "s2n_init: %s", init_why);
    return init_rc == 0;
}

const char *pqs_s2n_error(int e, char *buf, size_t len)
{
    snprintf(buf, len, "%s: %s", s2n_strerror_name(e), s2n_strerror(e, "EN"));
    return buf;
}

pqs_err pqs_s2n_classify(int e)
{
    switch (s2n_error_get_type(e)) {
    case S2N_ERR_T_IO: return errno == ECONNRESET || errno == EPIPE ? PQS_ERR_TCP_RESET : PQS_ERR_IO_ERROR;
    case S2N_ERR_T_CLOSED: return PQS_ERR_EOF;
    case S2N_ERR_T_ALERT: return PQS_ERR_HANDSHAKE_ALERT;
    case S2N_ERR_T_BLOCKED: return PQS_ERR_TIMEOUT;
    default: break;
    }
    const char *name = s2n_strerror_name(e);
    if (name != NULL && (strstr(name, "CERT") != NULL || strstr(name, "VERIFY") != NULL))
        return PQS_ERR_VERIFY_FAILED;
    return PQS_ERR_TLS_ERROR;
}

/* ---------------- the observer ---------------- */

/* The flight a record from the client (from_client) belongs to, as the handshake stands. A
 * flight ends when the other side sends: the client's first until the server's first record,
 * the server's until the client's next, the client's second until the handshake ends. */
static int flight_of(pqs_s2n_obs *o, bool from_client)
{
    pqs_tlsobs *t = o->obs;
    if (o->hs_done)
        return -1;
    if (from_client) {
        if (t->fl_sh && !t->fl_server_done) {
            t->fl_server_done = true; /* the client answers: the server's flight is complete */
            if (t->peer_finished_ns == 0 && !o->server)
                t->peer_finished_ns = o->t_last_in;
            pqs_tlsobs_seg_snapshot(o->obs, 1); /* the server's flight is complete */
        }
        return t->fl_server_done ? PQS_FLIGHT_CLIENT2 : t->fl_hrr ? PQS_FLIGHT_CLIENT1_RETRY : PQS_FLIGHT_CLIENT1;
    }
    return t->fl_server_done ? -1 : PQS_FLIGHT_SERVER;
}

typedef struct {
    pqs_s2n_obs *o;
    bool from_client;
} dir_arg;

static void on_record(void *arg, uint8_t type, uint32_t len)
{
    dir_arg *d = arg;
    pqs_s2n_obs *o = d->o;
    int f = flight_of(o, d->from_client);
    if (type == PQS_TLS_RT_ALERT)
        return; /* an encrypted alert says nothing readable; a plaintext one is rare */
    if (f < 0)
        return;
    pqs_tlsflight *fl = &o->obs->flights[f];
    fl->seen = true;
    fl->records++;
    fl->record_bytes += PQS_TLS_RECORD_HEADER + len;
    /* TLS 1.3 encrypted record: the inner content type and the 16-byte AEAD tag are not the
     * message's (s2n-tls pads no record). A plaintext record's messages are counted into the
     * flight by on_message (tlsobs.c), so they are not counted again here. */
    if (type == PQS_TLS_RT_APPDATA && len > 17)
        fl->hs_bytes += len - 17;
}

static void on_message(void *arg, const uint8_t *buf, uint32_t len, bool kept)
{
    dir_arg *d = arg;
    pqs_s2n_obs *o = d->o;
    if (!kept)
        return;
    /* the message callback's own logic (sizes, key shares, HRR, times), with this side's view:
     * write_p is whether this end sent it */
    bool write_p = d->from_client != o->server;
    o->obs->side = o->server ? 2 : 1;
    pqs_tlsobs_msg_cb(write_p, 0x0304, PQS_TLS_RT_HANDSHAKE, buf, len, NULL, o->obs);
}

/* Keeps the bytes for the decoding after the handshake (s2n_decrypt.c). */
static void keep(pqs_s2n_obs *o, int d, const uint8_t *buf, size_t n)
{
    /* past the cap (or without memory) nothing more is kept: what is kept stays the stream's
     * unbroken start, whose records the decoding can still open */
    if (o->raw_full[d] || o->raw_len[d] + n > PQS_S2N_RAW_MAX) {
        o->raw_full[d] = true;
        return;
    }
    if (o->raw_len[d] + n > o->raw_cap[d]) {
        size_t cap = o->raw_cap[d] ? o->raw_cap[d] : 65536;
        while (cap < o->raw_len[d] + n)
            cap *= 2;
        uint8_t *p = realloc(o->raw[d], cap);
        if (p == NULL) {
            o->raw_full[d] = true;
            return;
        }
        o->raw[d] = p;
        o->raw_cap[d] = cap;
    }
    memcpy(o->raw[d] + o->raw_len[d], buf, n);
    o->raw_len[d] += n;
}

static void feed(pqs_s2n_obs *o, bool from_client, const uint8_t *buf, size_t n)
{
    if (!o->server) /* the attempt line has the message sizes; the conn line has none */
        keep(o, from_client ? 0 : 1, buf, n);
    dir_arg d = {.o = o, .from_client = from_client};
    pqs_s2nwire_cb cb = {.arg = &d, .record = on_record, .message = on_message};
    pqs_s2nwire_feed(from_client != o->server ? &o->out : &o->in, buf, n, &cb);
}

static int obs_recv(void *ctx, uint8_t *buf, uint32_t len)
{
    pqs_s2n_obs *o = ctx;
    ssize_t r = recv(o->fd, buf, len, 0);
    if (r > 0 && o->on) {
        o->t_last_in = pqs_mono_ns();
        if (!o->hs_done)
            feed(o, o->server, buf, (size_t)r);
        else if (!o->server && o->obs->tickets == 0)
            keep(o, 1, buf, (size_t)r); /* the server's bytes until its first ticket (its size) */
    }
    return (int)r;
}

static int obs_send(void *ctx, const uint8_t *buf, uint32_t len)
{
    pqs_s2n_obs *o = ctx;
    ssize_t r = send(o->fd, buf, len, MSG_NOSIGNAL);
    if (r > 0 && o->on && !o->hs_done)
        feed(o, !o->server, buf, (size_t)r);
    return (int)r;
}

int pqs_s2n_obs_attach(struct s2n_connection *conn, pqs_s2n_obs *o, int fd, bool server, bool on, pqs_tlsobs *obs)
{
    uint8_t *raw[2] = {o->raw[0], o->raw[1]};
    size_t cap[2] = {o->raw_cap[0], o->raw_cap[1]};
    memset(o, 0, sizeof *o);
    for (int d = 0; d < 2; d++) {
        o->raw[d] = raw[d];
        o->raw_cap[d] = cap[d];
    }
    o->fd = fd;
    o->server = server;
    o->on = on;
    o->obs = obs;
    obs->side = server ? 2 : 1;
    if (on)
        pqs_tlsobs_watch_tcp(obs, fd);
    if (s2n_connection_set_recv_cb(conn, obs_recv) != 0 || s2n_connection_set_recv_ctx(conn, o) != 0
        || s2n_connection_set_send_cb(conn, obs_send) != 0 || s2n_connection_set_send_ctx(conn, o) != 0
        || s2n_connection_set_ctx(conn, o) != 0)
        return -1;
    return 0;
}

void pqs_s2n_obs_wipe(pqs_s2n_obs *o)
{
    OPENSSL_cleanse(o->secret, sizeof o->secret);
    memset(o->secret_len, 0, sizeof o->secret_len);
    o->app_off = 0;
    for (int d = 0; d < 2; d++)
        if (o->raw[d] != NULL) {
            OPENSSL_cleanse(o->raw[d], o->raw_len[d]);
            o->raw_len[d] = 0;
            o->raw_full[d] = false;
        }
}

void pqs_s2n_obs_release(pqs_s2n_obs *o)
{
    pqs_s2n_obs_wipe(o);
    for (int d = 0; d < 2; d++) {
        free(o->raw[d]);
        o->raw[d] = NULL;
        o->raw_cap[d] = 0;
    }
}

static int hex_value(uint8_t c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

int pqs_s2n_key_log(void *ctx, struct s2n_connection *conn, uint8_t *line, size_t len)
{
    if (ctx != NULL) /* --keylog: one call, whole lines under concurrency (as OpenSSL's path) */
        fprintf(ctx, "%.*s\n", (int)len, (const char *)line);
    pqs_s2n_obs *o = s2n_connection_get_ctx(conn);
    static const char *const labels[3] = {"CLIENT_HANDSHAKE_TRAFFIC_SECRET ", "SERVER_HANDSHAKE_TRAFFIC_SECRET ",
                                          "SERVER_TRAFFIC_SECRET_0 "};
    if (o == NULL || !o->on)
        return 0;
    for (int d = 0; d < 3; d++) {
        size_t ll = strlen(labels[d]);
        if (len < ll || memcmp(line, labels[d], ll) != 0)
            continue;
        /* LABEL <client random, 64 hex> <secret, hex> */
        const uint8_t *sp = memchr(line + ll, ' ', len - ll);
        if (sp == NULL)
            return 0;
        size_t hex = len - (size_t)(sp + 1 - line);
        while (hex > 0 && (sp[hex] == '\n' || sp[hex] == '\r'))
            hex--;
        if (hex % 2 != 0 || hex / 2 > sizeof o->secret[d])
            return 0;
        for (size_t k = 0; k < hex / 2; k++) {
            int hi = hex_value(sp[1 + 2 * k]), lo = hex_value(sp[2 + 2 * k]);
            if (hi < 0 || lo < 0)
                return 0;
            o->secret[d][k] = (uint8_t)(hi << 4 | lo);
        }
        o->secret_len[d] = hex / 2;
    }
    return 0;
}

void pqs_s2n_obs_done(pqs_s2n_obs *o)
{
    o->hs_done = true;
    o->obs->fl_client_done = true;
}

/* ---------------- negotiated parameters ---------------- */

/* s2n-tls's group names where OpenSSL's differ (OpenSSL's are the lines' and the cells'). */
static const char *group_name(const char *s2n)
{
    static const char *const names[] = {"X25519MLKEM768", "SecP256r1MLKEM768", "SecP384r1MLKEM1024", "x25519",
                                        "secp256r1", "secp384r1", "secp521r1", "MLKEM1024", "MLKEM768"};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
        if (strcasecmp(s2n, names[k]) == 0)
            return names[k];
    return s2n;
}

/* The TLS SignatureScheme names OpenSSL gives (SSL_get0_peer_signature_name), from s2n's. */
static const char *sigalg_name(const char *s2n)
{
    static const struct { const char *s2n, *ossl; } map[] = {
        {"ecdsa_secp256r1_sha256", "ecdsa_secp256r1_sha256"}, {"ecdsa_secp384r1_sha384", "ecdsa_secp384r1_sha384"},
        {"ecdsa_secp521r1_sha512", "ecdsa_secp521r1_sha512"}, {"rsa_pss_rsae_sha256", "rsa_pss_rsae_sha256"},
        {"rsa_pss_rsae_sha384", "rsa_pss_rsae_sha384"}, {"rsa_pss_pss_sha256", "rsa_pss_pss_sha256"},
        {"mldsa44", "mldsa44"}, {"mldsa65", "mldsa65"}, {"mldsa87", "mldsa87"}, {"ed25519", "ed25519"},
    };
    for (size_t k = 0; k < sizeof map / sizeof map[0]; k++)
        if (strcasecmp(s2n, map[k].s2n) == 0)
            return map[k].ossl;
    return s2n;
}

/* pqshake's name of a DER certificate's key (OpenSSL parses it). */
static const char *key_name_of_der(const uint8_t *der, uint32_t len)
{
    const unsigned char *p = der;
    X509 *x = d2i_X509(NULL, &p, len);
    if (x == NULL)
        return NULL;
    const char *n = pqs_sig_name_of_key(X509_get0_pubkey(x));
    X509_free(x);
    return n;
}

static const char *peer_leaf_name(struct s2n_connection *conn)
{
    struct s2n_cert_chain_and_key *ch = s2n_cert_chain_and_key_new();
    const char *name = NULL;
    struct s2n_cert *leaf = NULL;
    const uint8_t *der = NULL;
    uint32_t len = 0;
    if (ch != NULL && s2n_connection_get_peer_cert_chain(conn, ch) == 0 && s2n_cert_chain_get_cert(ch, &leaf, 0) == 0
        && s2n_cert_get_der(leaf, &der, &len) == 0)
        name = key_name_of_der(der, len);
    s2n_cert_chain_and_key_free(ch);
    return name;
}

void pqs_s2n_tlsinfo(struct s2n_connection *conn, bool is_client, pqs_tlsinfo *out)
{
    memset(out, 0, sizeof *out);
    int v = s2n_connection_get_actual_protocol_version(conn);
    out->version = v == S2N_TLS13 ? "TLSv1.3" : v == S2N_TLS12 ? "TLSv1.2" : NULL;
    const char *c = s2n_connection_get_cipher(conn);
    /* s2n-tls names TLS 1.3 suites in OpenSSL's style; the lines carry the IANA names */
    if (c != NULL && strcmp(c, "TLS_AES_128_GCM_SHA256") != 0 && strcmp(c, "TLS_AES_256_GCM_SHA384") != 0
        && strcmp(c, "TLS_CHACHA20_POLY1305_SHA256") != 0) {
        uint8_t a = 0, b = 0;
        if (s2n_connection_get_cipher_iana_value(conn, &a, &b) == 0 && a == 0x13)
            c = b == 1 ? "TLS_AES_128_GCM_SHA256" : b == 2 ? "TLS_AES_256_GCM_SHA384"
                : b == 3 ? "TLS_CHACHA20_POLY1305_SHA256" : c;
    }
    out->cipher = c;
    const char *g = NULL;
    if (s2n_connection_get_key_exchange_group(conn, &g) == 0 && g != NULL && strcmp(g, "NONE") != 0)
        out->group = group_name(g);
    out->resumed = s2n_connection_is_session_resumed(conn) == 1;
    out->early_data = "not_sent";
    if (!out->resumed) {
        const char *scheme = NULL;
        if (s2n_connection_get_signature_scheme(conn, &scheme) == 0 && scheme != NULL && strcmp(scheme, "none") != 0)
            out->sigalg = sigalg_name(scheme);
        if (is_client)
            out->sig = peer_leaf_name(conn);
        else {
            uint8_t *der = NULL;
            uint32_t len = 0;
            if (s2n_connection_get_client_cert_chain(conn, &der, &len) == 0 && len > 3) {
                /* the chain as the wire had it: 3-byte length, then the leaf */
                uint32_t l = (uint32_t)der[0] << 16 | (uint32_t)der[1] << 8 | der[2];
                if (l + 3 <= len)
                    out->client_sig = key_name_of_der(der + 3, l);
            }
        }
    }
}

/* ---------------- PEM for s2n-tls ---------------- */

static char *bio_string(BIO *b)
{
    char *data = NULL;
    long n = BIO_get_mem_data(b, &data);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (s != NULL) {
        memcpy(s, data, (size_t)n);
        s[n] = '\0';
    }
    return s;
}

char *pqs_s2n_x509_pem(X509 *x)
{
    BIO *b = BIO_new(BIO_s_mem());
    char *s = b != NULL && PEM_write_bio_X509(b, x) == 1 ? bio_string(b) : NULL;
    BIO_free(b);
    return s;
}

bool pqs_s2n_chain_pem(const pqs_chain *c, bool with_intermediates, char **chain_pem, char **key_pem)
{
    *chain_pem = *key_pem = NULL;
    BIO *b = BIO_new(BIO_s_mem()), *k = BIO_new(BIO_s_mem());
    bool ok = b != NULL && k != NULL && PEM_write_bio_X509(b, c->leaf) == 1;
    for (int i = 0; ok && with_intermediates && i < c->n_inter; i++)
        ok = PEM_write_bio_X509(b, c->inter[i]) == 1;
    ok = ok && PEM_write_bio_PrivateKey(k, c->leaf_key, NULL, NULL, 0, NULL, NULL) == 1;
    if (ok) {
        *chain_pem = bio_string(b);
        *key_pem = bio_string(k);
        ok = *chain_pem != NULL && *key_pem != NULL;
    }
    BIO_free(b);
    BIO_free(k);
    return ok;
}
