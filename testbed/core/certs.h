/* certs.h - certificate chain generation for pqs-server (its own chain and the client
 * credentials of mutual TLS). */
#ifndef PQS_CERTS_H
#define PQS_CERTS_H

#include <openssl/ssl.h>
#include <openssl/x509.h>
#include "groups.h"

#define PQS_CHAIN_MAX_DEPTH 4
/* The largest synthetic extension (--cert-pad-bytes) and SCT count (--cert-scts) of a leaf. */
#define PQS_CERT_PAD_MAX 60000
#define PQS_CERT_SCTS_MAX 16
/* One SCT as a log would send it for an ECDSA P-256 log key (RFC 6962 3.2): version 1, log id
 * 32, timestamp 8, extensions 2, hash and signature algorithm 2, signature length 2, DER
 * signature 71; each is preceded by its 2-byte length in the list. */
#define PQS_SCT_BYTES 118

/* depth = number of certificates the server sends: the leaf plus depth-1 intermediates.
 * The self-signed root is not sent; it is what the client verifies against (ca.pem). */
typedef struct pqs_chain {
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

/* What to make: the algorithm of each level (inter and root NULL: the leaf's), the depth, and
 * what makes the leaf larger without changing its algorithm: a non-critical extension of
 * pad_bytes random bytes (OID 2.25.<UUID>: no registry), and an SCT list extension (RFC 6962,
 * 1.3.6.1.4.1.11129.2.4.2) of scts well-formed SCTs with random log ids and signatures, the
 * size a WebPKI leaf carries (2-3 SCTs). Random bytes: a real extension of that size (SCT
 * signatures, keys) does not compress either. */
typedef struct {
    const pqs_sig_alg *leaf, *inter, *root;
    int depth;
    int pad_bytes;
    int scts;
} pqs_chain_spec;

/* Generates root -> intermediates -> leaf as spec says; 0, or -1 with err filled. */
int pqs_chain_make(OSSL_LIB_CTX *libctx, const pqs_chain_spec *spec, pqs_chain_role role, pqs_chain *out,
                   char *err, size_t errlen);

/* Generates root -> intermediates -> leaf. leaf_alg signs CertificateVerify; ca_alg is the
 * key type of the root and intermediates (and so the certificate signature algorithm).
 * Returns 0, or -1 with err filled. */
int pqs_chain_generate(OSSL_LIB_CTX *libctx, const pqs_sig_alg *leaf_alg,
                       const pqs_sig_alg *ca_alg, int depth, pqs_chain_role role, pqs_chain *out,
                       char *err, size_t errlen);

/* Writes DIR/<prefix>ca.pem (root; with trust_intermediates the intermediates after it, as
 * trust anchors of a client that holds them) and DIR/<prefix>chain.pem (leaf + intermediates),
 * and with with_key DIR/<prefix>key.pem (the leaf's private key, PKCS#8, mode 0600), each
 * atomically (write to a temporary file, fsync, rename). pqs-server writes its own chain with
 * prefix "" and the client credentials of --client-auth with "client-". Returns 0 or -1 with err. */
int pqs_chain_write(const pqs_chain *c, const char *dir, const char *prefix, bool with_key,
                    bool trust_intermediates, char *err, size_t errlen);

/* Installs leaf, key and (send_intermediates) the intermediates into ctx. Returns 0 or -1. */
int pqs_chain_use(SSL_CTX *ctx, const pqs_chain *c, bool send_intermediates);

/* Generates one key of the given algorithm (NULL on failure). */
EVP_PKEY *pqs_keygen(OSSL_LIB_CTX *libctx, const pqs_sig_alg *alg);

void pqs_chain_free(pqs_chain *c);

/* Certificate compression (RFC 8879), both programs' --cert-comp LIST: NULL or "off", none
 * either way. OpenSSL 4.0 built with zlib/brotli/zstd offers and uses it by default, and a client
 * then compresses its chain on every handshake (brotli: about 11 ms per ML-DSA-65 certificate
 * here, +33 ms to a mutual-TLS handshake with a chain of 3), while a PQ certificate barely
 * compresses (its key and signature look random): off unless asked for. Else LIST is
 * zlib, brotli and zstd in preference order (','-separated): offered and accepted both ways.
 * 0, or -1 with why (an unknown name, an algorithm the build lacks). */
int pqs_ctx_cert_compression(SSL_CTX *ctx, const char *list, char *why, size_t whylen);
/* LIST asks for compression (not NULL, not "off"). */
bool pqs_cert_comp_on(const char *list);
/* Server, --cert-comp LIST: an OpenSSL server never compresses during a handshake, it sends a
 * CompressedCertificate only from a form stored beforehand. Stores one per algorithm of LIST
 * that makes the installed chain's Certificate message smaller (SSL_CTX_get1_compressed_cert,
 * SSL_CTX_set1_compressed_cert): SSL_CTX_compress_certs, which should, looks only at the
 * built-in key types' slots, so it stores nothing for an ML-DSA or SLH-DSA certificate
 * (OpenSSL 4.0.3 ssl/ssl_cert_comp.c, the loop up to SSL_PKEY_NUM). out: what was stored,
 * "zlib:3909/3945,..." (compressed/uncompressed bytes of each), then "none smaller: ..." for
 * those that did not shrink it. C is the chain installed (pqs_chain_use with send_intermediates),
 * from which a QUIC context's forms are made (OpenSSL makes none through one itself). */
void pqs_cert_comp_store(SSL_CTX *ctx, const pqs_chain *c, bool send_intermediates, const char *list, char *out,
                         size_t outlen);
/* DER bytes of the certificates a peer receives: the leaf and, with_intermediates, the rest. */
size_t pqs_chain_der_bytes(const pqs_chain *c, bool with_intermediates);

#endif
