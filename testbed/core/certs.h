/* certs.h - certificate chain generation for pqs-server (its own chain and the client
 * credentials of mutual TLS). */
#ifndef PQS_CERTS_H
#define PQS_CERTS_H

#include <openssl/ssl.h>
#include <openssl/x509.h>
#include "groups.h"

#define PQS_CHAIN_MAX_DEPTH 3

/* depth = number of certificates the server sends: the leaf plus depth-1 intermediates.
 * The self-signed root is not sent; it is what the client verifies against (ca.pem). */
typedef struct {
    int depth;
    EVP_PKEY *leaf_key;
    X509 *leaf;
    X509 *inter[PQS_CHAIN_MAX_DEPTH]; /* inter[0] issued the leaf */
    int n_inter;
    X509 *root;
    int64_t gen_ns;                   /* time spent generating keys and signing */
} pqs_chain;

/* Whose chain: the server's (leaf for serverAuth, names DNS:localhost, IP:127.0.0.1, IP:::1)
 * or a client's for mutual TLS (leaf for clientAuth, CN "pqshake client"). */
typedef enum { PQS_CHAIN_SERVER, PQS_CHAIN_CLIENT } pqs_chain_role;

/* Generates root -> intermediates -> leaf. leaf_alg signs CertificateVerify; ca_alg is the
 * key type of the root and intermediates (and so the certificate signature algorithm).
 * Returns 0, or -1 with err filled. */
int pqs_chain_generate(OSSL_LIB_CTX *libctx, const pqs_sig_alg *leaf_alg,
                       const pqs_sig_alg *ca_alg, int depth, pqs_chain_role role, pqs_chain *out,
                       char *err, size_t errlen);

/* Writes DIR/<prefix>ca.pem (root) and DIR/<prefix>chain.pem (leaf + intermediates), and with
 * with_key DIR/<prefix>key.pem (the leaf's private key, PKCS#8, mode 0600), each atomically
 * (write to a temporary file, fsync, rename). pqs-server writes its own chain with prefix ""
 * and the client credentials of --client-auth with "client-". Returns 0 or -1 with err. */
int pqs_chain_write(const pqs_chain *c, const char *dir, const char *prefix, bool with_key,
                    char *err, size_t errlen);

/* Installs leaf, key and intermediates into ctx. Returns 0 or -1. */
int pqs_chain_use(SSL_CTX *ctx, const pqs_chain *c);

/* Generates one key of the given algorithm (NULL on failure). */
EVP_PKEY *pqs_keygen(OSSL_LIB_CTX *libctx, const pqs_sig_alg *alg);

void pqs_chain_free(pqs_chain *c);

/* Both programs' contexts: no certificate compression (RFC 8879) either way. OpenSSL 4.0 built
 * with zlib/brotli/zstd offers and uses it by default, and a client then compresses its chain on
 * every handshake (brotli: about 11 ms per ML-DSA-65 certificate here, +33 ms to a mutual-TLS
 * handshake with a chain of 3), while a PQ certificate barely compresses (its key and signature
 * look random). Handshakes stay what they were on 3.6; compression is a variable to ask for. */
void pqs_ctx_no_cert_compression(SSL_CTX *ctx);

#endif
