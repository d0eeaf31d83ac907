/* certs.c - certificate chain generation (see certs.h). */
#include "certs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>

#include "common.h"
#include "provider_seam.h"

EVP_PKEY *pqs_keygen(OSSL_LIB_CTX *libctx, const pqs_sig_alg *alg)
{
    EVP_PKEY *pk = NULL;
    EVP_PKEY_CTX *kctx = EVP_PKEY_CTX_new_from_name(libctx, alg->keytype, pqs_propq());
    if (kctx == NULL || EVP_PKEY_keygen_init(kctx) <= 0)
        goto out;
    if (alg->param != NULL) {
        OSSL_PARAM p[2] = {
            OSSL_PARAM_construct_utf8_string(OSSL_PKEY_PARAM_GROUP_NAME, (char *)alg->param, 0),
            OSSL_PARAM_construct_end()};
        if (EVP_PKEY_CTX_set_params(kctx, p) <= 0)
            goto out;
    }
    if (alg->bits != 0) {
        size_t bits = alg->bits;
        OSSL_PARAM p[2] = {OSSL_PARAM_construct_size_t(OSSL_PKEY_PARAM_RSA_BITS, &bits),
                           OSSL_PARAM_construct_end()};
        if (EVP_PKEY_CTX_set_params(kctx, p) <= 0)
            goto out;
    }
    if (EVP_PKEY_generate(kctx, &pk) <= 0)
        pk = NULL;
out:
    EVP_PKEY_CTX_free(kctx);
    return pk;
}

static int add_ext(X509 *cert, X509 *issuer, int nid, const char *value)
{
    X509V3_CTX v3;
    X509V3_set_ctx_nodb(&v3);
    X509V3_set_ctx(&v3, issuer, cert, NULL, NULL, 0);
    X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &v3, nid, value);
    if (ext == NULL)
        return -1;
    int ok = X509_add_ext(cert, ext, -1);
    X509_EXTENSION_free(ext);
    return ok ? 0 : -1;
}

/* A non-critical extension `oid` whose extnValue is DER OCTET STRING { payload }. */
static int add_octets_ext(X509 *cert, const char *oid, const unsigned char *payload, int len)
{
    int rc = -1;
    ASN1_OBJECT *obj = OBJ_txt2obj(oid, 1);
    ASN1_OCTET_STRING *inner = ASN1_OCTET_STRING_new(), *outer = ASN1_OCTET_STRING_new();
    unsigned char *der = NULL;
    int dlen;
    if (obj != NULL && inner != NULL && outer != NULL && ASN1_OCTET_STRING_set(inner, payload, len)
        && (dlen = i2d_ASN1_OCTET_STRING(inner, &der)) > 0 && ASN1_OCTET_STRING_set(outer, der, dlen)) {
        X509_EXTENSION *ext = X509_EXTENSION_create_by_OBJ(NULL, obj, 0, outer);
        rc = ext != NULL && X509_add_ext(cert, ext, -1) ? 0 : -1;
        X509_EXTENSION_free(ext);
    }
    OPENSSL_free(der);
    ASN1_OCTET_STRING_free(inner);
    ASN1_OCTET_STRING_free(outer);
    ASN1_OBJECT_free(obj);
    return rc;
}

/* The synthetic size of a leaf (pqs_chain_spec): a padding extension and an SCT list. */
#define PQS_PAD_OID "2.25.200387411309513914530781207486521836389"
#define PQS_SCT_LIST_OID "1.3.6.1.4.1.11129.2.4.2"

