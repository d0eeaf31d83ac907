/* groups.c - TLS group / signature algorithm tables and validation (see groups.h). */
#include "groups.h"

#include "common.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/provider.h>
#include <openssl/safestack.h>

#include "oqsprov/oqsprov.h"
#include "provider_seam.h"

/* ---------------- groups ---------------- */

static void append(char *out, size_t outlen, const char *s)
{
    size_t l = strlen(out);
    if (l + 1 >= outlen)
        return;
    snprintf(out + l, outlen - l, "%s", s);
}

void pqs_groups_available(SSL_CTX *ctx, char *out, size_t outlen)
{
    out[0] = '\0';
    STACK_OF(OPENSSL_CSTRING) *sk = sk_OPENSSL_CSTRING_new_null();
    if (sk == NULL)
        return;
    if (SSL_CTX_get0_implemented_groups(ctx, 0, sk)) {
        for (int i = 0; i < sk_OPENSSL_CSTRING_num(sk); i++) {
            if (i)
                append(out, outlen, ",");
            append(out, outlen, sk_OPENSSL_CSTRING_value(sk, i));
        }
    }
    sk_OPENSSL_CSTRING_free(sk);
}

static bool list_names(const char *list, const char *name)
{
    const char *p = list;
    size_t nl = strlen(name);
    for (;;) {
        while (*p == '?' || *p == '*' || *p == '-')
            p++;
        size_t n = strcspn(p, ":/");
        if (n == nl && strncasecmp(p, name, n) == 0)
            return true;
        if (p[n] == '\0')
            return false;
        p += n + 1;
    }
}

/* The TLS 1.3 groups of LIBCTX's providers, ':'-separated. */
static void tls13_groups(OSSL_LIB_CTX *libctx, char *out, size_t outlen)
{
    out[0] = '\0';
    SSL_CTX *ctx = SSL_CTX_new_ex(libctx, NULL, TLS_method());
    if (ctx == NULL)
        return;
    SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
    SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION);
    pqs_groups_available(ctx, out, outlen);
    SSL_CTX_free(ctx);
    for (char *p = out; *p; p++)
        if (*p == ',')
            *p = ':';
}

void pqs_groups_tls13_list(char *out, size_t outlen) { tls13_groups(NULL, out, outlen); }

/* The TLS 1.3 groups OpenSSL itself implements (its default provider alone, in a library
 * context of its own): what the programs' providers add is not in it. */
static void openssl_own_groups(char *out, size_t outlen)
{
    out[0] = '\0';
    OSSL_LIB_CTX *libctx = OSSL_LIB_CTX_new();
    OSSL_PROVIDER *dflt = libctx != NULL ? OSSL_PROVIDER_load(libctx, "default") : NULL;
    if (dflt != NULL)
        tls13_groups(libctx, out, outlen);
    OSSL_PROVIDER_unload(dflt);
    OSSL_LIB_CTX_free(libctx);
}

void pqs_groups_server_default(char *out, size_t outlen)
{
    static const char *const first[] = {"X25519MLKEM768", "SecP256r1MLKEM768", "SecP384r1MLKEM1024",
                                         "MLKEM768", "MLKEM1024", "MLKEM512", "x25519", "secp256r1",
                                         "x448", "secp384r1", "secp521r1"};
    char all[4096], own[4096];
    pqs_groups_tls13_list(all, sizeof all);
    openssl_own_groups(own, sizeof own);
    out[0] = '\0';
    for (size_t i = 0; i < sizeof first / sizeof first[0]; i++) {
        if (!list_names(all, first[i]))
            continue;
        if (out[0])
            append(out, outlen, ":");
        append(out, outlen, first[i]);
    }
    char *save = NULL;
    for (char *tok = strtok_r(all, ":", &save); tok; tok = strtok_r(NULL, ":", &save)) {
        if (out[0] && list_names(out, tok))
            continue;
        /* The providers' groups (oqs-provider's, pqs-oqs's) are offered when named (--groups):
         * OpenSSL 3.5.x's server-side group selection read out of bounds with very long server
         * lists (oqsprov/README.md; fixed in 3.6.3, the default is kept until long lists are
         * re-tested). Asked of OpenSSL, not of pqs-oqs's table: oqs-provider 0.11.0 has groups
         * pqs-oqs lacks (bp256_mlkem512, ...). */
        if (!list_names(own, tok))
            continue;
        if (out[0])
            append(out, outlen, ":");
        append(out, outlen, tok);
    }
}

