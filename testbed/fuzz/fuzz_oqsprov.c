/* fuzz_oqsprov.c - libFuzzer target for the pqs-oqs entry points that take peer data:
 * decoding a key share (keymgmt set_params ENCODED_PUBLIC_KEY, then encapsulation against it,
 * as a TLS server does) and decapsulation of a ciphertext (as a TLS client does).
 *
 * Input: byte 0 picks the group (index into the offered rows), byte 1 the entry point
 * (even: key share, odd: ciphertext), byte 2 bit 0 the length mode (0: the rest as is, which
 * exercises the length checks; 1: the rest repeated/cut to the exact expected length, which
 * reaches the decoders and liboqs). Build: make -C testbed fuzz; run e.g.
 * build/fuzz/fuzz_oqsprov -runs=100000 testbed/fuzz/corpus */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/evp.h>

#include "oqsprov/oqsprov.h"
#include "provider_seam.h"

/* The harness's state (keys made once per group, reused by every input). */
static struct {
    int ready;
    size_t n;
    const pqs_oqs_group *rows[PQS_OQS_MAX_ROWS];
    pqs_oqs_sizes sizes[PQS_OQS_MAX_ROWS];
    EVP_PKEY *keys[PQS_OQS_MAX_ROWS];
    unsigned char buf[70000];
} fuzz_state;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    if (pqs_load_providers(NULL) != 0)
        abort();
    char why[256];
    for (size_t i = 0; i < pqs_oqs_group_count(); i++) {
        const pqs_oqs_group *g = pqs_oqs_group_at(i);
        if (g->native || pqs_oqs_refusal(g->name, why, sizeof why) != NULL)
            continue;
        fuzz_state.rows[fuzz_state.n] = g;
        pqs_oqs_group_sizes(g, &fuzz_state.sizes[fuzz_state.n]);
        fuzz_state.n++;
    }
    fuzz_state.ready = 1;
    return 0;
}

static EVP_PKEY *key_for(size_t i)
{
    if (fuzz_state.keys[i] == NULL) {
        EVP_PKEY_CTX *c = EVP_PKEY_CTX_new_from_name(NULL, fuzz_state.rows[i]->name, pqs_propq());
        if (c == NULL || EVP_PKEY_keygen_init(c) <= 0 || EVP_PKEY_generate(c, &fuzz_state.keys[i]) <= 0)
            abort();
        EVP_PKEY_CTX_free(c);
    }
    return fuzz_state.keys[i];
}

static size_t shape(const uint8_t *d, size_t n, int exact, size_t want)
{
    if (!exact) {
        if (n > sizeof fuzz_state.buf)
            n = sizeof fuzz_state.buf;
        memcpy(fuzz_state.buf, d, n);
        return n;
    }
    for (size_t k = 0; k < want; k++)
        fuzz_state.buf[k] = n ? d[k % n] : 0;
    return want;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!fuzz_state.ready || fuzz_state.n == 0 || size < 3)
        return 0;
    size_t i = data[0] % fuzz_state.n;
    int ct_path = data[1] & 1, exact = data[2] & 1;
    const pqs_oqs_group *g = fuzz_state.rows[i];
    const pqs_oqs_sizes *sz = &fuzz_state.sizes[i];
    data += 3;
    size -= 3;
    unsigned char ss[256];
    if (!ct_path) {
        size_t len = shape(data, size, exact, sz->pub);
        EVP_PKEY *peer = NULL;
        EVP_PKEY_CTX *c = EVP_PKEY_CTX_new_from_name(NULL, g->name, pqs_propq());
        if (c != NULL && EVP_PKEY_paramgen_init(c) > 0 && EVP_PKEY_paramgen(c, &peer) > 0
            && EVP_PKEY_set1_encoded_public_key(peer, fuzz_state.buf, len) > 0) {
            EVP_PKEY_CTX *e = EVP_PKEY_CTX_new_from_pkey(NULL, peer, pqs_propq());
            static unsigned char ct[70000];
            size_t ctlen = sizeof ct, sslen = sizeof ss;
            if (e != NULL && EVP_PKEY_encapsulate_init(e, NULL) > 0)
                (void)EVP_PKEY_encapsulate(e, ct, &ctlen, ss, &sslen);
            EVP_PKEY_CTX_free(e);
        }
        EVP_PKEY_free(peer);
        EVP_PKEY_CTX_free(c);
    } else {
        size_t len = shape(data, size, exact, sz->ct);
        EVP_PKEY_CTX *d = EVP_PKEY_CTX_new_from_pkey(NULL, key_for(i), pqs_propq());
        size_t sslen = sizeof ss;
        if (d != NULL && EVP_PKEY_decapsulate_init(d, NULL) > 0)
            (void)EVP_PKEY_decapsulate(d, ss, &sslen, fuzz_state.buf, len);
        EVP_PKEY_CTX_free(d);
    }
    ERR_clear_error();
    return 0;
}
