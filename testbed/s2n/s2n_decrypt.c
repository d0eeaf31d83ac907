/* s2n_decrypt.c - the encrypted handshake messages' sizes on an s2n-tls end, from the wire.
 *
 * s2n-tls tells no message: the observer (s2n_common.c) keeps the bytes each direction carried
 * until the handshake ended (the server's until the first ticket arrived), and s2n-tls's key log
 * callback hands over the traffic secrets (RFC 8446 7.1). After the handshake, outside the
 * measured interval, each direction's encrypted records are opened with its handshake secret
 * (7.3 keys, 5.3 nonces, 5.2 inner plaintext) up to its Finished, and each handshake message's
 * size is recorded as OpenSSL's message callback records it; after the ticket wait the server's
 * records past its Finished are opened with its application secret up to the first
 * NewSessionTicket. A record that does not open ends that decoding (its sizes stay null). The
 * secrets never leave the process and are wiped with the observer. */
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>

#include "s2n_stack.h"
#include "tlsobs.h"

#define TAG_LEN 16
#define IV_LEN 12

/* HKDF-Expand-Label(secret, label, "", out_len) (RFC 8446 7.1). */
static bool expand_label(const char *digest, const uint8_t *secret, size_t secret_len, const char *label,
                         uint8_t *out, size_t out_len)
{
    uint8_t info[2 + 1 + 255 + 1];
    size_t ll = 6 + strlen(label);
    if (ll > 255)
        return false;
    info[0] = (uint8_t)(out_len >> 8);
    info[1] = (uint8_t)out_len;
    info[2] = (uint8_t)ll;
    memcpy(info + 3, "tls13 ", 6);
    memcpy(info + 9, label, ll - 6);
    info[3 + ll] = 0; /* empty context */
    EVP_KDF *kdf = EVP_KDF_fetch(NULL, "HKDF", NULL);
    EVP_KDF_CTX *kctx = kdf != NULL ? EVP_KDF_CTX_new(kdf) : NULL;
    int mode = EVP_KDF_HKDF_MODE_EXPAND_ONLY;
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_int(OSSL_KDF_PARAM_MODE, &mode),
        OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, (char *)digest, 0),
        OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, (void *)secret, secret_len),
        OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, info, 4 + ll),
        OSSL_PARAM_construct_end(),
    };
    bool ok = kctx != NULL && EVP_KDF_derive(kctx, out, out_len, params) == 1;
    EVP_KDF_CTX_free(kctx);
    EVP_KDF_free(kdf);
    return ok;
}

/* The handshake messages of one direction's decrypted records: their sizes into obs. */
typedef struct {
    pqs_tlsobs *obs;
    bool from_client;
    uint8_t until;               /* the message type that ends the decoding (Finished, NewSessionTicket) */
    bool finished;
} dec_arg;

static int msg_of(bool from_client, uint8_t type)
{
    if (from_client) {
        switch (type) {
        case 11: return PQS_MSG_CLIENT_CERTIFICATE;
        case 25: return PQS_MSG_CLIENT_COMPRESSED_CERTIFICATE;
        case 15: return PQS_MSG_CLIENT_CERTIFICATE_VERIFY;
        case 20: return PQS_MSG_CLIENT_FINISHED;
        case 5: return PQS_MSG_END_OF_EARLY_DATA;
        default: return -1;
        }
    }
    switch (type) {
    case 8: return PQS_MSG_ENCRYPTED_EXTENSIONS;
    case 13: return PQS_MSG_CERTIFICATE_REQUEST;
    case 11: return PQS_MSG_CERTIFICATE;
    case 25: return PQS_MSG_COMPRESSED_CERTIFICATE;
    case 15: return PQS_MSG_CERTIFICATE_VERIFY;
    case 20: return PQS_MSG_SERVER_FINISHED;
    case 4: return PQS_MSG_NEW_SESSION_TICKET;
    default: return -1;
    }
}

static void on_message(void *arg, const uint8_t *buf, uint32_t len, bool kept)
{
    dec_arg *d = arg;
    (void)kept; /* the size is the header's either way */
    int m = msg_of(d->from_client, buf[0]);
    if (m >= 0 && d->obs->msg_bytes[m] == 0)
        d->obs->msg_bytes[m] = len;
    if (buf[0] == d->until)
        d->finished = true;
}

/* Opens one direction's encrypted records from *off with a traffic secret, up to the record
 * holding a message of type until; *off: past it (unchanged if it was not reached). */
