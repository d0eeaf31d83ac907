/* awslc_speed.c - AWS-LC's key exchanges and signatures for pqs-speed --stacks aws-lc (see
 * awslc_speed.h). The only file of pqs-speed compiled against AWS-LC's headers: every name below
 * is AWS-LC's (renamed pqs_awslc_* by its prefix header), none OpenSSL's. */
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/digest.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/nid.h>

#include "awslc_speed.h"

const char *pqs_awslc_version(void)
{
    return OpenSSL_version(OPENSSL_VERSION);
}

void pqs_awslc_error(char *buf, size_t len)
{
    unsigned long e = ERR_peek_last_error();
    if (len > 0)
        buf[0] = '\0';
    if (e != 0 && len > 0)
        ERR_error_string_n(e, buf, len);
    ERR_clear_error();
}

/* ---------------- key exchange ---------------- */

/* One part of a group: a KEM (nid of the ML-KEM parameter set) or an ECDH curve. */
typedef struct {
    int kem_nid;   /* NID_MLKEM768, ...; 0: ECDH */
    int ec_type;   /* EVP_PKEY_X25519 or EVP_PKEY_EC (then ec_curve) */
    int ec_curve;
} part;

struct pqs_awslc_kex {
    part kem, ec;          /* kem.kem_nid 0: no KEM part; ec.ec_type 0: no ECDH part */
    EVP_PKEY *kem_key, *ec_key, *ec_peer;
    unsigned char ct[4096], ss[64];
    size_t ctlen;
};

/* A new key pair: type EVP_PKEY_KEM (kem_nid), EVP_PKEY_PQDSA (pqdsa_nid), EVP_PKEY_EC (curve),
 * or one without parameters (X25519, Ed25519). */
static EVP_PKEY *keygen(int type, int curve, int kem_nid, int pqdsa_nid)
{
    EVP_PKEY_CTX *c = EVP_PKEY_CTX_new_id(type, NULL);
    EVP_PKEY *k = NULL;
    int ok = c != NULL && (kem_nid == 0 || EVP_PKEY_CTX_kem_set_params(c, kem_nid) == 1)
             && EVP_PKEY_keygen_init(c) == 1
             && (curve == 0 || EVP_PKEY_CTX_set_ec_paramgen_curve_nid(c, curve) == 1)
             && (pqdsa_nid == 0 || EVP_PKEY_CTX_pqdsa_set_params(c, pqdsa_nid) == 1)
             && EVP_PKEY_keygen(c, &k) == 1;
    EVP_PKEY_CTX_free(c);
    if (!ok) {
        EVP_PKEY_free(k);
        return NULL;
    }
    return k;
}

static EVP_PKEY *keygen_part(const part *p)
{
    return p->kem_nid ? keygen(EVP_PKEY_KEM, 0, p->kem_nid, 0) : keygen(p->ec_type, p->ec_curve, 0, 0);
}

/* A TLS key share's bytes: the raw key (ML-KEM, X25519), the uncompressed point (P-256). */
static size_t share_bytes(const EVP_PKEY *k)
{
    size_t n = 0;
    if (EVP_PKEY_id(k) == EVP_PKEY_EC) {
        uint8_t *p = NULL;
        n = EVP_PKEY_get1_tls_encodedpoint(k, &p);
        OPENSSL_free(p);
    } else if (EVP_PKEY_get_raw_public_key(k, NULL, &n) != 1) {
        n = 0;
    }
    return n;
}

static int derive(EVP_PKEY *mine, EVP_PKEY *peer, unsigned char *out, size_t cap)
{
    EVP_PKEY_CTX *c = EVP_PKEY_CTX_new(mine, NULL);
    size_t len = cap;
    int ok = c != NULL && EVP_PKEY_derive_init(c) == 1 && EVP_PKEY_derive_set_peer(c, peer) == 1
             && EVP_PKEY_derive(c, out, &len) == 1;
    EVP_PKEY_CTX_free(c);
    return ok;
}

