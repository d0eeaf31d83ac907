/* speed_retry.c - pqs-speed: the QUIC Retry integrity tag (RFC 9001, section 5.8) as each QUIC
 * engine makes and checks it (retry lines); see speed.h.
 *
 * The tag is AES-128-GCM with a fixed key and nonce over an empty plaintext, the Retry
 * pseudo-packet (original DCID length and bytes, then the Retry packet without its tag) as
 * associated data: the "authenticate" shape the QUIC working group chose after a 2019
 * micro-benchmark. Timed here, per engine:
 *  - openssl: OpenSSL's QUIC code (ossl_quic_calculate_retry_integrity_tag, not exported) fetches
 *    AES-128-GCM, makes a cipher context and sets the key on every call, then feeds the
 *    pseudo-packet as AAD; its check recomputes the tag and compares (CRYPTO_memcmp). The same
 *    EVP calls in the same order: create, check.
 *  - ngtcp2: the server's create is ngtcp2_crypto_write_retry (the whole Retry packet: header,
 *    token, and a context with the key set up on each call); the client's check is its encrypt
 *    callback over the pseudo-packet with the Retry context it set up once per connection, then a
 *    compare (what ngtcp2_pkt_verify_retry_tag, not exported, does): ngtcp2_crypto_encrypt.
 *  - evp-prepared: the floor, a context keyed once: create seals the AAD (auth_only's shape),
 *    check opens it with the expected tag (verify_only's).
 * Before timing, every engine's result is checked: the tag of RFC 9001 appendix A.4's Retry must
 * come out (openssl, evp-prepared), and ngtcp2's packet must carry a tag the others accept. */
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>

#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>
#include <ngtcp2/ngtcp2_crypto_ossl.h>

#include "provider_seam.h"
#include "speed.h"

#define TAGLEN 16

/* RFC 9001, 5.8: QUIC version 1's Retry key and nonce. */
static const unsigned char retry_key[16] = {0xbe, 0x0c, 0x69, 0x0b, 0x9f, 0x66, 0x57, 0x5a,
                                            0x1d, 0x76, 0x6b, 0x54, 0xe3, 0x68, 0xc8, 0x4e};
static const unsigned char retry_nonce[12] = {0x46, 0x15, 0x99, 0xd3, 0x5d, 0x63,
                                              0x2b, 0xf2, 0x23, 0x98, 0x25, 0xbb};
/* RFC 9001, A.4: the server's Retry to the client Initial of A.2 (original DCID 8394c8f03e515708):
 * no DCID, SCID f067a5502a4262b5, token "token", then the tag. */
static const unsigned char a4_odcid[8] = {0x83, 0x94, 0xc8, 0xf0, 0x3e, 0x51, 0x57, 0x08};
static const unsigned char a4_retry[] = {0xff, 0x00, 0x00, 0x00, 0x01, 0x00, 0x08, 0xf0, 0x67, 0xa5, 0x50, 0x2a,
                                         0x42, 0x62, 0xb5, 0x74, 0x6f, 0x6b, 0x65, 0x6e, 0x04, 0xa2, 0x65, 0xba,
                                         0x2e, 0xff, 0x4d, 0x82, 0x90, 0x58, 0xfb, 0x3f, 0x0f, 0x24, 0x96, 0xba};

typedef struct {
    unsigned char pseudo[128]; /* the pseudo-packet the tag covers */
    size_t pseudo_len;
    unsigned char want[TAGLEN]; /* the tag a check accepts */
    unsigned char tag[TAGLEN];
    EVP_CIPHER_CTX *prep;       /* evp-prepared: keyed once */
    ngtcp2_crypto_aead aead;    /* ngtcp2: AES-128-GCM, as its Retry AEAD */
    ngtcp2_crypto_aead_ctx actx;
    ngtcp2_cid dcid, scid, odcid;
    unsigned char pkt[256];     /* ngtcp2's Retry packet */
} retry_state;

/* The pseudo-packet of a Retry packet pkt (tag included) sent for original DCID odcid. */
static size_t pseudo_of(unsigned char *out, const unsigned char *odcid, size_t odcid_len, const unsigned char *pkt,
                        size_t pkt_len)
{
    out[0] = (unsigned char)odcid_len;
    memcpy(out + 1, odcid, odcid_len);
    memcpy(out + 1 + odcid_len, pkt, pkt_len - TAGLEN);
    return 1 + odcid_len + pkt_len - TAGLEN;
}

/* OpenSSL's steps: fetch, context, key and nonce, AAD, final, tag; all freed. */
static int openssl_tag(const retry_state *s, unsigned char *tag)
{
    EVP_CIPHER *c = EVP_CIPHER_fetch(NULL, "AES-128-GCM", pqs_propq());
    EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new();
    int l = 0, l2 = 0;
    int ok = c != NULL && x != NULL && EVP_CipherInit_ex(x, c, NULL, retry_key, retry_nonce, 1) == 1
             && EVP_CipherUpdate(x, NULL, &l, s->pseudo, (int)s->pseudo_len) == 1
             && EVP_CipherFinal_ex(x, NULL, &l2) == 1
             && EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_AEAD_GET_TAG, TAGLEN, tag) == 1;
    EVP_CIPHER_CTX_free(x);
    EVP_CIPHER_free(c);
    return ok;
}

static int op_openssl_create(void *arg)
{
    retry_state *s = arg;
    return openssl_tag(s, s->tag);
}

static int op_openssl_check(void *arg)
{
    retry_state *s = arg;
    return openssl_tag(s, s->tag) && CRYPTO_memcmp(s->tag, s->want, TAGLEN) == 0;
}