static int add_size_exts(X509 *x, int pad_bytes, int scts)
{
    if (pad_bytes > 0) {
        unsigned char *pad = OPENSSL_malloc((size_t)pad_bytes);
        int rc = pad != NULL && RAND_bytes(pad, pad_bytes) == 1 ? add_octets_ext(x, PQS_PAD_OID, pad, pad_bytes) : -1;
        OPENSSL_free(pad);
        if (rc != 0)
            return -1;
    }
    if (scts > 0) {
        /* SignedCertificateTimestampList: list<2>, each SCT<2>: version 0, log id, timestamp (ms),
         * no extensions, sha256/ecdsa, a DER ECDSA signature (r 32, s 33 bytes) of random bytes */
        unsigned char list[2 + PQS_CERT_SCTS_MAX * (2 + PQS_SCT_BYTES)], *p = list + 2;
        uint64_t ms = (uint64_t)time(NULL) * 1000;
        for (int i = 0; i < scts; i++) {
            unsigned char *s = p + 2;
            s[0] = 0;
            if (RAND_bytes(s + 1, 32) != 1)
                return -1;
            for (int b = 0; b < 8; b++)
                s[33 + b] = (unsigned char)(ms >> (56 - 8 * b));
            s[41] = 0, s[42] = 0, s[43] = 4, s[44] = 3, s[45] = 0, s[46] = 71;
            unsigned char *sig = s + 47;
            sig[0] = 0x30, sig[1] = 69, sig[2] = 0x02, sig[3] = 32, sig[36] = 0x02, sig[37] = 33, sig[38] = 0;
            if (RAND_bytes(sig + 4, 32) != 1 || RAND_bytes(sig + 39, 32) != 1)
                return -1;
            sig[4] = (unsigned char)((sig[4] & 0x7f) | 0x01); /* positive, minimal */
            sig[39] |= 0x80;                                   /* needs the leading 0 */
            p[0] = 0, p[1] = PQS_SCT_BYTES;
            p += 2 + PQS_SCT_BYTES;
        }
        int n = (int)(p - list) - 2;
        list[0] = (unsigned char)(n >> 8), list[1] = (unsigned char)n;
        if (add_octets_ext(x, PQS_SCT_LIST_OID, list, n + 2) != 0)
            return -1;
    }
    return 0;
}

/* Creates a certificate for subject key pk, signed by issuer_key (issuer NULL: self-signed);
 * a leaf gets the spec's synthetic size (spec NULL: none). */
static X509 *make_cert(OSSL_LIB_CTX *libctx, const char *cn, EVP_PKEY *pk, X509 *issuer,
                       EVP_PKEY *issuer_key, const pqs_sig_alg *issuer_alg, bool ca, pqs_chain_role role,
                       long serial, const pqs_chain_spec *spec)
{
    X509 *x = X509_new_ex(libctx, pqs_propq());
    if (x == NULL)
        return NULL;
    X509_NAME *name = X509_NAME_new();
    if (name == NULL)
        goto fail;
    X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, (const unsigned char *)"pqshake testbed", -1, -1, 0);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0);
    if (!X509_set_version(x, X509_VERSION_3) || !ASN1_INTEGER_set(X509_get_serialNumber(x), serial)
        || !X509_set_subject_name(x, name)
        || !X509_set_issuer_name(x, issuer ? X509_get_subject_name(issuer) : name)
        || !X509_gmtime_adj(X509_getm_notBefore(x), -3600)
        || !X509_gmtime_adj(X509_getm_notAfter(x), 30L * 24 * 3600) || !X509_set_pubkey(x, pk)) {
        X509_NAME_free(name);
        goto fail;
    }
    X509_NAME_free(name);
    X509 *iss = issuer ? issuer : x;
    if (add_ext(x, iss, NID_subject_key_identifier, "hash") != 0
        || add_ext(x, iss, NID_authority_key_identifier, "keyid:always") != 0)
        goto fail;
    if (ca) {
        if (add_ext(x, iss, NID_basic_constraints, "critical,CA:TRUE") != 0
            || add_ext(x, iss, NID_key_usage, "critical,keyCertSign,cRLSign") != 0)
            goto fail;
    } else {
        bool server = role == PQS_CHAIN_SERVER;
        if (add_ext(x, iss, NID_basic_constraints, "critical,CA:FALSE") != 0
            || add_ext(x, iss, NID_key_usage, "critical,digitalSignature,keyEncipherment") != 0
            || add_ext(x, iss, NID_ext_key_usage, server ? "serverAuth" : "clientAuth") != 0
            || (server && add_ext(x, iss, NID_subject_alt_name, "DNS:localhost,IP:127.0.0.1,IP:::1") != 0)
            || (spec != NULL && add_size_exts(x, spec->pad_bytes, spec->scts) != 0))
            goto fail;
    }
    /* Certificate signature: digest for EC/RSA, none (pure) for EdDSA, ML-DSA and SLH-DSA. */
    EVP_MD_CTX *mctx = EVP_MD_CTX_new();
    if (mctx == NULL)
        goto fail;
    if (EVP_DigestSignInit_ex(mctx, NULL, issuer_alg->digest, libctx, pqs_propq(), issuer_key, NULL) <= 0
        || X509_sign_ctx(x, mctx) <= 0) {
        EVP_MD_CTX_free(mctx);
        goto fail;
    }
    EVP_MD_CTX_free(mctx);
    return x;
