/* fs0rtt_server.c - the server half of fs0rtt (fs0rtt.h): the PSK lookup that decapsulates the
 * identity, punctures the key and hands OpenSSL the encapsulated key, or refuses and says why. */
#include "fs0rtt_ssl.h"
#include "fs0rtt_key.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/evp.h>

#include "bfekem.h"

/* Accepted ciphertexts, by the first 16 bytes of the SHA-256 of their point u (which alone picks
 * the key slots): only to name a refusal, a replay of a ciphertext accepted here (altered or not)
 * or a false positive of a fresh one. The punctured key decides; this list is never consulted to
 * accept. At most n entries (the key serves n connections). */
#define SEEN_BYTES 16

struct pqs_fs0rtt_server {
    pqs_fs0rtt_key *key;
    uint32_t max_early_data;
    /* under pqs_fs0rtt_lock: */
    uint64_t counts[PQS_FS0RTT__COUNT];
    uint64_t punctures;
    uint8_t (*seen)[SEEN_BYTES];
    size_t n_seen, cap_seen;
};

static const char *const outcome_names[PQS_FS0RTT__COUNT] = {
    [PQS_FS0RTT_NONE] = "none",
    [PQS_FS0RTT_ACCEPTED] = "accepted",
    [PQS_FS0RTT_REPLAY] = "replay",
    [PQS_FS0RTT_FALSE_POSITIVE] = "false_positive",
    [PQS_FS0RTT_EXHAUSTED] = "exhausted",
    [PQS_FS0RTT_MALFORMED] = "malformed",
    [PQS_FS0RTT_CIPHER] = "cipher",
    [PQS_FS0RTT_DECAPS_FAILED] = "decaps_failed",
};

const char *pqs_fs0rtt_outcome_name(pqs_fs0rtt_outcome o)
{
    return (unsigned)o < PQS_FS0RTT__COUNT ? outcome_names[o] : "?";
}

static bool seen_has(const pqs_fs0rtt_server *fs, const uint8_t *d)
{
    for (size_t i = 0; i < fs->n_seen; i++)
        if (memcmp(fs->seen[i], d, SEEN_BYTES) == 0)
            return true;
    return false;
}

static void seen_add(pqs_fs0rtt_server *fs, const uint8_t *d)
{
    if (fs->n_seen == fs->cap_seen) {
        size_t nc = fs->cap_seen ? fs->cap_seen * 2 : 256;
        void *p = realloc(fs->seen, nc * SEEN_BYTES);
        if (p == NULL)
            return; /* a later replay of this one is then named a false positive; still refused */
        fs->seen = p;
        fs->cap_seen = nc;
    }
    memcpy(fs->seen[fs->n_seen++], d, SEEN_BYTES);
}