static void decode_direction(const uint8_t *raw, size_t len, size_t *off_io, const uint8_t *secret,
                             size_t secret_len, uint16_t suite, bool from_client, uint8_t until, pqs_tlsobs *obs)
{
    const char *digest = suite == 0x1302 ? "SHA384" : "SHA256";
    const char *cipher = suite == 0x1301 ? "AES-128-GCM" : suite == 0x1302 ? "AES-256-GCM"
                         : suite == 0x1303 ? "ChaCha20-Poly1305" : NULL;
    size_t key_len = suite == 0x1301 ? 16 : 32;
    uint8_t key[32], iv[IV_LEN];
    if (cipher == NULL || !expand_label(digest, secret, secret_len, "key", key, key_len)
        || !expand_label(digest, secret, secret_len, "iv", iv, IV_LEN))
        return;
    EVP_CIPHER *c = EVP_CIPHER_fetch(NULL, cipher, NULL);
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    uint8_t *pt = OPENSSL_malloc(PQS_TLS_RECORD_MAX);
    /* the decrypted handshake bytes go through the framer as plaintext records, which joins
     * messages split across records (s2nwire.c) */
    pqs_s2nwire *w = OPENSSL_zalloc(sizeof *w);
    dec_arg d = {.obs = obs, .from_client = from_client, .until = until};
    pqs_s2nwire_cb cb = {.arg = &d, .message = on_message};
    size_t off = *off_io;
    uint64_t seq = 0;
    uint8_t type;
    const uint8_t *body;
    uint32_t blen;
    while (c != NULL && ctx != NULL && pt != NULL && w != NULL && !d.finished
           && pqs_s2nwire_next(raw, len, &off, &type, &body, &blen)) {
        if (type != PQS_TLS_RT_APPDATA)
            continue; /* ClientHello / ServerHello (read whole already), ChangeCipherSpec */
        if (blen < TAG_LEN + 1)
            break;
        uint8_t nonce[IV_LEN];
        memcpy(nonce, iv, IV_LEN);
        for (int k = 0; k < 8; k++)
            nonce[IV_LEN - 1 - k] ^= (uint8_t)(seq >> (8 * k));
        seq++;
        const uint8_t *aad = body - PQS_TLS_RECORD_HEADER;
        int n = 0, fin = 0;
        if (EVP_DecryptInit_ex2(ctx, c, key, nonce, NULL) != 1
            || EVP_DecryptUpdate(ctx, NULL, &n, aad, PQS_TLS_RECORD_HEADER) != 1
            || EVP_DecryptUpdate(ctx, pt, &n, body, (int)(blen - TAG_LEN)) != 1
            || EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_TAG, TAG_LEN, (void *)(body + blen - TAG_LEN)) != 1
            || EVP_DecryptFinal_ex(ctx, pt + n, &fin) != 1)
            break;
        size_t m = (size_t)n + (size_t)fin;
        while (m > 0 && pt[m - 1] == 0) /* TLSInnerPlaintext: content, type, zero padding */
            m--;
        if (m == 0)
            break;
        uint8_t inner = pt[--m];
        if (inner != PQS_TLS_RT_HANDSHAKE)
            continue;
        uint8_t hdr[PQS_TLS_RECORD_HEADER] = {PQS_TLS_RT_HANDSHAKE, 3, 3, (uint8_t)(m >> 8), (uint8_t)m};
        pqs_s2nwire_feed(w, hdr, sizeof hdr, &cb);
        pqs_s2nwire_feed(w, pt, m, &cb);
    }
    if (d.finished)
        *off_io = off;
    OPENSSL_cleanse(key, sizeof key);
    OPENSSL_free(pt);
    OPENSSL_free(w);
    EVP_CIPHER_CTX_free(ctx);
    EVP_CIPHER_free(c);
}

/* The suite of the connection (TLS 1.3: 0x13xx), 0 otherwise. */
static uint16_t tls13_suite(struct s2n_connection *conn)
{
    uint8_t a = 0, b = 0;
    return s2n_connection_get_cipher_iana_value(conn, &a, &b) == 0 && a == 0x13 ? (uint16_t)(a << 8 | b) : 0;
}

void pqs_s2n_obs_decode(pqs_s2n_obs *o, struct s2n_connection *conn)
{
    uint16_t suite = tls13_suite(conn);
    if (o->on && suite != 0) {
        for (int d = 0; d < 2; d++) { /* 0: the client's bytes, 1: the server's */
            size_t off = 0;
            if (o->secret_len[d] > 0 && o->raw[d] != NULL)
                decode_direction(o->raw[d], o->raw_len[d], &off, o->secret[d], o->secret_len[d], suite, d == 0, 20,
                                 o->obs);
            if (d == 1)
                o->app_off = off; /* 0: the Finished was not reached, no ticket is decoded */
        }
    }
    /* the client's bytes and the handshake secrets are done with; the server's bytes stay for
     * its ticket (they stop being kept once it has arrived) */
    OPENSSL_cleanse(o->secret, 2 * sizeof o->secret[0]);
    o->secret_len[0] = o->secret_len[1] = 0;
    if (o->raw[0] != NULL)
        OPENSSL_cleanse(o->raw[0], o->raw_len[0]);
    o->raw_len[0] = 0;
}

void pqs_s2n_obs_decode_ticket(pqs_s2n_obs *o, struct s2n_connection *conn)
{
    uint16_t suite = tls13_suite(conn);
    size_t off = o->app_off;
    if (o->on && suite != 0 && off > 0 && o->secret_len[2] > 0 && o->raw[1] != NULL && o->obs->tickets > 0)
        decode_direction(o->raw[1], o->raw_len[1], &off, o->secret[2], o->secret_len[2], suite, false, 4, o->obs);
    pqs_s2n_obs_wipe(o);
}