bool pqs_groups_validate(SSL_CTX *ctx, const char *list, char *why, size_t whylen)
{
    char avail[8192];
    if (list == NULL || *list == '\0') {
        pqs_groups_available(ctx, avail, sizeof avail);
        snprintf(why, whylen, "empty group list; available: %s", avail);
        return false;
    }
    STACK_OF(OPENSSL_CSTRING) *sk = sk_OPENSSL_CSTRING_new_null();
    if (sk == NULL || !SSL_CTX_get0_implemented_groups(ctx, 1, sk)) {
        sk_OPENSSL_CSTRING_free(sk);
        snprintf(why, whylen, "cannot list the implemented groups");
        return false;
    }
    bool ok = true;
    const char *p = list;
    while (ok) {
        size_t n = strcspn(p, ":/");
        char tok[128];
        const char *t = p;
        size_t tl = n;
        while (tl > 0 && (*t == '?' || *t == '*' || *t == '-' || *t == ' ')) {
            t++;
            tl--;
        }
        while (tl > 0 && t[tl - 1] == ' ')
            tl--;
        if (tl == 0 || tl >= sizeof tok) {
            pqs_groups_available(ctx, avail, sizeof avail);
            snprintf(why, whylen, "empty or overlong group name in '%s'; available: %s", list, avail);
            ok = false;
            break;
        }
        memcpy(tok, t, tl);
        tok[tl] = '\0';
        bool found = strcasecmp(tok, "DEFAULT") == 0;
        for (int i = 0; !found && i < sk_OPENSSL_CSTRING_num(sk); i++)
            found = strcasecmp(tok, sk_OPENSSL_CSTRING_value(sk, i)) == 0;
        char refused[256];
        if (!found && pqs_oqs_refusal(tok, refused, sizeof refused) != NULL) {
            /* A liboqs KEM the provider refuses at table-build time (Classic McEliece). */
            snprintf(why, whylen, "%s", refused);
            ok = false;
            break;
        }
        if (!found) {
            pqs_groups_available(ctx, avail, sizeof avail);
            snprintf(why, whylen, "unknown group '%s'; available: %s", tok, avail);
            ok = false;
            break;
        }
        if (p[n] == '\0')
            break;
        p += n + 1;
    }
    sk_OPENSSL_CSTRING_free(sk);
    return ok;
}

void pqs_groups_server_pref(const char *list, char *out, size_t outlen)
{
    snprintf(out, outlen, "%s", list);
    if (strchr(out, '/') != NULL)
        return;
    for (char *p = out; *p; p++)
        if (*p == ':')
            *p = '/';
}

void pqs_groups_hrr_client(const char *decoy, const char *list, char *out, size_t outlen)
{
    /* Strip any '*' the user put in list: only the decoy gets a key share. */
    char clean[1024];
    size_t k = 0;
    for (const char *p = list; *p && k + 1 < sizeof clean; p++)
        if (*p != '*')
            clean[k++] = (*p == '/') ? ':' : *p;
    clean[k] = '\0';
    snprintf(out, outlen, "*%s:%s", decoy, clean);
}

const char *pqs_groups_pick_decoy(const char *list)
{
    static const char *const cands[] = {"x25519", "secp256r1", "x448", "secp384r1"};
    for (size_t i = 0; i < sizeof cands / sizeof cands[0]; i++)
        if (!list_names(list, cands[i]))
            return cands[i];
    return "secp521r1";
}

typedef struct {
    pqs_group_info *out;
    size_t max, n;
} enum_state;