pqs_awslc_kex *pqs_awslc_kex_new(const char *group)
{
    static const struct {
        const char *name;
        part kem, ec;
    } groups[] = {
        {"MLKEM512", {NID_MLKEM512, 0, 0}, {0, 0, 0}},
        {"MLKEM768", {NID_MLKEM768, 0, 0}, {0, 0, 0}},
        {"MLKEM1024", {NID_MLKEM1024, 0, 0}, {0, 0, 0}},
        {"x25519", {0, 0, 0}, {0, EVP_PKEY_X25519, 0}},
        {"secp256r1", {0, 0, 0}, {0, EVP_PKEY_EC, NID_X9_62_prime256v1}},
        {"X25519MLKEM768", {NID_MLKEM768, 0, 0}, {0, EVP_PKEY_X25519, 0}},
        {"SecP256r1MLKEM768", {NID_MLKEM768, 0, 0}, {0, EVP_PKEY_EC, NID_X9_62_prime256v1}},
    };
    for (size_t i = 0; i < sizeof groups / sizeof groups[0]; i++) {
        if (strcmp(groups[i].name, group) != 0)
            continue;
        pqs_awslc_kex *k = calloc(1, sizeof *k);
        if (k == NULL)
            return NULL;
        k->kem = groups[i].kem;
        k->ec = groups[i].ec;
        if ((k->kem.kem_nid && (k->kem_key = keygen_part(&k->kem)) == NULL)
            || (k->ec.ec_type && ((k->ec_key = keygen_part(&k->ec)) == NULL || (k->ec_peer = keygen_part(&k->ec)) == NULL))
            || (k->kem.kem_nid && pqs_awslc_kex_encaps(k) != 1)) {
            pqs_awslc_kex_free(k);
            return NULL;
        }
        return k;
    }
    return NULL;
}

bool pqs_awslc_kex_is_kem(const pqs_awslc_kex *k)
{
    return k->kem.kem_nid != 0;
}

size_t pqs_awslc_kex_share_bytes(const pqs_awslc_kex *k)
{
    return (k->kem_key ? share_bytes(k->kem_key) : 0) + (k->ec_key ? share_bytes(k->ec_key) : 0);
}

size_t pqs_awslc_kex_ct_bytes(const pqs_awslc_kex *k)
{
    return (k->kem_key ? k->ctlen : 0) + (k->ec_peer ? share_bytes(k->ec_peer) : 0);
}

int pqs_awslc_kex_keygen(void *arg)
{
    pqs_awslc_kex *k = arg;
    EVP_PKEY *a = k->kem.kem_nid ? keygen_part(&k->kem) : NULL, *b = k->ec.ec_type ? keygen_part(&k->ec) : NULL;
    int ok = (k->kem.kem_nid == 0 || a != NULL) && (k->ec.ec_type == 0 || b != NULL);
    EVP_PKEY_free(a);
    EVP_PKEY_free(b);
    return ok;
}

/* The server's side: encapsulate to the client's KEM key; with an ECDH part, its own key pair
 * and the derivation against the client's share. */
int pqs_awslc_kex_encaps(void *arg)
{
    pqs_awslc_kex *k = arg;
    EVP_PKEY_CTX *c = EVP_PKEY_CTX_new(k->kem_key, NULL);
    size_t sslen = sizeof k->ss;
    k->ctlen = sizeof k->ct;
    int ok = c != NULL && EVP_PKEY_encapsulate(c, k->ct, &k->ctlen, k->ss, &sslen) == 1;
    EVP_PKEY_CTX_free(c);
    if (ok && k->ec.ec_type) {
        EVP_PKEY *e = keygen_part(&k->ec);
        ok = e != NULL && derive(e, k->ec_key, k->ss, sizeof k->ss);
        EVP_PKEY_free(e);
    }
    return ok;
}

/* The client's side: decapsulate the server's ciphertext; with an ECDH part, derive against the
 * server's share. */
int pqs_awslc_kex_decaps(void *arg)
{
    pqs_awslc_kex *k = arg;
    EVP_PKEY_CTX *c = EVP_PKEY_CTX_new(k->kem_key, NULL);
    unsigned char ss[64];
    size_t sslen = sizeof ss;
    int ok = c != NULL && EVP_PKEY_decapsulate(c, ss, &sslen, k->ct, k->ctlen) == 1;
    EVP_PKEY_CTX_free(c);
    if (ok && k->ec.ec_type)
        ok = derive(k->ec_key, k->ec_peer, ss, sizeof ss);
    return ok;
}

