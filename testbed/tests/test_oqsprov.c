/* test_oqsprov.c - the pqs-oqs provider without a network:
 *  - table: every offered row is a TLS group with its code point, McEliece is refused;
 *  - EVP round trip (keygen, share, encaps, decaps) for every group, the way libssl drives it;
 *  - malformed inputs: flipped bits, truncated and oversized key shares and ciphertexts fail
 *    cleanly (0 + error) or decapsulate to a different secret; never crash;
 *  - interop at the EVP level: OpenSSL's native ML-KEM groups vs the liboqs rows that serve
 *    the same names in native-codepoints mode, both directions;
 *  - in-memory TLS 1.3 handshakes with a corrupted ClientHello key share / ServerHello
 *    ciphertext: the handshake ends with an alert. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/provider.h>
#include <openssl/ssl.h>

#include "certs.h"
#include "groups.h"
#include "oqsprov/oqsprov.h"
#include "provider_seam.h"
#include "unit.h"

static EVP_PKEY *keygen(OSSL_LIB_CTX *lc, const char *alg, const char *propq)
{
    EVP_PKEY *k = NULL;
    EVP_PKEY_CTX *c = EVP_PKEY_CTX_new_from_name(lc, alg, propq);
    if (c == NULL || EVP_PKEY_keygen_init(c) <= 0 || EVP_PKEY_generate(c, &k) <= 0)
        k = NULL;
    EVP_PKEY_CTX_free(c);
    return k;
}

/* A peer key from a share, as libssl's server does it (paramgen, then the encoded share). */
static EVP_PKEY *peer_from_share(OSSL_LIB_CTX *lc, const char *alg, const char *propq,
                                 const unsigned char *share, size_t len)
{
    EVP_PKEY *k = NULL;
    EVP_PKEY_CTX *c = EVP_PKEY_CTX_new_from_name(lc, alg, propq);
    if (c == NULL || EVP_PKEY_paramgen_init(c) <= 0 || EVP_PKEY_paramgen(c, &k) <= 0) {
        EVP_PKEY_CTX_free(c);
        return NULL;
    }
    EVP_PKEY_CTX_free(c);
    if (EVP_PKEY_set1_encoded_public_key(k, share, len) <= 0) {
        EVP_PKEY_free(k);
        return NULL;
    }
    return k;
}

static int encaps(OSSL_LIB_CTX *lc, EVP_PKEY *peer, const char *propq, unsigned char **ct, size_t *ctlen,
                  unsigned char *ss, size_t *sslen)
{
    EVP_PKEY_CTX *c = EVP_PKEY_CTX_new_from_pkey(lc, peer, propq);
    int ok = c != NULL && EVP_PKEY_encapsulate_init(c, NULL) > 0
             && EVP_PKEY_encapsulate(c, NULL, ctlen, NULL, sslen) > 0
             && (*ct = OPENSSL_malloc(*ctlen)) != NULL && EVP_PKEY_encapsulate(c, *ct, ctlen, ss, sslen) > 0;
    EVP_PKEY_CTX_free(c);
    return ok;
}

/* 1 ok, 0 clean failure. */
static int decaps(OSSL_LIB_CTX *lc, EVP_PKEY *key, const char *propq, const unsigned char *ct, size_t ctlen,
                  unsigned char *ss, size_t *sslen)
{
    EVP_PKEY_CTX *c = EVP_PKEY_CTX_new_from_pkey(lc, key, propq);
    size_t need = 0;
    int ok = c != NULL && EVP_PKEY_decapsulate_init(c, NULL) > 0
             && EVP_PKEY_decapsulate(c, NULL, &need, ct, ctlen) > 0 && need <= *sslen
             && EVP_PKEY_decapsulate(c, ss, sslen, ct, ctlen) > 0;
    EVP_PKEY_CTX_free(c);
    ERR_clear_error();
    return ok;
}

static unsigned char *share_of(EVP_PKEY *k, size_t *len)
{
    unsigned char *p = NULL;
    *len = EVP_PKEY_get1_encoded_public_key(k, &p);
    return *len ? p : NULL;
}