/* Decapsulates and punctures under the lock; fills c, and key when accepted. */
static pqs_fs0rtt_outcome open_identity(pqs_fs0rtt_server *fs, pqs_fs0rtt_conn *c, const unsigned char *id,
                                        size_t idlen, uint8_t key[PQS_FS0RTT_KEY_BYTES])
{
    pqs_fs0rtt_key *k = fs->key;
    unsigned char digest[32];
    unsigned int dlen = 0;
    size_t u_at = PQS_BFE_LEN_BYTES, u_len = PQS_BFE_U_BYTES;
    if (idlen < u_at + u_len) /* too short to be a ciphertext: refused below, never added */
        u_at = 0, u_len = idlen;
    EVP_Digest(id + u_at, u_len, digest, &dlen, EVP_sha256(), NULL);
    int64_t w0 = pqs_mono_ns();
    pqs_fs0rtt_lock();
    c->lock_wait_ns = pqs_mono_ns() - w0;
    pqs_fs0rtt_outcome o;
    bfe_bf_ciphertext_t ct;
    pqs_bfe_ct_status st;
    if (fs->punctures >= k->n) {
        o = PQS_FS0RTT_EXHAUSTED; /* past n the false-positive rate exceeds p: a deployment rotates */
    } else if ((st = pqs_bfe_ct_decode(&ct, &k->pk, id, idlen)) != PQS_BFE_CT_OK) {
        o = PQS_FS0RTT_MALFORMED;
        c->detail = pqs_bfe_ct_status_name(st);
    } else {
        int64_t t0 = pqs_mono_ns(), c0 = pqs_clock_ns(CLOCK_THREAD_CPUTIME_ID);
        int rc = bfe_bf_decaps(key, &k->pk, &k->sk, &ct);
        c->decaps_cpu_ns = pqs_clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0;
        c->decaps_ns = pqs_mono_ns() - t0;
        if (rc == BFE_ERROR_KEY_PUNCTURED) {
            o = seen_has(fs, digest) ? PQS_FS0RTT_REPLAY : PQS_FS0RTT_FALSE_POSITIVE;
        } else if (rc != BFE_SUCCESS) {
            o = PQS_FS0RTT_DECAPS_FAILED;
        } else {
            t0 = pqs_mono_ns();
            c0 = pqs_clock_ns(CLOCK_THREAD_CPUTIME_ID);
            bfe_bf_puncture(&k->sk, &ct);
            c->puncture_cpu_ns = pqs_clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0;
            c->puncture_ns = pqs_mono_ns() - t0;
            fs->punctures++;
            seen_add(fs, digest);
            o = PQS_FS0RTT_ACCEPTED;
        }
        bfe_bf_clear_ciphertext(&ct);
    }
    fs->counts[o]++;
    pqs_fs0rtt_unlock();
    return o;
}

/* OpenSSL's server PSK lookup, once per identity of the ClientHello's pre_shared_key extension,
 * after it chose the cipher suite. *sess NULL and 1: no PSK of ours (OpenSSL tries the identity
 * as a ticket next, which fails, and goes on with a full handshake). */
static int find_session(SSL *ssl, const unsigned char *id, size_t idlen, SSL_SESSION **sess)
{
    *sess = NULL;
    pqs_fs0rtt_server *fs = SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl));
    pqs_fs0rtt_conn scratch, *c = SSL_get_app_data(ssl);
    if (c == NULL) {
        memset(&scratch, 0, sizeof scratch);
        c = &scratch;
    }
    if (fs == NULL)
        return 1;
    memset(c, 0, sizeof *c);
    c->ct_bytes = (uint32_t)idlen;
    /* The PSK's hash is fixed (PQS_FS0RTT_PSK_NID); OpenSSL would drop a PSK of another hash after
     * this call, so refusing here keeps the key unpunctured for it. */
    const SSL_CIPHER *cipher = SSL_get_pending_cipher(ssl);
    const EVP_MD *md = cipher != NULL ? SSL_CIPHER_get_handshake_digest(cipher) : NULL;
    if (md == NULL || EVP_MD_get_type(md) != PQS_FS0RTT_PSK_NID) {
        c->outcome = PQS_FS0RTT_CIPHER;
        pqs_fs0rtt_lock();
        fs->counts[PQS_FS0RTT_CIPHER]++;
        pqs_fs0rtt_unlock();
        return 1;
    }
    uint8_t key[PQS_FS0RTT_KEY_BYTES];
    c->outcome = open_identity(fs, c, id, idlen, key);
    if (c->outcome != PQS_FS0RTT_ACCEPTED)
        return 1;
    SSL_SESSION *s = SSL_SESSION_new();
    int ok = s != NULL && SSL_SESSION_set1_master_key(s, key, sizeof key) && SSL_SESSION_set_cipher(s, cipher)
             && SSL_SESSION_set_protocol_version(s, TLS1_3_VERSION)
             && SSL_SESSION_set_max_early_data(s, fs->max_early_data);
    OPENSSL_cleanse(key, sizeof key);
    if (!ok) {
        SSL_SESSION_free(s);
        return 0; /* OpenSSL ends the handshake with an internal error: recorded as such */
    }
    *sess = s;
    return 1;
}