static int op_ngtcp2_create(void *arg)
{
    retry_state *s = arg;
    static const uint8_t token[] = "token";
    return ngtcp2_crypto_write_retry(s->pkt, sizeof s->pkt, NGTCP2_PROTO_VER_V1, &s->dcid, &s->scid, &s->odcid,
                                     token, sizeof token - 1)
           > 0;
}

static int op_ngtcp2_check(void *arg)
{
    retry_state *s = arg;
    return ngtcp2_crypto_encrypt(s->tag, &s->aead, &s->actx, (const uint8_t *)"", 0, retry_nonce,
                                 sizeof retry_nonce, s->pseudo, s->pseudo_len)
               == 0
           && memcmp(s->tag, s->want, TAGLEN) == 0;
}

static int op_prepared_create(void *arg)
{
    retry_state *s = arg;
    int l = 0, l2 = 0;
    return EVP_EncryptInit_ex2(s->prep, NULL, NULL, retry_nonce, NULL) == 1
           && EVP_EncryptUpdate(s->prep, NULL, &l, s->pseudo, (int)s->pseudo_len) == 1
           && EVP_EncryptFinal_ex(s->prep, NULL, &l2) == 1
           && EVP_CIPHER_CTX_ctrl(s->prep, EVP_CTRL_AEAD_GET_TAG, TAGLEN, s->tag) == 1;
}

static int op_prepared_check(void *arg)
{
    retry_state *s = arg;
    int l = 0, l2 = 0;
    memcpy(s->tag, s->want, TAGLEN);
    return EVP_DecryptInit_ex2(s->prep, NULL, NULL, retry_nonce, NULL) == 1
           && EVP_DecryptUpdate(s->prep, NULL, &l, s->pseudo, (int)s->pseudo_len) == 1
           && EVP_CIPHER_CTX_ctrl(s->prep, EVP_CTRL_AEAD_SET_TAG, TAGLEN, s->tag) == 1
           && EVP_DecryptFinal_ex(s->prep, NULL, &l2) == 1;
}

/* One engine's pair of lines, after its result was checked (ok false with why otherwise). */
static void emit_pair(const speed_cfg *cfg, pqs_sink *out, const char *name, retry_state *s, bool checked,
                      op_fn create, op_fn check)
{
    op_fn fn[2] = {create, check};
    const char *ops[2] = {"create", "check"};
    for (int k = 0; k < 2; k++) {
        timing t;
        memset(&t, 0, sizeof t);
        if (checked)
            t = speed_measure(cfg, fn[k], s);
        else
            ERR_raise_data(ERR_LIB_USER, ERR_R_INTERNAL_ERROR, "%s: the Retry tag does not match RFC 9001's", name);
        speed_emit(out, "retry", name, ops[k], (long)s->pseudo_len, &t, NULL, 0, NULL, 0);
    }
}

void speed_bench_retry(const speed_cfg *cfg, pqs_sink *out)
{
    static retry_state s; /* large buffers; pqs-speed runs one bench at a time */
    memset(&s, 0, sizeof s);
    EVP_CIPHER *gcm = EVP_CIPHER_fetch(NULL, "AES-128-GCM", pqs_propq());
    s.prep = EVP_CIPHER_CTX_new();
    s.pseudo_len = pseudo_of(s.pseudo, a4_odcid, sizeof a4_odcid, a4_retry, sizeof a4_retry);
    memcpy(s.want, a4_retry + sizeof a4_retry - TAGLEN, TAGLEN);
    bool prep_ok = gcm != NULL && s.prep != NULL && EVP_CipherInit_ex(s.prep, gcm, NULL, retry_key, retry_nonce, 1) == 1;

    /* openssl and evp-prepared: RFC 9001 A.4's tag */
    bool ok = openssl_tag(&s, s.tag) && memcmp(s.tag, s.want, TAGLEN) == 0;
    emit_pair(cfg, out, "openssl", &s, ok, op_openssl_create, op_openssl_check);
    ok = prep_ok && op_prepared_create(&s) && memcmp(s.tag, s.want, TAGLEN) == 0 && op_prepared_check(&s);
    emit_pair(cfg, out, "evp-prepared", &s, ok, op_prepared_create, op_prepared_check);

    /* ngtcp2: the same Retry (its first byte's unused bits are 0, not A.4's 1s, so its tag differs):
     * the packet it writes must carry the tag OpenSSL computes over it */
    ngtcp2_cid_init(&s.dcid, (const uint8_t *)"", 0);
    ngtcp2_cid_init(&s.scid, a4_retry + 7, 8);
    ngtcp2_cid_init(&s.odcid, a4_odcid, sizeof a4_odcid);
    s.aead.native_handle = gcm;
    s.aead.max_overhead = TAGLEN;
    ok = gcm != NULL && ngtcp2_crypto_ossl_init() == 0 && op_ngtcp2_create(&s)
         && ngtcp2_crypto_aead_ctx_encrypt_init(&s.actx, &s.aead, retry_key, sizeof retry_nonce) == 0;
    if (ok) {
        size_t pkt_len = sizeof a4_retry; /* same header and token: the same length */
        s.pseudo_len = pseudo_of(s.pseudo, a4_odcid, sizeof a4_odcid, s.pkt, pkt_len);
        memcpy(s.want, s.pkt + pkt_len - TAGLEN, TAGLEN);
        ok = openssl_tag(&s, s.tag) && memcmp(s.tag, s.want, TAGLEN) == 0 && op_ngtcp2_check(&s);
    }
    emit_pair(cfg, out, "ngtcp2", &s, ok, op_ngtcp2_create, op_ngtcp2_check);
    ngtcp2_crypto_aead_ctx_free(&s.actx);
    EVP_CIPHER_CTX_free(s.prep);
    EVP_CIPHER_free(gcm);
    ERR_clear_error();
}