/* EVP round trip + malformed corpus for one row. */
static void test_row(const pqs_oqs_group *g)
{
    char name[160];
    pqs_oqs_sizes sz;
    pqs_oqs_group_sizes(g, &sz);
    const char *pq = pqs_propq();
    EVP_PKEY *me = keygen(NULL, g->name, pq), *peer = NULL;
    size_t slen = 0, ctlen = 0, sslen = 0, ss2len = 256;
    unsigned char *share = me ? share_of(me, &slen) : NULL, *ct = NULL, ss[256], ss2[256];
    int ok = me != NULL && share != NULL && slen == sz.pub
             && strcmp(OSSL_PROVIDER_get0_name(EVP_PKEY_get0_provider(me)), PQS_OQSPROV_NAME) == 0
             && (peer = peer_from_share(NULL, g->name, pq, share, slen)) != NULL
             && encaps(NULL, peer, pq, &ct, &ctlen, ss, &sslen) && ctlen == sz.ct && sslen == sz.ss
             && decaps(NULL, me, pq, ct, ctlen, ss2, &ss2len) && ss2len == sslen && memcmp(ss, ss2, sslen) == 0;
    snprintf(name, sizeof name, "roundtrip_%s", g->name);
    CHECK(name, ok);
    if (!ok) {
        ERR_print_errors_fp(stdout);
        goto done;
    }
    /* Malformed corpus (deterministic). */
    int bad = 0;
    EVP_PKEY *p2;
    /* key shares: truncated, oversized, empty -> refused */
    if ((p2 = peer_from_share(NULL, g->name, pq, share, slen - 1)) != NULL) { bad++; EVP_PKEY_free(p2); }
    unsigned char *big = OPENSSL_zalloc(slen + 64);
    memcpy(big, share, slen);
    if ((p2 = peer_from_share(NULL, g->name, pq, big, slen + 1)) != NULL) { bad++; EVP_PKEY_free(p2); }
    if ((p2 = peer_from_share(NULL, g->name, pq, big, 0)) != NULL) { bad++; EVP_PKEY_free(p2); }
    OPENSSL_free(big);
    ERR_clear_error();
    /* key shares with flipped bits (first, middle, last byte): accepted or refused, and if
     * accepted, the owner cannot decapsulate to the same secret */
    size_t pos[3] = {0, slen / 2, slen - 1};
    for (int i = 0; i < 3; i++) {
        unsigned char *fl = OPENSSL_memdup(share, slen);
        fl[pos[i]] ^= 0x01;
        if ((p2 = peer_from_share(NULL, g->name, pq, fl, slen)) != NULL) {
            unsigned char *c2 = NULL, s3[256], s4[256];
            size_t c2l = 0, s3l = 0, s4l = sizeof s4;
            if (encaps(NULL, p2, pq, &c2, &c2l, s3, &s3l) && decaps(NULL, me, pq, c2, c2l, s4, &s4l)
                && s4l == s3l && memcmp(s3, s4, s3l) == 0)
                bad++;
            OPENSSL_free(c2);
            EVP_PKEY_free(p2);
        }
        ERR_clear_error();
        OPENSSL_free(fl);
    }
    /* ciphertexts: truncated, oversized, empty -> 0; flipped -> 0 or a different secret */
    unsigned char *cbig = OPENSSL_zalloc(ctlen + 64);
    memcpy(cbig, ct, ctlen);
    size_t l = sizeof ss2;
    if (decaps(NULL, me, pq, cbig, ctlen - 1, ss2, &l)) bad++;
    l = sizeof ss2;
    if (decaps(NULL, me, pq, cbig, ctlen + 1, ss2, &l)) bad++;
    l = sizeof ss2;
    if (decaps(NULL, me, pq, cbig, 0, ss2, &l)) bad++;
    size_t cpos[4] = {0, sz.cl_pub, ctlen / 2, ctlen - 1};
    for (int i = 0; i < 4; i++) {
        memcpy(cbig, ct, ctlen);
        /* the last byte gets its low bit flipped: in rows with ML-KEM first it ends an X25519
         * key, whose top bit X25519 ignores (RFC 7748), so 0x80 there changes nothing */
        cbig[cpos[i] < ctlen ? cpos[i] : 0] ^= i == 3 ? 0x01 : 0x80;
        l = sizeof ss2;
        if (decaps(NULL, me, pq, cbig, ctlen, ss2, &l) && l == sslen && memcmp(ss, ss2, sslen) == 0)
            bad++;
    }
    OPENSSL_free(cbig);
    /* decapsulation with a public-only key is refused */
    l = sizeof ss2;
    if (decaps(NULL, peer, pq, ct, ctlen, ss2, &l)) bad++;
    snprintf(name, sizeof name, "malformed_%s", g->name);
    CHECK(name, bad == 0);
done:
    OPENSSL_free(ct);
    OPENSSL_free(share);
    EVP_PKEY_free(me);
    EVP_PKEY_free(peer);
    OPENSSL_cleanse(ss, sizeof ss);
    OPENSSL_cleanse(ss2, sizeof ss2);
    ERR_clear_error();
}