static int group_cb(const OSSL_PARAM params[], void *arg)
{
    enum_state *st = arg;
    pqs_group_info g;
    memset(&g, 0, sizeof g);
    const OSSL_PARAM *p;
    const char *s = NULL;
    if ((p = OSSL_PARAM_locate_const(params, OSSL_CAPABILITY_TLS_GROUP_NAME)) == NULL
        || !OSSL_PARAM_get_utf8_string_ptr(p, &s))
        return 1;
    snprintf(g.name, sizeof g.name, "%s", s);
    if ((p = OSSL_PARAM_locate_const(params, OSSL_CAPABILITY_TLS_GROUP_ALG)) != NULL
        && OSSL_PARAM_get_utf8_string_ptr(p, &s))
        snprintf(g.alg, sizeof g.alg, "%s", s);
    if ((p = OSSL_PARAM_locate_const(params, OSSL_CAPABILITY_TLS_GROUP_NAME_INTERNAL)) != NULL
        && OSSL_PARAM_get_utf8_string_ptr(p, &s))
        snprintf(g.internal, sizeof g.internal, "%s", s);
    unsigned id = 0;
    if ((p = OSSL_PARAM_locate_const(params, OSSL_CAPABILITY_TLS_GROUP_ID)) != NULL)
        OSSL_PARAM_get_uint(p, &id);
    g.id = id;
    int kem = 0;
    if ((p = OSSL_PARAM_locate_const(params, OSSL_CAPABILITY_TLS_GROUP_IS_KEM)) != NULL)
        OSSL_PARAM_get_int(p, &kem);
    g.is_kem = kem != 0;
    int mintls = 0;
    if ((p = OSSL_PARAM_locate_const(params, OSSL_CAPABILITY_TLS_GROUP_MIN_TLS)) != NULL)
        OSSL_PARAM_get_int(p, &mintls);
    g.min_tls = mintls;
    for (size_t i = 0; i < st->n; i++)
        if (st->out[i].id == g.id)
            return 1; /* alias of a group already listed */
    if (st->n < st->max)
        st->out[st->n++] = g;
    return 1;
}

static int provider_cb(OSSL_PROVIDER *prov, void *arg)
{
    OSSL_PROVIDER_get_capabilities(prov, "TLS-GROUP", group_cb, arg);
    return 1;
}

size_t pqs_groups_enumerate(OSSL_LIB_CTX *libctx, pqs_group_info *out, size_t max)
{
    enum_state st = {out, max, 0};
    OSSL_PROVIDER_do_all(libctx, provider_cb, &st);
    return st.n;
}

size_t pqs_groups_tuple_count(const char *list)
{
    size_t n = 1;
    for (const char *p = list; *p; p++)
        n += *p == '/';
    return n;
}

static bool tls13_builtin_sigalg(const char *name)
{
    size_t l = strlen(name);
    if (strncmp(name, "rsa_pkcs1_", 10) == 0 || strncmp(name, "dsa_", 4) == 0)
        return false;
    if ((l >= 5 && strcmp(name + l - 5, "_sha1") == 0) || (l >= 7 && strcmp(name + l - 7, "_sha224") == 0))
        return false;
    return true;
}

typedef struct {
    char *out;
    size_t outlen;
} sigalg_state;

static void add_unique(char *out, size_t outlen, const char *name)
{
    if (out[0] && list_names(out, name))
        return;
    if (out[0])
        append(out, outlen, ":");
    append(out, outlen, name);
}

static int sigalg_cb(const OSSL_PARAM params[], void *arg)
{
    sigalg_state *st = arg;
    const OSSL_PARAM *p = OSSL_PARAM_locate_const(params, OSSL_CAPABILITY_TLS_SIGALG_IANA_NAME);
    const char *name = NULL;
    if (p == NULL || !OSSL_PARAM_get_utf8_string_ptr(p, &name) || name == NULL)
        return 1;
    int min_tls = 0, max_tls = 0;
    if ((p = OSSL_PARAM_locate_const(params, OSSL_CAPABILITY_TLS_SIGALG_MIN_TLS)) != NULL)
        OSSL_PARAM_get_int(p, &min_tls);
    if ((p = OSSL_PARAM_locate_const(params, OSSL_CAPABILITY_TLS_SIGALG_MAX_TLS)) != NULL)
        OSSL_PARAM_get_int(p, &max_tls);
    /* 0 = no bound; -1 = not for TLS (DTLS only) */
    if (min_tls < 0 || max_tls < 0 || min_tls > TLS1_3_VERSION || (max_tls != 0 && max_tls < TLS1_3_VERSION))
        return 1;
    add_unique(st->out, st->outlen, name);
    return 1;
}

static int sigalg_provider_cb(OSSL_PROVIDER *prov, void *arg)
{
    OSSL_PROVIDER_get_capabilities(prov, "TLS-SIGALG", sigalg_cb, arg);
    return 1;
}

