/* ech.c - Encrypted Client Hello for --mode ech (ech.h). */
#include "ossl.h"
#include "ech.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <openssl/ech.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include "common.h"
#include "provider_seam.h"
#include "transport.h"

/* X25519 / HKDF-SHA256 / AES-128-GCM: the suite every ECH client must support (RFC 9849 s. 9);
 * OpenSSL's ECH has no post-quantum HPKE KEM. */
static const OSSL_HPKE_SUITE ech_suite = {OSSL_HPKE_KEM_ID_X25519, OSSL_HPKE_KDF_ID_HKDF_SHA256,
                                          OSSL_HPKE_AEAD_ID_AES_GCM_128};

/* The store's ECHConfigList (the ECHCONFIG block of its PEM, which also holds the private key)
 * to out in base64, one line without its newline: the form an HTTPS DNS record's ech= parameter carries. */
static bool write_public_b64(OSSL_ECHSTORE *es, BIO *out)
{
    BIO *mem = BIO_new(BIO_s_mem());
    bool found = false;
    if (mem == NULL || OSSL_ECHSTORE_write_pem(es, 0, mem) != 1) {
        BIO_free(mem);
        return false;
    }
    char *name = NULL, *header = NULL;
    unsigned char *data = NULL;
    long len = 0;
    while (!found && PEM_read_bio(mem, &name, &header, &data, &len) == 1) {
        if (strcmp(name, "ECHCONFIG") == 0 && len > 0 && len <= OSSL_ECH_MAX_ECHCONFIG_LEN) {
            unsigned char b64[(OSSL_ECH_MAX_ECHCONFIG_LEN + 2) / 3 * 4 + 1];
            int n = EVP_EncodeBlock(b64, data, (int)len);
            found = BIO_write(out, b64, n) == n; /* no newline: the reader takes none */
        }
        OPENSSL_free(name);
        OPENSSL_free(header);
        OPENSSL_free(data);
    }
    BIO_free(mem);
    ERR_clear_error(); /* PEM_read_bio's end of input */
    return found;
}

/* DIR/PQS_ECH_CONFIG_FILE written to a temporary name, flushed, then renamed: a reader never
 * sees half a file. */
static bool write_config(OSSL_ECHSTORE *es, const char *path, char *why, size_t whylen)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *fp = fopen(tmp, "w");
    if (fp == NULL) {
        snprintf(why, whylen, "cannot write %s", tmp);
        return false;
    }
    BIO *out = BIO_new_fp(fp, BIO_NOCLOSE);
    bool ok = out != NULL && write_public_b64(es, out) && BIO_flush(out) == 1;
    BIO_free(out);
    ok = ok && fflush(fp) == 0 && fsync(fileno(fp)) == 0;
    ok = fclose(fp) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
        snprintf(why, whylen, "cannot write the ECH config %s", path);
        return false;
    }
    return true;
}

/* The server's store from the key pair's PEM (private key + ECHConfig). A store that made the
 * config itself (OSSL_ECHSTORE_new_config) holds it as a config the server does not decrypt
 * with: every ECH offered to it was rejected; one read back with OSSL_ECHSTORE_read_pem is used. */
static OSSL_ECHSTORE *server_store(OSSL_ECHSTORE *made)
{
    OSSL_ECHSTORE *es = OSSL_ECHSTORE_new(NULL, pqs_propq());
    BIO *mem = BIO_new(BIO_s_mem());
    bool ok = es != NULL && mem != NULL && OSSL_ECHSTORE_write_pem(made, 0, mem) == 1
              && OSSL_ECHSTORE_read_pem(es, mem, OSSL_ECH_NO_RETRY) == 1;
    BIO_free(mem);
    if (!ok) {
        OSSL_ECHSTORE_free(es);
        return NULL;
    }
    return es;
}