/* Interop at the EVP level in a second library context with the native-codepoints mode:
 * native keygen -> liboqs encaps -> native decaps, and the other way round. */
static void test_native_interop(void)
{
    OSSL_LIB_CTX *lc = OSSL_LIB_CTX_new();
    OSSL_PROVIDER *def = OSSL_PROVIDER_load(lc, "default");
    OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(PQS_OQSPROV_PARAM_NATIVE, (char *)"yes", 0),
                           OSSL_PARAM_construct_end()};
    OSSL_PROVIDER *ours = NULL;
    if (OSSL_PROVIDER_add_builtin(lc, PQS_OQSPROV_NAME, pqs_oqsprov_init))
        ours = OSSL_PROVIDER_load_ex(lc, PQS_OQSPROV_NAME, params);
    CHECK("native_mode_loads", def != NULL && ours != NULL);
    static const char *const algs[] = {"X25519MLKEM768", "SecP256r1MLKEM768", "SecP384r1MLKEM1024",
                                       "ML-KEM-512", "ML-KEM-768", "ML-KEM-1024"};
    const char *nat = "provider=default", *oqs = "provider=" PQS_OQSPROV_NAME;
    for (size_t i = 0; i < sizeof algs / sizeof algs[0]; i++) {
        for (int dir = 0; dir < 2; dir++) {
            const char *kp = dir ? oqs : nat, *ep = dir ? nat : oqs; /* key owner, encapsulator */
            EVP_PKEY *me = keygen(lc, algs[i], kp), *peer = NULL;
            size_t slen = 0, ctlen = 0, sslen = 0, s2 = 256;
            unsigned char *share = me ? share_of(me, &slen) : NULL, *ct = NULL, ss[256], ss2[256];
            int ok = share != NULL && (peer = peer_from_share(lc, algs[i], ep, share, slen)) != NULL
                     && strcmp(OSSL_PROVIDER_get0_name(EVP_PKEY_get0_provider(peer)), dir ? "default" : PQS_OQSPROV_NAME) == 0
                     && strcmp(OSSL_PROVIDER_get0_name(EVP_PKEY_get0_provider(me)), dir ? PQS_OQSPROV_NAME : "default") == 0
                     && encaps(lc, peer, ep, &ct, &ctlen, ss, &sslen)
                     && decaps(lc, me, kp, ct, ctlen, ss2, &s2) && s2 == sslen && memcmp(ss, ss2, sslen) == 0;
            char name[128];
            snprintf(name, sizeof name, "interop_%s_%s", algs[i], dir ? "oqs_key_native_encaps" : "native_key_oqs_encaps");
            CHECK(name, ok);
            if (!ok)
                ERR_print_errors_fp(stdout);
            OPENSSL_free(share);
            OPENSSL_free(ct);
            EVP_PKEY_free(me);
            EVP_PKEY_free(peer);
            ERR_clear_error();
        }
    }
    OSSL_PROVIDER_unload(ours);
    OSSL_PROVIDER_unload(def);
    OSSL_LIB_CTX_free(lc);
}

/* ---------------- in-memory TLS 1.3 with corrupted key_share ---------------- */

