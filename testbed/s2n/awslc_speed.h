/* awslc_speed.h - the key exchanges and signatures of AWS-LC, the libcrypto under s2n-tls (the
 * second TLS stack, issue 33), for pqs-speed --stacks aws-lc: the same operations pqs-speed times
 * through OpenSSL's EVP, named by pqshake's names, so a line of each stack can stand side by side.
 *
 * No OpenSSL or AWS-LC type crosses this header: awslc_speed.c is the only file compiled against
 * AWS-LC's headers (its symbols are renamed pqs_awslc_*, testbed/deps/build-stack.sh), and the
 * rest of pqs-speed sees opaque states and int (*)(void *) operations (speed.h's op_fn). */
#ifndef PQS_AWSLC_SPEED_H
#define PQS_AWSLC_SPEED_H

#include <stdbool.h>
#include <stddef.h>

/* "AWS-LC 5.12.0": the library's own version string. */
const char *pqs_awslc_version(void);

/* A key exchange by its TLS group name (MLKEM512/768/1024, x25519, secp256r1, X25519MLKEM768,
 * SecP256r1MLKEM768): NULL when AWS-LC has no such group or its first key pair fails. A KEM's
 * operations are keygen, encaps (with the first key pair's public key), decaps (of the last
 * ciphertext); an ECDH group's keygen and derive (against a second key pair, set and checked
 * as a TLS peer's share). A hybrid is its two parts one after the other, as TLS runs them: keygen
 * both, encaps = the KEM's encaps + an ECDH key pair + derive, decaps = the KEM's decaps + derive. */
typedef struct pqs_awslc_kex pqs_awslc_kex;
pqs_awslc_kex *pqs_awslc_kex_new(const char *group);
bool pqs_awslc_kex_is_kem(const pqs_awslc_kex *k);
size_t pqs_awslc_kex_share_bytes(const pqs_awslc_kex *k); /* the client's key share */
size_t pqs_awslc_kex_ct_bytes(const pqs_awslc_kex *k);    /* the server's (KEM: ciphertext) */
int pqs_awslc_kex_keygen(void *k);
int pqs_awslc_kex_encaps(void *k);
int pqs_awslc_kex_decaps(void *k);
int pqs_awslc_kex_derive(void *k);
void pqs_awslc_kex_free(pqs_awslc_kex *k);

/* A signature algorithm by pqshake's name (ecdsa-p256, ed25519, ml-dsa-44/65/87): NULL when
 * AWS-LC has none. keygen makes a new key each call; sign signs a 128-byte message with the
 * state's key (ECDSA: SHA-256, as ecdsa_secp256r1_sha256), verify checks the last signature. */
typedef struct pqs_awslc_sig pqs_awslc_sig;
pqs_awslc_sig *pqs_awslc_sig_new(const char *name);
size_t pqs_awslc_sig_pk_bytes(const pqs_awslc_sig *s);
size_t pqs_awslc_sig_bytes(const pqs_awslc_sig *s); /* the last signature's */
int pqs_awslc_sig_keygen(void *s);
int pqs_awslc_sig_sign(void *s);
int pqs_awslc_sig_verify(void *s);
void pqs_awslc_sig_free(pqs_awslc_sig *s);

/* AWS-LC's last error as text (empty when none), and its queue cleared. */
void pqs_awslc_error(char *buf, size_t len);

#endif
