/* ech.h - TLS 1.3 Encrypted Client Hello (RFC 9849) for --mode ech: pqs-server makes one ECH
 * config per start (X25519 HPKE: OpenSSL's ECH refuses ML-KEM HPKE suites, so the hidden name
 * is protected classically) and publishes its public ECHConfigList in the cert dir; pqs-timer
 * offers it on every handshake and fails an attempt whose ECH the server did not accept. */
#ifndef PQS_ECH_H
#define PQS_ECH_H

#include <stdbool.h>
#include <stddef.h>
#include <openssl/ssl.h>

/* The file pqs-server writes into its cert dir: the public ECHConfigList, base64 on one line. */
#define PQS_ECH_CONFIG_FILE "ech-config.b64"

/* Server: a fresh X25519 ECH key and config (public_name: the outer SNI) installed into ctx,
 * and its public ECHConfigList written atomically to DIR/PQS_ECH_CONFIG_FILE (path_out gets
 * the path). false with why filled. */
bool pqs_ech_server_setup(SSL_CTX *ctx, const char *dir, const char *public_name, char *path_out,
                          size_t pathlen, char *why, size_t whylen);

/* Client: the ECHConfigList in file offered by every SSL of ctx; the status of each handshake
 * is kept for pqs_ech_take_status (per thread: a worker runs one attempt at a time). An
 * attempt whose ECH is not accepted fails at stage "ech" (pqs_attempt_fail) as soon as the
 * library knows. false with why filled. */
bool pqs_ech_client_setup(SSL_CTX *ctx, const char *file, char *why, size_t whylen);

/* The calling thread's last ECH status as a JSON string ("accepted", "rejected",
 * "not_tried", ...; NULL if no handshake reported one), and resets it. */
const char *pqs_ech_take_status(void);

#endif