void pqs_sigalgs_tls13_list(char *out, size_t outlen)
{
    out[0] = '\0';
    char *builtin = SSL_get1_builtin_sigalgs(NULL);
    if (builtin != NULL) {
        char *save = NULL;
        for (char *tok = strtok_r(builtin, ":", &save); tok; tok = strtok_r(NULL, ":", &save))
            if (tls13_builtin_sigalg(tok))
                add_unique(out, outlen, tok);
        OPENSSL_free(builtin);
    }
    sigalg_state st = {out, outlen};
    OSSL_PROVIDER_do_all(NULL, sigalg_provider_cb, &st);
}

/* Finding the algorithm behind a listed name: the first capability entry that declares it. */
typedef struct {
    const char *capability, *name, *name_key, *alg_key, *alg_fallback_key;
    char alg[128];
} owner_state;

static int owner_cb(const OSSL_PARAM params[], void *arg)
{
    owner_state *st = arg;
    const char *s = NULL;
    const OSSL_PARAM *p = OSSL_PARAM_locate_const(params, st->name_key);
    if (st->alg[0] || p == NULL || !OSSL_PARAM_get_utf8_string_ptr(p, &s) || s == NULL
        || strcasecmp(s, st->name) != 0)
        return 1;
    /* libssl: a TLS-SIGALG without a signature name is fetched by its TLS-SIGALG name */
    if (((p = OSSL_PARAM_locate_const(params, st->alg_key)) != NULL
         || (p = OSSL_PARAM_locate_const(params, st->alg_fallback_key)) != NULL)
        && OSSL_PARAM_get_utf8_string_ptr(p, &s))
        snprintf(st->alg, sizeof st->alg, "%s", s);
    return 1;
}

static int owner_provider_cb(OSSL_PROVIDER *prov, void *arg)
{
    owner_state *st = arg;
    OSSL_PROVIDER_get_capabilities(prov, st->capability, owner_cb, st);
    return st->alg[0] == '\0'; /* stop at the first provider that declares it */
}

void pqs_list_provider(const char *name, bool sigs, char *out, size_t outlen)
{
    owner_state st = {sigs ? "TLS-SIGALG" : "TLS-GROUP", name, sigs ? OSSL_CAPABILITY_TLS_SIGALG_IANA_NAME : OSSL_CAPABILITY_TLS_GROUP_NAME,
                      sigs ? OSSL_CAPABILITY_TLS_SIGALG_SIG_NAME : OSSL_CAPABILITY_TLS_GROUP_ALG,
                      sigs ? OSSL_CAPABILITY_TLS_SIGALG_NAME : OSSL_CAPABILITY_TLS_GROUP_ALG, ""};
    OSSL_PROVIDER_do_all(NULL, owner_provider_cb, &st);
    snprintf(out, outlen, "%s", sigs && st.alg[0] == '\0' ? "default" : "?");
    if (st.alg[0] == '\0')
        return;
    /* The implementation libssl gets: fetched by algorithm name with the seam's query. */
    const OSSL_PROVIDER *prov = NULL;
    EVP_SIGNATURE *sig = NULL;
    EVP_KEYMGMT *km = NULL;
    ERR_set_mark();
    if (sigs && (sig = EVP_SIGNATURE_fetch(NULL, st.alg, pqs_propq())) != NULL)
        prov = EVP_SIGNATURE_get0_provider(sig);
    else if (!sigs && (km = EVP_KEYMGMT_fetch(NULL, st.alg, pqs_propq())) != NULL)
        prov = EVP_KEYMGMT_get0_provider(km);
    ERR_pop_to_mark();
    if (prov != NULL)
        snprintf(out, outlen, "%s", OSSL_PROVIDER_get0_name(prov));
    EVP_SIGNATURE_free(sig);
    EVP_KEYMGMT_free(km);
}

int pqs_print_list(const char *colon_list, bool sigs)
{
    if (colon_list == NULL || colon_list[0] == '\0')
        return 1;
    for (const char *p = colon_list; *p;) {
        size_t n = strcspn(p, ":");
        if (n > 0 && n < 128) {
            char name[128], prov[128];
            snprintf(name, sizeof name, "%.*s", (int)n, p);
            pqs_list_provider(name, sigs, prov, sizeof prov);
            printf("%s\t%s\n", name, prov);
        }
        p += n;
        if (*p == ':')
            p++;
    }
    return fflush(stdout) == 0 ? 0 : 1;
}

/* ---------------- signature algorithms ---------------- */