typedef struct {
    int alerts_sent;
} alert_count;

static void info_cb(const SSL *s, int where, int ret)
{
    (void)ret;
    if (where & SSL_CB_WRITE_ALERT) {
        alert_count *a = SSL_get_ex_data(s, 0);
        if (a)
            a->alerts_sent++;
    }
}

static size_t rd24(const unsigned char *p) { return ((size_t)p[0] << 16) | ((size_t)p[1] << 8) | p[2]; }
static size_t rd16(const unsigned char *p) { return ((size_t)p[0] << 8) | p[1]; }
static void wr16(unsigned char *p, size_t v) { p[0] = (unsigned char)(v >> 8); p[1] = (unsigned char)v; }
static void wr24(unsigned char *p, size_t v) { p[0] = (unsigned char)(v >> 16); wr16(p + 1, v); }

/* Finds the key_share entry's key_exchange in a single-record ClientHello (client=1) or
 * ServerHello (client=0). Returns the offset of the data and fills the offsets of every
 * length field that covers it, or 0 if not found. */
typedef struct {
    size_t data, len, rec, hs, exts, ext, shares, entry;
} ks_pos;

static int find_ks(const unsigned char *b, size_t n, int client, ks_pos *o)
{
    if (n < 5 + 4 + 38 || b[0] != 22 || b[5] != (client ? 1 : 2))
        return 0;
    o->rec = 3;
    o->hs = 6;
    size_t p = 9 + 2 + 32;
    p += 1 + b[p]; /* session id */
    if (client) {
        p += 2 + rd16(b + p); /* cipher suites */
        p += 1 + b[p];        /* compression */
    } else {
        p += 3; /* cipher suite + compression */
    }
    o->exts = p;
    size_t end = p + 2 + rd16(b + p);
    p += 2;
    while (p + 4 <= end && end <= n) {
        unsigned type = (unsigned)rd16(b + p);
        size_t el = rd16(b + p + 2);
        if (type == 51) {
            o->ext = p + 2;
            size_t q = p + 4;
            if (client) {
                o->shares = q;
                q += 2;
            } else {
                o->shares = 0;
            }
            o->entry = q + 2;
            o->len = rd16(b + q + 2);
            o->data = q + 4;
            return o->data + o->len <= n;
        }
        p += 4 + el;
    }
    return 0;
}

/* Rewrites buf so that the key share is delta bytes longer (+1) or shorter (-1), all length
 * fields adjusted. buf has room for n + 1. Returns the new length. */
static size_t resize_ks(unsigned char *b, size_t n, const ks_pos *o, int delta)
{
    size_t at = o->data + o->len - (delta < 0 ? 1 : 0);
    if (delta > 0) {
        memmove(b + at + 1, b + at, n - at);
        b[at] = 0x5a;
    } else {
        memmove(b + at, b + at + 1, n - at - 1);
    }
    wr16(b + o->rec, rd16(b + o->rec) + (size_t)delta);
    wr24(b + o->hs, rd24(b + o->hs) + (size_t)delta);
    wr16(b + o->exts, rd16(b + o->exts) + (size_t)delta);
    wr16(b + o->ext, rd16(b + o->ext) + (size_t)delta);
    if (o->shares)
        wr16(b + o->shares, rd16(b + o->shares) + (size_t)delta);
    wr16(b + o->entry, rd16(b + o->entry) + (size_t)delta);
    return n + (size_t)delta;
}

enum { MUT_NONE, MUT_FLIP, MUT_TRUNC, MUT_GROW };

/* Moves bytes from one BIO to another; the first flight is mutated if asked. */
static void pump(BIO *from, BIO *to, int mutate, int client_flight, int *mutated)
{
    static unsigned char buf[262144];
    int n = BIO_read(from, buf, sizeof buf - 8);
    if (n <= 0)
        return;
    size_t len = (size_t)n;
    ks_pos o;
    if (mutate != MUT_NONE && !*mutated && find_ks(buf, len, client_flight, &o)) {
        size_t reclen = rd16(buf + 3);
        int single = reclen + 5 <= len && rd24(buf + 6) + 4 == reclen;
        if (mutate == MUT_FLIP) {
            buf[o.data + o.len / 2] ^= 0x10;
            *mutated = 1;
        } else if (single) {
            len = resize_ks(buf, len, &o, mutate == MUT_GROW ? 1 : -1);
            *mutated = 1;
        }
    }
    BIO_write(to, buf, (int)len);
}

