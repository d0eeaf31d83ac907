/* provider_seam.h - the one place where OpenSSL providers are loaded, for all three programs.
 *
 * The OpenSSL default provider, the built-in "pqs-slhdsa" shim that makes the default
 * provider's SLH-DSA usable as a TLS 1.3 signature scheme, and the built-in liboqs KEM
 * provider "pqs-oqs" (testbed/oqsprov): every group it declares through the TLS-GROUP
 * capability shows up in --groups validation and in pqs-speed (not in pqs-server's default
 * list: see oqsprov/README.md). */
#ifndef PQS_PROVIDER_SEAM_H
#define PQS_PROVIDER_SEAM_H

#include <openssl/types.h>
#include "common.h"

/* --help lines of the options pqs-server and pqs-timer both take from this seam
 * (--provider, --oqs-native, --list-groups, --list-sigs), in their 25-column layout. */
#define PQS_SEAM_OPTIONS_HELP \
	"  --provider NAME        liboqs provider: oqsprovider (default: oqs-provider 0.11.0 built in,\n" \
	"                         pqs-oqs for the groups it lacks), pqs-oqs (ours alone), none\n" \
	"                         (OpenSSL's groups only), or a provider module instead of both:\n" \
	"                         NAME (NAME.so in $OPENSSL_MODULES), FILE.so or a path, e.g.\n" \
	"                         build/lib/ossl-modules/pqs-oqs.so or a system oqsprovider with\n" \
	"                         OPENSSL_MODULES=/usr/lib64/ossl-modules. Default $PQS_PROVIDER\n" \
	"  --oqs-native           pqs-oqs also serves OpenSSL's native ML-KEM groups (X25519MLKEM768,\n" \
	"                         ...) with liboqs, for interop tests (default: $PQS_OQS_NATIVE=1)\n" \
	"  --list-groups          print the TLS 1.3 groups the loaded providers offer, one per line:\n" \
	"                         name, a tab, the provider that implements it\n" \
	"  --list-sigs            the same for TLS 1.3 signature algorithms\n"

/* The built-in oqs-provider (Open Quantum Safe, liboqsprovider.a): the default. */
#define PQS_OQS_PROVIDER_NAME "oqsprovider"

/* Longest --provider value (a module path). */
#define PQS_PROVIDER_NAME_MAX 4096

/* Chooses the KEM provider before pqs_load_providers (a program's --provider option):
 * kem_provider NULL = not set (then $PQS_PROVIDER, else "oqsprovider": oqs-provider
 * built in, plus our pqs-oqs for the liboqs groups oqs-provider lacks), "pqs-oqs" = our
 * built-in liboqs provider alone, "none" = OpenSSL's groups only, any other value = a provider module loaded
 * instead of ours with OSSL_PROVIDER_load: NAME (NAME.so in $OPENSSL_MODULES or the default
 * module directory), FILE.so (that file in the same directory) or a path (contains '/'), e.g.
 * our own build/lib/ossl-modules/pqs-oqs.so or a system oqsprovider. A module that does not
 * load fails with one line (module, OpenSSL's reason, the fix). The header records it in
 * `providers` and `provider_module*`. native_codepoints -1 = not set (then $PQS_OQS_NATIVE=1),
 * 1 = our provider also serves OpenSSL's native ML-KEM groups (X25519MLKEM768 0x11EC, ...) with
 * liboqs and the property query prefers it: the interop mode (see oqsprov/README.md). */
void pqs_seam_configure(const char *kem_provider, int native_codepoints);

/* A --provider value checked (not empty, shorter than PQS_PROVIDER_NAME_MAX) and returned;
 * anything else ends the program with the usage error every --provider option gives. */
const char *pqs_seam_provider_arg(const char *prog, const char *arg);

/* Loads the providers into libctx (NULL = default library context). Returns 0, or -1 with a
 * message on stderr. Call once, before any other OpenSSL use. */
int pqs_load_providers(OSSL_LIB_CTX *libctx);

/* Unloads what pqs_load_providers loaded (at exit, after every SSL_CTX/EVP object is freed). */
void pqs_unload_providers(void);

/* Property query to pass to SSL_CTX_new_ex / EVP_*_fetch / EVP_PKEY_Q_keygen so that the
 * providers loaded above are preferred where they implement an algorithm. */
const char *pqs_propq(void);

/* Names of the loaded providers, comma separated (for the header line). */
const char *pqs_provider_names(void);

/* "4.0.3" etc. */
const char *pqs_openssl_version(void);
const char *pqs_liboqs_version(void);

/* Appends the common header members: tool, versions, providers, clocks with a
 * CLOCK_REALTIME/CLOCK_MONOTONIC anchor pair, argv. */
void pqs_json_header_common(pqs_json *j, const char *tool, int argc, char **argv);

#endif
