/* fs0rtt_client.c - the client half of fs0rtt (fs0rtt.h): a fresh encapsulation per ClientHello,
 * offered as an external PSK whose identity is the ciphertext. */
#include "ossl.h"
#include "fs0rtt_ssl.h"
#include "fs0rtt_key.h"

#include <string.h>
#include <time.h>

#include "transport.h"

/* The largest early data an fs0rtt PSK allows the client to send: pqs-server's default
 * --max-early-data. A resumption ticket carries the server's limit; an out-of-band key does not,
 * so the deployment's value is part of what is published with the public key. */
#define FS0RTT_CLIENT_MAX_EARLY 16384

/* OpenSSL calls this while it builds a ClientHello (in SSL_connect / SSL_write_early_data, inside
 * the measured interval): md is NULL for the first ClientHello, the handshake's hash for the second
 * one after a HelloRetryRequest. */
static int use_session(SSL *ssl, const EVP_MD *md, const unsigned char **id, size_t *idlen, SSL_SESSION **sess)
{
    pqs_attempt *a = pqs_attempt_of(ssl);
    pqs_fs0rtt_attempt *rec = &a->fs0rtt;
    const pqs_fs0rtt_key *k = rec->key;
    *sess = NULL;
    *id = NULL;
    *idlen = 0;
    if (md != NULL) {
        /* After HRR the server has already decapsulated and punctured the first ClientHello's
         * ciphertext (it parses the PSK before it asks again), so offering it again would be a
         * replay; a second encapsulation would cost a second puncture for early data TLS rejects
         * after HRR anyway. The second ClientHello goes without a PSK: a full handshake. */
        rec->dropped_hrr = true;
        return 1;
    }
    static const unsigned char aes256_sha384[2] = {0x13, 0x02};
    const SSL_CIPHER *cipher = SSL_CIPHER_find(ssl, aes256_sha384);
    uint8_t key[PQS_FS0RTT_KEY_BYTES];
    int64_t t0 = pqs_mono_ns(), c0 = pqs_clock_ns(CLOCK_THREAD_CPUTIME_ID);
    pqs_fs0rtt_lock();
    bfe_bf_ciphertext_t ct;
    int rc = bfe_bf_init_ciphertext(&ct, &k->pk);
    if (rc == BFE_SUCCESS)
        rc = bfe_bf_encaps(&ct, key, &k->pk);
    unsigned size = rc == BFE_SUCCESS ? bfe_bf_ciphertext_size(&ct) : 0;
    if (rc == BFE_SUCCESS && size <= sizeof rec->ct)
        bfe_bf_ciphertext_serialize(rec->ct, &ct);
    bfe_bf_clear_ciphertext(&ct);
    pqs_fs0rtt_unlock();
    rec->encaps_cpu_ns = pqs_clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0;
    rec->encaps_ns = pqs_mono_ns() - t0;
    SSL_SESSION *s = NULL;
    if (rc == BFE_SUCCESS && size <= sizeof rec->ct && cipher != NULL && (s = SSL_SESSION_new()) != NULL
        && SSL_SESSION_set1_master_key(s, key, sizeof key) && SSL_SESSION_set_cipher(s, cipher)
        && SSL_SESSION_set_protocol_version(s, TLS1_3_VERSION)
        && SSL_SESSION_set_max_early_data(s, FS0RTT_CLIENT_MAX_EARLY)) {
        OPENSSL_cleanse(key, sizeof key);
        rec->offered = true;
        rec->ct_bytes = size;
        *sess = s;
        *id = rec->ct;
        *idlen = size;
        return 1;
    }
    OPENSSL_cleanse(key, sizeof key);
    SSL_SESSION_free(s);
    rec->failed = true;
    pqs_attempt_fail(a, PQS_ERR_INTERNAL, "fs0rtt", 0, "BFE encapsulation failed (status %d, %u bytes)", rc, size);
    return 0; /* OpenSSL ends the handshake: the attempt fails, with the reason above */
}

void pqs_fs0rtt_client_use(SSL *ssl, const pqs_fs0rtt_key *key, pqs_fs0rtt_attempt *rec)
{
    rec->key = key;
    SSL_set_psk_use_session_callback(ssl, use_session);
}

void pqs_fs0rtt_attempt_json(pqs_json *j, const pqs_fs0rtt_attempt *rec)
{
    if (rec->key == NULL) {
        pqs_json_null(j, "fs0rtt");
        return;
    }
    pqs_json_obj_begin(j, "fs0rtt");
    pqs_json_bool(j, "offered", rec->offered);
    pqs_json_uint(j, "ct_bytes", rec->ct_bytes);
    pqs_json_int(j, "encaps_ns", rec->encaps_ns);
    pqs_json_int(j, "encaps_cpu_ns", rec->encaps_cpu_ns);
    pqs_json_bool(j, "dropped_hrr", rec->dropped_hrr);
    pqs_json_obj_end(j);
}
