/* slhdsa_shim.h - built-in provider that lets TLS 1.3 negotiate SLH-DSA.
 *
 * OpenSSL 3.5's default provider implements SLH-DSA keys and signatures but declares no
 * TLS-SIGALG capability for them, so libssl cannot use an SLH-DSA certificate. libssl only
 * accepts a provider-declared sigalg when the same provider also implements the key type.
 * The shim therefore re-exports the default provider's own SLH-DSA key-management and
 * signature implementations (same code, same provider context) under its own name and
 * adds the TLS-SIGALG capability with the code points of draft-reddy-tls-slhdsa
 * (slhdsa_sha2_128s = 0x0911 ... slhdsa_shake_256f = 0x091C). */
#ifndef PQS_SLHDSA_SHIM_H
#define PQS_SLHDSA_SHIM_H

#include <openssl/types.h>

#define PQS_SLHDSA_SHIM_NAME "pqs-slhdsa"

/* Registers and loads the shim into libctx; def is the loaded default provider.
 * Returns the loaded provider, or NULL if the default provider has no SLH-DSA. */
OSSL_PROVIDER *pqs_slhdsa_shim_load(OSSL_LIB_CTX *libctx, OSSL_PROVIDER *def);

#endif