static const pqs_sig_alg sig_table[] = {
    {"ecdsa-p256", "EC", "P-256", 0, "SHA256", "ecdsa_secp256r1_sha256"},
    {"ecdsa-p384", "EC", "P-384", 0, "SHA384", "ecdsa_secp384r1_sha384"},
    {"ecdsa-p521", "EC", "P-521", 0, "SHA512", "ecdsa_secp521r1_sha512"},
    {"ed25519", "ED25519", NULL, 0, NULL, "ed25519"},
    {"ed448", "ED448", NULL, 0, NULL, "ed448"},
    {"rsa-2048", "RSA", NULL, 2048, "SHA256", "rsa_pss_rsae_sha256"},
    {"rsa-3072", "RSA", NULL, 3072, "SHA256", "rsa_pss_rsae_sha256"},
    {"rsa-4096", "RSA", NULL, 4096, "SHA256", "rsa_pss_rsae_sha256"},
    {"ml-dsa-44", "ML-DSA-44", NULL, 0, NULL, "mldsa44"},
    {"ml-dsa-65", "ML-DSA-65", NULL, 0, NULL, "mldsa65"},
    {"ml-dsa-87", "ML-DSA-87", NULL, 0, NULL, "mldsa87"},
    {"slh-dsa-sha2-128f", "SLH-DSA-SHA2-128f", NULL, 0, NULL, "slhdsa_sha2_128f"},
    {"slh-dsa-sha2-128s", "SLH-DSA-SHA2-128s", NULL, 0, NULL, "slhdsa_sha2_128s"},
    {"slh-dsa-shake-128f", "SLH-DSA-SHAKE-128f", NULL, 0, NULL, "slhdsa_shake_128f"},
    {"slh-dsa-shake-128s", "SLH-DSA-SHAKE-128s", NULL, 0, NULL, "slhdsa_shake_128s"},
    /* oqs-provider 0.11.0 (liboqs): pqshake name = its key type = its TLS 1.3 scheme name. The
     * hybrids (p256_falcon512, ...) sign with both keys; no digest: the provider hashes. */
#define OQSPROV_SIG(n) {n, n, NULL, 0, NULL, n}
    OQSPROV_SIG("falcon512"),
    OQSPROV_SIG("falconpadded512"),
    OQSPROV_SIG("falcon1024"),
    OQSPROV_SIG("falconpadded1024"),
    OQSPROV_SIG("p256_falcon512"),
    OQSPROV_SIG("rsa3072_falcon512"),
    OQSPROV_SIG("p521_falcon1024"),
    OQSPROV_SIG("mayo1"),
    OQSPROV_SIG("mayo2"),
    OQSPROV_SIG("mayo3"),
    OQSPROV_SIG("mayo5"),
    OQSPROV_SIG("p256_mayo1"),
    OQSPROV_SIG("CROSSrsdp128balanced"),
    OQSPROV_SIG("sphincssha2128fsimple"),
    OQSPROV_SIG("sphincssha2128ssimple"),
    OQSPROV_SIG("sphincsshake128fsimple"),
    OQSPROV_SIG("p256_sphincssha2128fsimple"),
    OQSPROV_SIG("p256_mldsa44"),
    OQSPROV_SIG("p384_mldsa65"),
    OQSPROV_SIG("p521_mldsa87"),
    /* SNOVA, new in oqs-provider 0.10/0.11 (liboqs 0.15.0) */
    OQSPROV_SIG("snova2454"),
    OQSPROV_SIG("snova2454esk"),
    OQSPROV_SIG("snova37172"),
    OQSPROV_SIG("snova2455"),
    OQSPROV_SIG("snova2965"),
    OQSPROV_SIG("p256_snova2454"),
    OQSPROV_SIG("p256_snova2454esk"),
    OQSPROV_SIG("p256_snova37172"),
    OQSPROV_SIG("p384_snova2455"),
    OQSPROV_SIG("p521_snova2965"),
#undef OQSPROV_SIG
};

size_t pqs_sig_count(void) { return sizeof sig_table / sizeof sig_table[0]; }

const pqs_sig_alg *pqs_sig_at(size_t i) { return i < pqs_sig_count() ? &sig_table[i] : NULL; }

const pqs_sig_alg *pqs_sig_lookup(const char *name)
{
    for (size_t i = 0; i < pqs_sig_count(); i++)
        if (strcasecmp(name, sig_table[i].name) == 0)
            return &sig_table[i];
    return NULL;
}