int pqs_awslc_kex_derive(void *arg)
{
    pqs_awslc_kex *k = arg;
    return derive(k->ec_key, k->ec_peer, k->ss, sizeof k->ss);
}

void pqs_awslc_kex_free(pqs_awslc_kex *k)
{
    if (k == NULL)
        return;
    EVP_PKEY_free(k->kem_key);
    EVP_PKEY_free(k->ec_key);
    EVP_PKEY_free(k->ec_peer);
    free(k);
}

/* ---------------- signatures ---------------- */

struct pqs_awslc_sig {
    int type, param;       /* EVP_PKEY_EC (param: curve), EVP_PKEY_ED25519, EVP_PKEY_PQDSA (param: NID_MLDSA*) */
    const EVP_MD *md;      /* ECDSA: SHA-256; NULL for the others (they hash the message themselves) */
    EVP_PKEY *key;
    unsigned char msg[128];
    unsigned char *sig;
    size_t siglen, sigcap;
};

static EVP_PKEY *sig_keygen(const pqs_awslc_sig *s)
{
    return keygen(s->type, s->type == EVP_PKEY_EC ? s->param : 0, 0, s->type == EVP_PKEY_PQDSA ? s->param : 0);
}

pqs_awslc_sig *pqs_awslc_sig_new(const char *name)
{
    static const struct {
        const char *name;
        int type, param;
    } sigs[] = {
        {"ecdsa-p256", EVP_PKEY_EC, NID_X9_62_prime256v1},
        {"ed25519", EVP_PKEY_ED25519, 0},
        {"ml-dsa-44", EVP_PKEY_PQDSA, NID_MLDSA44},
        {"ml-dsa-65", EVP_PKEY_PQDSA, NID_MLDSA65},
        {"ml-dsa-87", EVP_PKEY_PQDSA, NID_MLDSA87},
    };
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        if (strcmp(sigs[i].name, name) != 0)
            continue;
        pqs_awslc_sig *s = calloc(1, sizeof *s);
        if (s == NULL)
            return NULL;
        s->type = sigs[i].type;
        s->param = sigs[i].param;
        s->md = s->type == EVP_PKEY_EC ? EVP_sha256() : NULL;
        memset(s->msg, 0x20, sizeof s->msg);
        int max = 0;
        if ((s->key = sig_keygen(s)) == NULL || (max = EVP_PKEY_size(s->key)) <= 0
            || (s->sig = malloc((size_t)max)) == NULL) {
            pqs_awslc_sig_free(s);
            return NULL;
        }
        s->sigcap = (size_t)max;
        if (pqs_awslc_sig_sign(s) != 1) {
            pqs_awslc_sig_free(s);
            return NULL;
        }
        return s;
    }
    return NULL;
}

size_t pqs_awslc_sig_pk_bytes(const pqs_awslc_sig *s)
{
    return share_bytes(s->key);
}

size_t pqs_awslc_sig_bytes(const pqs_awslc_sig *s)
{
    return s->siglen;
}

int pqs_awslc_sig_keygen(void *arg)
{
    EVP_PKEY *k = sig_keygen(arg);
    EVP_PKEY_free(k);
    return k != NULL;
}

int pqs_awslc_sig_sign(void *arg)
{
    pqs_awslc_sig *s = arg;
    EVP_MD_CTX *m = EVP_MD_CTX_new();
    size_t len = s->sigcap;
    int ok = m != NULL && EVP_DigestSignInit(m, NULL, s->md, NULL, s->key) == 1
             && EVP_DigestSign(m, s->sig, &len, s->msg, sizeof s->msg) == 1;
    if (ok)
        s->siglen = len;
    EVP_MD_CTX_free(m);
    return ok;
}

int pqs_awslc_sig_verify(void *arg)
{
    pqs_awslc_sig *s = arg;
    EVP_MD_CTX *m = EVP_MD_CTX_new();
    int ok = m != NULL && EVP_DigestVerifyInit(m, NULL, s->md, NULL, s->key) == 1
             && EVP_DigestVerify(m, s->sig, s->siglen, s->msg, sizeof s->msg) == 1;
    EVP_MD_CTX_free(m);
    return ok;
}

void pqs_awslc_sig_free(pqs_awslc_sig *s)
{
    if (s == NULL)
        return;
    EVP_PKEY_free(s->key);
    free(s->sig);
    free(s);
}