/* Returns 1 if the handshake completed; counts alerts. */
/* One handshake call of one side unless it is through or failed; anything but a wait for the
 * peer's bytes fails it. */
static void step(SSL *ssl, int *done, int *fail)
{
    if (*done || *fail)
        return;
    int r = SSL_do_handshake(ssl);
    if (r == 1)
        *done = 1;
    else if (SSL_get_error(ssl, r) != SSL_ERROR_WANT_READ)
        *fail = 1;
}

static int handshake(SSL_CTX *sctx, SSL_CTX *cctx, const char *group, int mutate, int in_client_hello,
                     int *mutated, int *alerts)
{
    SSL *s = SSL_new(sctx), *c = SSL_new(cctx);
    BIO *c_out = BIO_new(BIO_s_mem()), *s_in = BIO_new(BIO_s_mem());
    BIO *s_out = BIO_new(BIO_s_mem()), *c_in = BIO_new(BIO_s_mem());
    alert_count ac = {0};
    SSL_set_ex_data(s, 0, &ac);
    SSL_set_ex_data(c, 0, &ac);
    SSL_set_bio(c, c_in, c_out);
    SSL_set_bio(s, s_in, s_out);
    SSL_set1_groups_list(c, group);
    SSL_set1_groups_list(s, group);
    SSL_set_connect_state(c);
    SSL_set_accept_state(s);
    int cdone = 0, sdone = 0, cfail = 0, sfail = 0;
    *mutated = 0;
    for (int round = 0; round < 20 && !(cdone && sdone) && !(cfail || sfail); round++) {
        step(c, &cdone, &cfail);
        pump(c_out, s_in, in_client_hello ? mutate : MUT_NONE, 1, mutated);
        step(s, &sdone, &sfail);
        pump(s_out, c_in, in_client_hello ? MUT_NONE : mutate, 0, mutated);
    }
    /* let the side that did not fail read the other's alert */
    if (cfail || sfail) {
        SSL_do_handshake(c);
        pump(c_out, s_in, MUT_NONE, 1, mutated);
        SSL_do_handshake(s);
    }
    *alerts = ac.alerts_sent;
    SSL_free(c);
    SSL_free(s);
    ERR_clear_error();
    return cdone && sdone;
}

static void test_tls(void)
{
    char err[256];
    pqs_chain chain;
    memset(&chain, 0, sizeof chain);
    const pqs_sig_alg *sig = pqs_sig_lookup("ecdsa-p256");
    int ok = pqs_chain_generate(NULL, sig, sig, 1, PQS_CHAIN_SERVER, &chain, err, sizeof err) == 0;
    SSL_CTX *sctx = SSL_CTX_new_ex(NULL, pqs_propq(), TLS_server_method());
    SSL_CTX *cctx = SSL_CTX_new_ex(NULL, pqs_propq(), TLS_client_method());
    ok = ok && sctx && cctx && pqs_chain_use(sctx, &chain, true) == 0;
    CHECK("tls_setup", ok);
    if (!ok)
        return;
    SSL_CTX_set_min_proto_version(sctx, TLS1_3_VERSION);
    SSL_CTX_set_min_proto_version(cctx, TLS1_3_VERSION);
    SSL_CTX_set_verify(cctx, SSL_VERIFY_NONE, NULL);
    SSL_CTX_set_info_callback(sctx, info_cb);
    SSL_CTX_set_info_callback(cctx, info_cb);
    /* pure and hybrid, classical-first and pq-first, each family */
    static const char *const groups[] = {"frodo640aes", "p256_frodo640shake", "bikel1", "x25519_bikel1",
                                         "hqc128", "p384_hqc192", "kyber768", "x448_kyber768",
                                         "oqs_mlkem512", "p521_mlkem1024", "sntrup761", "x25519_sntrup761"};
    static const char *const mut_names[] = {"none", "flip", "trunc", "grow"};
    for (size_t i = 0; i < sizeof groups / sizeof groups[0]; i++) {
        for (int side = 1; side >= 0; side--) {
            for (int m = MUT_NONE; m <= MUT_GROW; m++) {
                if (m == MUT_NONE && side == 0)
                    continue;
                int mutated = 0, alerts = 0;
                int done = handshake(sctx, cctx, groups[i], m, side, &mutated, &alerts);
                char name[160];
                snprintf(name, sizeof name, "tls_%s_%s_%s", groups[i], side ? "client_share" : "server_ct",
                         mut_names[m]);
                if (m == MUT_NONE)
                    CHECK(name, done);
                else
                    CHECK(name, mutated && !done && alerts > 0);
            }
        }
    }
    SSL_CTX_free(sctx);
    SSL_CTX_free(cctx);
    pqs_chain_free(&chain);
}

