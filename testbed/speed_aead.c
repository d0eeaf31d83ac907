/* speed_aead.c - pqs-speed: an AEAD's four operations at 64 and 1500 bytes (aead lines); see
 * speed.h. encrypt (seal N bytes of plaintext) and decrypt (open them, tag checked) against
 * auth_only and verify_only (N bytes of associated data, empty plaintext: the tag alone, GMAC or
 * Poly1305), the four columns of the QUIC working group's 2019 micro-benchmark that chose the
 * Retry integrity tag's shape (speed_retry.c times the tag itself). */
#include <string.h>

#include <openssl/err.h>
#include <openssl/evp.h>

#include "provider_seam.h"
#include "speed.h"

typedef enum { AEAD_ENCRYPT, AEAD_AUTH_ONLY, AEAD_DECRYPT, AEAD_VERIFY_ONLY } aead_op;
static const char *const aead_op_names[] = {"encrypt", "auth_only", "decrypt", "verify_only"};

typedef struct {
    EVP_CIPHER_CTX *c;
    size_t n;
    aead_op op;
    unsigned char iv[12];
    unsigned char in[1500], out[1600], tag[16];
    unsigned char ct[1500], ct_tag[16], aad_tag[16]; /* what decrypt and verify_only check */
} aead_state;

/* Seal: encrypt or auth_only (a fresh IV per call, as a sender uses one). */
static int seal(aead_state *s, bool auth_only)
{
    int len = 0, fl = 0;
    s->iv[11]++;
    if (EVP_EncryptInit_ex2(s->c, NULL, NULL, s->iv, NULL) != 1)
        return 0;
    if (EVP_EncryptUpdate(s->c, auth_only ? NULL : s->out, &len, s->in, (int)s->n) != 1)
        return 0;
    if (EVP_EncryptFinal_ex(s->c, s->out + len, &fl) != 1)
        return 0;
    return EVP_CIPHER_CTX_ctrl(s->c, EVP_CTRL_AEAD_GET_TAG, 16, s->tag) == 1;
}

/* Open: decrypt or verify_only the one message prepared with IV 0 (a receiver checks what it
 * got); 0 if the tag does not verify. */
static int open_(aead_state *s, bool verify_only)
{
    static const unsigned char iv0[12];
    int len = 0, fl = 0;
    unsigned char tag[16];
    memcpy(tag, verify_only ? s->aad_tag : s->ct_tag, 16);
    if (EVP_DecryptInit_ex2(s->c, NULL, NULL, iv0, NULL) != 1)
        return 0;
    if (verify_only ? EVP_DecryptUpdate(s->c, NULL, &len, s->in, (int)s->n) != 1
                    : EVP_DecryptUpdate(s->c, s->out, &len, s->ct, (int)s->n) != 1)
        return 0;
    if (EVP_CIPHER_CTX_ctrl(s->c, EVP_CTRL_AEAD_SET_TAG, 16, tag) != 1)
        return 0;
    return EVP_DecryptFinal_ex(s->c, s->out + len, &fl) == 1;
}

static int op_aead(void *arg)
{
    aead_state *s = arg;
    switch (s->op) {
    case AEAD_ENCRYPT: return seal(s, false);
    case AEAD_AUTH_ONLY: return seal(s, true);
    case AEAD_DECRYPT: return open_(s, false);
    case AEAD_VERIFY_ONLY: return open_(s, true);
    }
    return 0;
}

/* The message decrypt and verify_only open: sealed once with IV 0, untimed. */
static bool prepare_open(aead_state *s, EVP_CIPHER *ciph, const unsigned char *key)
{
    static const unsigned char iv0[12];
    int len = 0, fl = 0;
    EVP_CIPHER_CTX *e = EVP_CIPHER_CTX_new();
    bool ok = e != NULL && EVP_EncryptInit_ex2(e, ciph, key, iv0, NULL) == 1
              && EVP_EncryptUpdate(e, s->ct, &len, s->in, (int)s->n) == 1
              && EVP_EncryptFinal_ex(e, s->ct + len, &fl) == 1
              && EVP_CIPHER_CTX_ctrl(e, EVP_CTRL_AEAD_GET_TAG, 16, s->ct_tag) == 1
              && EVP_EncryptInit_ex2(e, NULL, NULL, iv0, NULL) == 1
              && EVP_EncryptUpdate(e, NULL, &len, s->in, (int)s->n) == 1
              && EVP_EncryptFinal_ex(e, s->out, &fl) == 1
              && EVP_CIPHER_CTX_ctrl(e, EVP_CTRL_AEAD_GET_TAG, 16, s->aad_tag) == 1;
    EVP_CIPHER_CTX_free(e);
    return ok;
}

void speed_bench_aead(const speed_cfg *cfg, pqs_sink *out, const char *name)
{
    static const size_t sizes[] = {64, 1500};
    unsigned char key[32];
    memset(key, 0x42, sizeof key);
    EVP_CIPHER *ciph = EVP_CIPHER_fetch(NULL, name, pqs_propq());
    for (size_t si = 0; si < 2; si++) {
        for (int op = AEAD_ENCRYPT; op <= AEAD_VERIFY_ONLY; op++) {
            aead_state s;
            memset(&s, 0, sizeof s);
            s.n = sizes[si];
            s.op = (aead_op)op;
            for (size_t i = 0; i < s.n; i++)
                s.in[i] = (unsigned char)i;
            timing t;
            memset(&t, 0, sizeof t);
            s.c = EVP_CIPHER_CTX_new();
            bool dec = s.op == AEAD_DECRYPT || s.op == AEAD_VERIFY_ONLY;
            if (ciph != NULL && s.c != NULL && (!dec || prepare_open(&s, ciph, key))
                && (dec ? EVP_DecryptInit_ex2(s.c, ciph, key, s.iv, NULL) : EVP_EncryptInit_ex2(s.c, ciph, key, s.iv, NULL))
                       == 1)
                t = speed_measure(cfg, op_aead, &s);
            speed_emit(out, "aead", name, aead_op_names[op], (long)s.n, &t, NULL, 0, NULL, 0);
            EVP_CIPHER_CTX_free(s.c);
        }
    }
    EVP_CIPHER_free(ciph);
    ERR_clear_error();
}