pqs_fs0rtt_server *pqs_fs0rtt_server_new(pqs_fs0rtt_key *key, uint32_t max_early_data)
{
    pqs_fs0rtt_server *fs = calloc(1, sizeof *fs);
    if (fs == NULL)
        return NULL;
    fs->key = key;
    fs->max_early_data = max_early_data;
    return fs;
}

void pqs_fs0rtt_server_install(SSL_CTX *ctx, pqs_fs0rtt_server *fs)
{
    SSL_CTX_set_app_data(ctx, fs);
    SSL_CTX_set_psk_find_session_callback(ctx, find_session);
}

void pqs_fs0rtt_conn_json(pqs_json *j, const pqs_fs0rtt_conn *c)
{
    pqs_json_obj_begin(j, "fs0rtt");
    pqs_json_str(j, "outcome", pqs_fs0rtt_outcome_name(c->outcome));
    pqs_json_str(j, "detail", c->detail);
    pqs_json_uint(j, "ct_bytes", c->ct_bytes);
    pqs_json_int(j, "decaps_ns", c->decaps_ns);
    pqs_json_int(j, "decaps_cpu_ns", c->decaps_cpu_ns);
    pqs_json_int(j, "puncture_ns", c->puncture_ns);
    pqs_json_int(j, "puncture_cpu_ns", c->puncture_cpu_ns);
    pqs_json_int(j, "lock_wait_ns", c->lock_wait_ns);
    pqs_json_obj_end(j);
}

/* Memory of the secret key while serving: bfe-bf keeps one relic G2 point per slot, punctured or
 * not (puncturing clears the point, the array stays), plus the bitset. */
static uint64_t secret_ram_bytes(const pqs_fs0rtt_key *k)
{
    return (uint64_t)k->slots * sizeof(ep2_t) + ((uint64_t)k->slots + 63) / 64 * 8;
}

void pqs_fs0rtt_server_ready_json(pqs_json *j, const pqs_fs0rtt_server *fs)
{
    const pqs_fs0rtt_key *k = fs->key;
    pqs_json_obj_begin(j, "fs0rtt");
    pqs_fs0rtt_key_members(j, k);
    pqs_json_uint(j, "secret_bytes", k->secret_bytes);
    pqs_json_uint(j, "secret_ram_bytes", secret_ram_bytes(k));
    pqs_json_int(j, "keygen_ns", k->keygen_ns);
    pqs_json_int(j, "keygen_cpu_ns", k->keygen_cpu_ns);
    pqs_json_int(j, "keygen_threads", k->keygen_threads);
    pqs_json_uint(j, "max_early_data", fs->max_early_data);
    pqs_json_obj_end(j);
}

void pqs_fs0rtt_server_summary_json(pqs_json *j, pqs_fs0rtt_server *fs)
{
    pqs_fs0rtt_lock();
    unsigned punctured = 0;
    uint64_t bytes = pqs_fs0rtt_secret_bytes(&fs->key->sk, &punctured);
    pqs_json_obj_begin(j, "fs0rtt");
    pqs_json_uint(j, "punctures", fs->punctures);
    pqs_json_uint(j, "punctured_slots", punctured);
    pqs_json_uint(j, "secret_bytes_start", fs->key->secret_bytes);
    pqs_json_uint(j, "secret_bytes_end", bytes);
    pqs_json_uint(j, "secret_ram_bytes", secret_ram_bytes(fs->key));
    for (int o = PQS_FS0RTT_ACCEPTED; o < PQS_FS0RTT__COUNT; o++)
        pqs_json_uint(j, outcome_names[o], fs->counts[o]);
    pqs_json_obj_end(j);
    pqs_fs0rtt_unlock();
}

void pqs_fs0rtt_server_free(pqs_fs0rtt_server *fs)
{
    if (fs == NULL)
        return;
    free(fs->seen);
    free(fs);
}