fail:
    X509_free(x);
    return NULL;
}

static void errmsg(char *err, size_t errlen, const char *what)
{
    unsigned long e = ERR_get_error();
    char buf[256] = "";
    if (e)
        ERR_error_string_n(e, buf, sizeof buf);
    snprintf(err, errlen, "%s%s%s", what, e ? ": " : "", buf);
    ERR_clear_error();
}

int pqs_chain_make(OSSL_LIB_CTX *libctx, const pqs_chain_spec *spec, pqs_chain_role role, pqs_chain *out,
                   char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    int depth = spec->depth;
    if (depth < 1 || depth > PQS_CHAIN_MAX_DEPTH) {
        snprintf(err, errlen, "chain depth must be 1..%d", PQS_CHAIN_MAX_DEPTH);
        return -1;
    }
    if (spec->pad_bytes < 0 || spec->pad_bytes > PQS_CERT_PAD_MAX || spec->scts < 0 || spec->scts > PQS_CERT_SCTS_MAX) {
        snprintf(err, errlen, "padding 0..%d bytes and 0..%d SCTs", PQS_CERT_PAD_MAX, PQS_CERT_SCTS_MAX);
        return -1;
    }
    const pqs_sig_alg *leaf_alg = spec->leaf;
    const pqs_sig_alg *inter_alg = spec->inter ? spec->inter : leaf_alg;
    const pqs_sig_alg *root_alg = spec->root ? spec->root : leaf_alg;
    int64_t t0 = pqs_mono_ns();
    out->depth = depth;
    EVP_PKEY *keys[PQS_CHAIN_MAX_DEPTH + 1] = {0}; /* keys[0] root, keys[1..] intermediates */
    int rc = -1;

    keys[0] = pqs_keygen(libctx, root_alg);
    if (keys[0] == NULL) {
        errmsg(err, errlen, "root key generation failed");
        goto done;
    }
    bool client = role == PQS_CHAIN_CLIENT;
    out->root = make_cert(libctx, client ? "pqshake client root CA" : "pqshake root CA", keys[0], NULL,
                          keys[0], root_alg, true, role, 1, NULL);
    if (out->root == NULL) {
        errmsg(err, errlen, "root certificate failed");
        goto done;
    }
    /* Intermediates: from the top (issued by the root) down; each signs with its issuer's algorithm. */
    X509 *issuer = out->root;
    EVP_PKEY *issuer_key = keys[0];
    const pqs_sig_alg *issuer_alg = root_alg;
    X509 *tmp[PQS_CHAIN_MAX_DEPTH] = {0};
    int n_inter = depth - 1;
    for (int k = 0; k < n_inter; k++) {
        keys[k + 1] = pqs_keygen(libctx, inter_alg);
        char cn[64];
        snprintf(cn, sizeof cn, "pqshake intermediate CA %d", k + 1);
        if (keys[k + 1] == NULL
            || (tmp[k] = make_cert(libctx, cn, keys[k + 1], issuer, issuer_key, issuer_alg, true, role, 2 + k,
                                   NULL)) == NULL) {
            errmsg(err, errlen, "intermediate certificate failed");
            for (int m = 0; m < k; m++)
                X509_free(tmp[m]);
            goto done;
        }
        issuer = tmp[k];
        issuer_key = keys[k + 1];
        issuer_alg = inter_alg;
    }
    /* inter[0] must be the leaf's issuer: reverse. */
    for (int k = 0; k < n_inter; k++)
        out->inter[k] = tmp[n_inter - 1 - k];
    out->n_inter = n_inter;

    out->leaf_key = pqs_keygen(libctx, leaf_alg);
    if (out->leaf_key == NULL) {
        errmsg(err, errlen, "leaf key generation failed");
        goto done;
    }
    out->leaf = make_cert(libctx, client ? "pqshake client" : "localhost", out->leaf_key, issuer, issuer_key,
                          issuer_alg, false, role, 100, spec);
    if (out->leaf == NULL) {
        errmsg(err, errlen, "leaf certificate failed");
        goto done;
    }
    rc = 0;
done:
    for (int k = 0; k <= PQS_CHAIN_MAX_DEPTH; k++)
        EVP_PKEY_free(keys[k]);
    out->gen_ns = pqs_mono_ns() - t0;
    if (rc != 0)
        pqs_chain_free(out);
    return rc;
}