/* The ML-DSA composites (draft-ietf-lamps-pq-composite-sigs): oqs-provider 0.10.0 removed them
 * (0.9.0 had them in its tables but put all 13 on its run-time disabled list on OpenSSL >= 3.5),
 * so the pinned 0.11.0 has none (testbed/README.md, "ML-DSA composites"). pqshake keeps knowing
 * the names to say why, each with the OQS hybrid of the same ML-DSA level to use instead. */
static const struct {
    const char *name, *instead;
} sig_composites[] = {
    {"mldsa44_pss2048", "rsa3072_mldsa44"}, {"mldsa44_rsa2048", "rsa3072_mldsa44"},
    {"mldsa44_ed25519", "p256_mldsa44"},    {"mldsa44_p256", "p256_mldsa44"},
    {"mldsa44_bp256", "p256_mldsa44"},      {"mldsa65_pss3072", "p384_mldsa65"},
    {"mldsa65_rsa3072", "p384_mldsa65"},    {"mldsa65_p256", "p384_mldsa65"},
    {"mldsa65_bp256", "p384_mldsa65"},      {"mldsa65_ed25519", "p384_mldsa65"},
    {"mldsa87_p384", "p521_mldsa87"},       {"mldsa87_bp384", "p521_mldsa87"},
    {"mldsa87_ed448", "p521_mldsa87"},
};

const char *pqs_sig_unavailable(const char *name)
{
    /* one buffer per thread: the text names the algorithm, and callers print it at once */
    static _Thread_local char why[320];
    for (size_t i = 0; i < sizeof sig_composites / sizeof sig_composites[0]; i++)
        if (strcasecmp(name, sig_composites[i].name) == 0) {
            snprintf(why, sizeof why,
                     "the ML-DSA composite %s is not in oqs-provider 0.11.0 (removed in 0.10.0; "
                     "see testbed/README.md); use the hybrid %s instead",
                     sig_composites[i].name, sig_composites[i].instead);
            return why;
        }
    return NULL;
}

const pqs_sig_alg *pqs_sig_require(const char *prog, const char *opt, const char *name)
{
    const pqs_sig_alg *a = pqs_sig_lookup(name);
    if (a != NULL)
        return a;
    const char *why = pqs_sig_unavailable(name);
    if (why != NULL)
        pqs_usage_error(prog, "%s '%s': %s", opt, name, why);
    char avail[1024];
    pqs_sig_available(avail, sizeof avail);
    pqs_usage_error(prog, "unknown %s '%s'; available: %s", opt, name, avail);
}

void pqs_sig_available(char *out, size_t outlen)
{
    out[0] = '\0';
    for (size_t i = 0; i < pqs_sig_count(); i++) {
        if (i)
            append(out, outlen, ",");
        append(out, outlen, sig_table[i].name);
    }
}

void pqs_sig_available_print(FILE *f)
{
    char avail[1024];
    pqs_sig_available(avail, sizeof avail);
    fprintf(f, "%s\n", avail);
}

const char *pqs_sig_name_of_key(const EVP_PKEY *pk)
{
    if (pk == NULL)
        return "unknown";
    if (EVP_PKEY_is_a(pk, "EC")) {
        char g[64];
        size_t gl = 0;
        if (!EVP_PKEY_get_group_name(pk, g, sizeof g, &gl))
            return "unknown";
        if (strcasecmp(g, "prime256v1") == 0 || strcasecmp(g, "P-256") == 0)
            return "ecdsa-p256";
        if (strcasecmp(g, "secp384r1") == 0 || strcasecmp(g, "P-384") == 0)
            return "ecdsa-p384";
        if (strcasecmp(g, "secp521r1") == 0 || strcasecmp(g, "P-521") == 0)
            return "ecdsa-p521";
        return "unknown";
    }
    if (EVP_PKEY_is_a(pk, "RSA") || EVP_PKEY_is_a(pk, "RSA-PSS")) {
        int bits = EVP_PKEY_get_bits(pk);
        for (size_t i = 0; i < pqs_sig_count(); i++)
            if (sig_table[i].bits == (unsigned)bits)
                return sig_table[i].name;
        return "unknown";
    }
    for (size_t i = 0; i < pqs_sig_count(); i++)
        if (sig_table[i].bits == 0 && strcmp(sig_table[i].keytype, "EC") != 0
            && EVP_PKEY_is_a(pk, sig_table[i].keytype))
            return sig_table[i].name;
    return "unknown";
}
