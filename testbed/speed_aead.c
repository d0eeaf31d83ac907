/* speed_aead.c - pqs-speed: AEAD seal vs authentication only at 64 and 1500 bytes (aead
 * lines); see speed.h. */
#include <string.h>

#include <openssl/err.h>
#include <openssl/evp.h>

#include "provider_seam.h"
#include "speed.h"

typedef struct {
    EVP_CIPHER_CTX *c;
    size_t n;
    bool auth_only;
    unsigned char iv[12];
    unsigned char in[1500], out[1600], tag[16];
} aead_state;

static int op_aead(void *arg)
{
    aead_state *s = arg;
    int len = 0;
    s->iv[11]++;
    if (EVP_EncryptInit_ex2(s->c, NULL, NULL, s->iv, NULL) != 1)
        return 0;
    if (s->auth_only) {
        if (EVP_EncryptUpdate(s->c, NULL, &len, s->in, (int)s->n) != 1)
            return 0;
    } else if (EVP_EncryptUpdate(s->c, s->out, &len, s->in, (int)s->n) != 1) {
        return 0;
    }
    int fl = 0;
    if (EVP_EncryptFinal_ex(s->c, s->out + len, &fl) != 1)
        return 0;
    return EVP_CIPHER_CTX_ctrl(s->c, EVP_CTRL_AEAD_GET_TAG, 16, s->tag) == 1;
}

void speed_bench_aead(const speed_cfg *cfg, pqs_sink *out, const char *name)
{
    static const size_t sizes[] = {64, 1500};
    unsigned char key[32];
    memset(key, 0x42, sizeof key);
    EVP_CIPHER *ciph = EVP_CIPHER_fetch(NULL, name, pqs_propq());
    for (size_t si = 0; si < 2; si++) {
        for (int ao = 0; ao < 2; ao++) {
            aead_state s;
            memset(&s, 0, sizeof s);
            s.n = sizes[si];
            s.auth_only = ao == 1;
            timing t;
            memset(&t, 0, sizeof t);
            s.c = EVP_CIPHER_CTX_new();
            if (ciph != NULL && s.c != NULL && EVP_EncryptInit_ex2(s.c, ciph, key, s.iv, NULL) == 1)
                t = speed_measure(cfg, op_aead, &s);
            speed_emit(out, "aead", name, s.auth_only ? "auth_only" : "encrypt", (long)s.n, &t, NULL, 0, NULL, 0);
            EVP_CIPHER_CTX_free(s.c);
        }
    }
    EVP_CIPHER_free(ciph);
    ERR_clear_error();
}