int pqs_chain_generate(OSSL_LIB_CTX *libctx, const pqs_sig_alg *leaf_alg,
                       const pqs_sig_alg *ca_alg, int depth, pqs_chain_role role, pqs_chain *out,
                       char *err, size_t errlen)
{
    pqs_chain_spec spec = {.leaf = leaf_alg, .inter = ca_alg, .root = ca_alg, .depth = depth};
    return pqs_chain_make(libctx, &spec, role, out, err, errlen);
}

/* Writes DIR/NAME atomically: the private key (if key) or the n certificates, PEM. */
static int write_atomic(const char *dir, const char *name, X509 *const *certs, int n, EVP_PKEY *key,
                        char *err, size_t errlen)
{
    char path[4096], tmp[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, key ? 0600 : 0644);
    if (fd < 0) {
        snprintf(err, errlen, "cannot create %s: %s", tmp, strerror(errno));
        return -1;
    }
    FILE *fp = fdopen(fd, "w");
    if (fp == NULL) {
        close(fd);
        unlink(tmp);
        snprintf(err, errlen, "cannot open %s", tmp);
        return -1;
    }
    bool ok = key == NULL || PEM_write_PrivateKey(fp, key, NULL, NULL, 0, NULL, NULL) == 1;
    for (int i = 0; i < n && ok; i++)
        ok = PEM_write_X509(fp, certs[i]) == 1;
    ok = ok && fflush(fp) == 0 && fsync(fd) == 0;
    ok = (fclose(fp) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

int pqs_chain_write(const pqs_chain *c, const char *dir, const char *prefix, bool with_key,
                    bool trust_intermediates, char *err, size_t errlen)
{
    X509 *chain[PQS_CHAIN_MAX_DEPTH + 1];
    int n = 0;
    char name[64];
    chain[n++] = c->leaf;
    for (int k = 0; k < c->n_inter; k++)
        chain[n++] = c->inter[k];
    /* key and chain first: a script waiting for ca.pem finds them all. */
    snprintf(name, sizeof name, "%skey.pem", prefix);
    if (with_key && write_atomic(dir, name, NULL, 0, c->leaf_key, err, errlen) != 0)
        return -1;
    snprintf(name, sizeof name, "%schain.pem", prefix);
    if (write_atomic(dir, name, chain, n, NULL, err, errlen) != 0)
        return -1;
    X509 *anchors[PQS_CHAIN_MAX_DEPTH + 1];
    int na = 0;
    anchors[na++] = c->root;
    for (int k = 0; trust_intermediates && k < c->n_inter; k++)
        anchors[na++] = c->inter[k];
    snprintf(name, sizeof name, "%sca.pem", prefix);
    if (write_atomic(dir, name, anchors, na, NULL, err, errlen) != 0)
        return -1;
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    return 0;
}

int pqs_chain_use(SSL_CTX *ctx, const pqs_chain *c, bool send_intermediates)
{
    if (SSL_CTX_use_certificate(ctx, c->leaf) != 1 || SSL_CTX_use_PrivateKey(ctx, c->leaf_key) != 1
        || SSL_CTX_check_private_key(ctx) != 1)
        return -1;
    for (int k = 0; send_intermediates && k < c->n_inter; k++) {
        X509_up_ref(c->inter[k]);
        if (SSL_CTX_add1_chain_cert(ctx, c->inter[k]) != 1) {
            X509_free(c->inter[k]);
            return -1;
        }
        X509_free(c->inter[k]);
    }
    return 0;
}

void pqs_chain_free(pqs_chain *c)
{
    EVP_PKEY_free(c->leaf_key);
    X509_free(c->leaf);
    for (int k = 0; k < c->n_inter; k++)
        X509_free(c->inter[k]);
    X509_free(c->root);
    int64_t g = c->gen_ns;
    memset(c, 0, sizeof *c);
    c->gen_ns = g;
}

static const struct {
    const char *name;
    int id;
} comp_algs[] = {{"zlib", TLSEXT_comp_cert_zlib}, {"brotli", TLSEXT_comp_cert_brotli}, {"zstd", TLSEXT_comp_cert_zstd}};

bool pqs_cert_comp_on(const char *list)
{
    return list != NULL && strcmp(list, "off") != 0;
}

int pqs_ctx_cert_compression(SSL_CTX *ctx, const char *list, char *why, size_t whylen)
{
    if (!pqs_cert_comp_on(list)) {
        SSL_CTX_set_options(ctx, SSL_OP_NO_TX_CERTIFICATE_COMPRESSION | SSL_OP_NO_RX_CERTIFICATE_COMPRESSION);
        return 0;
    }
    int algs[4];
    size_t n = 0;
    char buf[64];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
        size_t k = 0;
        while (k < sizeof comp_algs / sizeof comp_algs[0] && strcmp(comp_algs[k].name, t) != 0)
            k++;
        if (k == sizeof comp_algs / sizeof comp_algs[0] || n == 3) {
            snprintf(why, whylen, "bad --cert-comp '%s': zlib, brotli and zstd, ','-separated, or off", list);
            return -1;
        }
        algs[n++] = comp_algs[k].id;
    }
    SSL_CTX_clear_options(ctx, SSL_OP_NO_TX_CERTIFICATE_COMPRESSION | SSL_OP_NO_RX_CERTIFICATE_COMPRESSION);
    if (n == 0 || SSL_CTX_set1_cert_comp_preference(ctx, algs, n) != 1) {
        snprintf(why, whylen, "bad --cert-comp '%s': this OpenSSL has not all of them (built without zlib, "
                 "brotli or zstd?)", list);
        ERR_clear_error();
        return -1;
    }
    return 0;
}

/* One algorithm's compressed Certificate message: OpenSSL makes it only through a TLS connection
 * object (ssl_cert_comp.c: SSL_CONNECTION_FROM_SSL of SSL_new(ctx)), which a QUIC context's
 * SSL_new is not, so it gave 0 bytes there and OpenSSL's QUIC server sent every chain whole.
 * The message is the same over TCP and QUIC (RFC 9001 carries TLS's Certificate unchanged), so a
 * QUIC context gets the form made on a scratch TLS context holding the same chain. */
static size_t comp_one(SSL_CTX *ctx, SSL_CTX **scratch, const pqs_chain *c, bool send_intermediates, int alg,
                       unsigned char **data, size_t *orig)
{
    size_t n = SSL_CTX_get1_compressed_cert(ctx, alg, data, orig);
    if (n > 0 || *orig > 0 || c == NULL)
        return n;
    if (*scratch == NULL) {
        *scratch = SSL_CTX_new_ex(NULL, pqs_propq(), TLS_server_method());
        if (*scratch != NULL && pqs_chain_use(*scratch, c, send_intermediates) != 0) {
            SSL_CTX_free(*scratch);
            *scratch = NULL;
        }
    }
    return *scratch == NULL ? 0 : SSL_CTX_get1_compressed_cert(*scratch, alg, data, orig);
}

void pqs_cert_comp_store(SSL_CTX *ctx, const pqs_chain *c, bool send_intermediates, const char *list, char *out,
                         size_t outlen)
{
    out[0] = '\0';
    char kept[160] = "", grew[96] = "";
    SSL_CTX *scratch = NULL;
    for (size_t k = 0; pqs_cert_comp_on(list) && k < sizeof comp_algs / sizeof comp_algs[0]; k++) {
        if (strstr(list, comp_algs[k].name) == NULL)
            continue;
        unsigned char *data = NULL;
        size_t orig = 0, n = comp_one(ctx, &scratch, c, send_intermediates, comp_algs[k].id, &data, &orig);
        bool smaller = n > 0 && n < orig && SSL_CTX_set1_compressed_cert(ctx, comp_algs[k].id, data, n, orig) == 1;
        char *dst = smaller ? kept : grew;
        size_t cap = dst == kept ? sizeof kept : sizeof grew, len = strlen(dst);
        snprintf(dst + len, cap - len, "%s%s:%zu/%zu", len ? "," : "", comp_algs[k].name, n, orig);
        OPENSSL_free(data);
    }
    SSL_CTX_free(scratch);
    ERR_clear_error();
    snprintf(out, outlen, "%s%s%s", kept, *grew ? (*kept ? "; none smaller: " : "none smaller: ") : "", grew);
}

size_t pqs_chain_der_bytes(const pqs_chain *c, bool with_intermediates)
{
    size_t n = (size_t)i2d_X509(c->leaf, NULL);
    for (int k = 0; with_intermediates && k < c->n_inter; k++)
        n += (size_t)i2d_X509(c->inter[k], NULL);
    return n;
}