bool pqs_ech_server_setup(SSL_CTX *ctx, const char *dir, const char *public_name, char *path_out,
                          size_t pathlen, char *why, size_t whylen)
{
    OSSL_ECHSTORE *made = OSSL_ECHSTORE_new(NULL, pqs_propq()), *es = NULL;
    bool ok = made != NULL && OSSL_ECHSTORE_new_config(made, OSSL_ECH_CURRENT_VERSION, 0, public_name, ech_suite) == 1
              && (es = server_store(made)) != NULL;
    if (!ok)
        snprintf(why, whylen, "cannot make an ECH config (X25519 HPKE, public name %s)", public_name);
    snprintf(path_out, pathlen, "%s/%s", dir, PQS_ECH_CONFIG_FILE);
    ok = ok && write_config(made, path_out, why, whylen);
    if (ok && SSL_CTX_set1_echstore(ctx, es) != 1) {
        snprintf(why, whylen, "OpenSSL refused the ECH key store");
        ok = false;
    }
    OSSL_ECHSTORE_free(made);
    OSSL_ECHSTORE_free(es);
    ERR_clear_error();
    return ok;
}

static _Thread_local int ech_status;
static _Thread_local bool ech_reported;

static const char *status_name(int st)
{
    switch (st) {
    case SSL_ECH_STATUS_SUCCESS: return "accepted";
    case SSL_ECH_STATUS_FAILED: return "failed";
    case SSL_ECH_STATUS_NOT_TRIED: return "not_tried";
    case SSL_ECH_STATUS_NOT_CONFIGURED: return "not_configured";
    case SSL_ECH_STATUS_BAD_NAME: return "bad_name";
    case SSL_ECH_STATUS_FAILED_ECH: return "rejected";
    case SSL_ECH_STATUS_FAILED_ECH_BAD_NAME: return "rejected_bad_name";
    case SSL_ECH_STATUS_GREASE: case SSL_ECH_STATUS_GREASE_ECH: return "grease";
    default: return "unknown";
    }
}

/* At the end of the handshake, or when the client aborts it (a rejected ECH ends with the
 * client's ech_required alert after the outer handshake): the status, and the attempt's
 * failure if ECH was not accepted, recorded before the transport sees the library's error. */
static void ech_info_cb(const SSL *ssl, int where, int ret)
{
    (void)ret;
    if (!(where & SSL_CB_HANDSHAKE_DONE) && !((where & SSL_CB_ALERT) && (where & SSL_CB_WRITE)))
        return;
    char *inner = NULL, *outer = NULL;
    int st = SSL_ech_get1_status((SSL *)ssl, &inner, &outer);
    OPENSSL_free(inner);
    OPENSSL_free(outer);
    if (ech_reported && ech_status == SSL_ECH_STATUS_SUCCESS)
        return; /* a close_notify after an accepted handshake */
    ech_status = st;
    ech_reported = true;
    pqs_attempt *a = pqs_attempt_of(ssl);
    if (st != SSL_ECH_STATUS_SUCCESS && a != NULL)
        pqs_attempt_fail(a, PQS_ERR_TLS_ERROR, "ech", 0,
                         "the server did not accept ECH (status %s): not an ECH handshake (pqs-server --ech?)",
                         status_name(st));
}

bool pqs_ech_client_setup(SSL_CTX *ctx, const char *file, char *why, size_t whylen)
{
    BIO *in = BIO_new_file(file, "r");
    OSSL_ECHSTORE *es = OSSL_ECHSTORE_new(NULL, pqs_propq());
    int n = 0;
    bool ok = in != NULL && es != NULL && OSSL_ECHSTORE_read_echconfiglist(es, in) == 1
              && OSSL_ECHSTORE_num_entries(es, &n) == 1 && n > 0;
    if (!ok)
        snprintf(why, whylen, "%s holds no usable ECHConfigList (pqs-server writes it as %s in its --cert-dir "
                 "with --ech)", file, PQS_ECH_CONFIG_FILE);
    else if (SSL_CTX_set1_echstore(ctx, es) != 1) {
        snprintf(why, whylen, "OpenSSL refused the ECH configs of %s", file);
        ok = false;
    }
    BIO_free(in);
    OSSL_ECHSTORE_free(es);
    ERR_clear_error();
    if (ok)
        SSL_CTX_set_info_callback(ctx, ech_info_cb);
    return ok;
}

const char *pqs_ech_take_status(void)
{
    const char *s = ech_reported ? status_name(ech_status) : NULL;
    ech_reported = false;
    return s;
}