int main(void)
{
    pqs_seam_configure(PQS_OQSPROV_NAME, -1); /* ours alone: every row of its table */
    CHECK("providers_load", pqs_load_providers(NULL) == 0);
    CHECK("providers_named", strstr(pqs_provider_names(), PQS_OQSPROV_NAME) != NULL);

    /* The table against liboqs and the TLS-GROUP capability. */
    static pqs_group_info all[256];
    size_t nall = pqs_groups_enumerate(NULL, all, 256);
    size_t offered = 0, refused = 0;
    int caps_ok = 1, ids_unique = 1;
    char why[256];
    for (size_t i = 0; i < pqs_oqs_group_count(); i++) {
        const pqs_oqs_group *g = pqs_oqs_group_at(i);
        if (g->native)
            continue;
        if (pqs_oqs_refusal(g->name, why, sizeof why) != NULL) {
            refused++;
            continue;
        }
        offered++;
        int found = 0;
        for (size_t j = 0; j < nall; j++)
            if (strcmp(all[j].name, g->name) == 0 && all[j].id == g->code_point && all[j].is_kem)
                found = 1;
        caps_ok &= found;
        if (!found)
            printf("# %s 0x%04X not declared\n", g->name, g->code_point);
        for (size_t j = 0; j < nall; j++)
            if (all[j].id == g->code_point && strcmp(all[j].name, g->name) != 0) {
                ids_unique = 0;
                printf("# code point 0x%04X of %s also used by %s\n", g->code_point, g->name, all[j].name);
            }
    }
    printf("# %zu groups offered, %zu refused\n", offered, refused);
    CHECK("table_offered_all_non_mceliece", offered == 56);
    CHECK("tls_group_capability_every_row", caps_ok);
    CHECK("code_points_unique", ids_unique);
    CHECK("mceliece_refused", refused == 10 && pqs_oqs_refusal("mceliece348864", why, sizeof why) != NULL
                                  && strstr(why, "public key") && strstr(why, "key share"));
    CHECK("kyber_enabled_in_liboqs", pqs_oqs_refusal("kyber768", why, sizeof why) == NULL);
    SSL_CTX *ctx = SSL_CTX_new_ex(NULL, pqs_propq(), TLS_method());
    SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
    char vwhy[8192];
    CHECK("validate_mceliece_reason",
          !pqs_groups_validate(ctx, "x25519:mceliece6960119", vwhy, sizeof vwhy) && strchr(vwhy, '\n') == NULL
              && strstr(vwhy, "mceliece6960119 refused") != NULL);
    CHECK("validate_oqs_groups", pqs_groups_validate(ctx, "frodo640aes:p256_hqc128:x25519_sntrup761", vwhy, sizeof vwhy));
    SSL_CTX_free(ctx);

    for (size_t i = 0; i < pqs_oqs_group_count(); i++) {
        const pqs_oqs_group *g = pqs_oqs_group_at(i);
        if (!g->native && pqs_oqs_refusal(g->name, why, sizeof why) == NULL)
            test_row(g);
    }
    test_native_interop();
    test_tls();
    pqs_unload_providers();
    UNIT_EXIT();
}
