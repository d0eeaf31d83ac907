/* groups.h - TLS group and signature algorithm name tables and validation. */
#ifndef PQS_GROUPS_H
#define PQS_GROUPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <openssl/ssl.h>

/* ---- TLS groups (key exchange) ---- */

/* Checks every name of an OpenSSL group list ("a:b", "a/b", with '*', '?', '-' prefixes)
 * against the groups implemented by the providers loaded into ctx (for ctx's protocol
 * version range). On failure returns false and writes into why one line naming the value
 * and listing the available groups. */
bool pqs_groups_validate(SSL_CTX *ctx, const char *list, char *why, size_t whylen);

/* Comma separated canonical names of the implemented groups, e.g. for error messages. */
void pqs_groups_available(SSL_CTX *ctx, char *out, size_t outlen);

/* ':'-separated canonical names of the groups implemented for TLS 1.3 (the default
 * server list and the default pqs-speed list). */
void pqs_groups_tls13_list(char *out, size_t outlen);

/* pqs-server's default: every TLS 1.3 group OpenSSL itself implements, PQ hybrids and ML-KEM
 * first, then the classic groups in OpenSSL 3.5's DEFAULT order, then the rest; the groups of
 * the other providers only when named. */
void pqs_groups_server_default(char *out, size_t outlen);

/* Server preference: a plain "a:b:c" list becomes "a/b/c" (strict preference order: OpenSSL
 * 3.5 otherwise prefers, within one tuple, any group the client sent a key share for).
 * A list that already contains '/' is passed through unchanged. */
void pqs_groups_server_pref(const char *list, char *out, size_t outlen);

/* Client list for hrr mode: supported groups = decoy + list, key share only for the decoy
 * ("*decoy:g1:g2"). */
void pqs_groups_hrr_client(const char *decoy, const char *list, char *out, size_t outlen);

/* Picks a decoy group (key share the server is not expected to pick): the first of
 * x25519, secp256r1, x448, secp384r1 that is not named in list. */
const char *pqs_groups_pick_decoy(const char *list);

/* One TLS group as declared by a provider's TLS-GROUP capability. */
typedef struct {
    char name[64];       /* TLS name, e.g. "X25519MLKEM768" */
    char alg[64];        /* key management algorithm, e.g. "EC", "X25519", "ML-KEM-768" */
    char internal[64];   /* internal group name ("prime256v1", "ffdhe2048") or "" */
    unsigned id;         /* IANA code point */
    bool is_kem;
    int min_tls;         /* e.g. 0x0304 for TLS 1.3-only groups */
} pqs_group_info;

/* Fills up to max entries (deduplicated by id, provider order); returns the count. */
size_t pqs_groups_enumerate(OSSL_LIB_CTX *libctx, pqs_group_info *out, size_t max);

/* ':'-separated TLS 1.3 signature schemes the loaded providers offer: OpenSSL's built-in
 * table without the schemes TLS 1.3 does not allow (rsa_pkcs1_*, dsa_*, SHA-1, SHA-224), then
 * every provider TLS-SIGALG capability usable in TLS 1.3 (ML-DSA, pqs-slhdsa's SLH-DSA). */
void pqs_sigalgs_tls13_list(char *out, size_t outlen);

/* --list-groups / --list-sigs of pqs-server and pqs-timer: prints a ':'-separated list one
 * name per line on stdout, each followed by a tab and the provider that implements it (sigs:
 * the list is of signature schemes). Returns the exit status (0, or 1 if nothing could be
 * listed). */
int pqs_print_list(const char *colon_list, bool sigs);

/* The name of the provider that implements a TLS group (sigs false) or TLS 1.3 signature
 * scheme (sigs true) as libssl would use it: the algorithm named by the first provider
 * capability that declares the name, fetched with pqs_propq(). A scheme of libssl's built-in
 * table is the default provider's. Writes "?" if the name is not found. */
void pqs_list_provider(const char *name, bool sigs, char *out, size_t outlen);

/* OpenSSL 3.5.x writes past its tuple-count array when a group list has 32 or more tuples and
 * mis-sizes the 33rd tuple (ssl/t1_lib.c tuple_cb; README "Known issues"). 3.6.3 and later grow
 * the array before closing a tuple, so the pinned OpenSSL no longer needs it; lists stay limited
 * to this many tuples ('/'-separated parts) until longer lists are tested under ASan. */
#define PQS_GROUPS_MAX_TUPLES 31

/* Number of '/'-separated tuples in an OpenSSL group list. */
size_t pqs_groups_tuple_count(const char *list);

/* ---- signature algorithms (certificate keys) ---- */

typedef struct {
    const char *name;     /* pqshake name: "ecdsa-p256", "ml-dsa-44", ... */
    const char *keytype;  /* EVP key type for EVP_PKEY_Q_keygen / CTX_new_from_name */
    const char *param;    /* curve name for EC, NULL otherwise */
    unsigned bits;        /* RSA modulus bits, else 0 */
    const char *digest;   /* digest for certificate signing and speed (NULL: none) */
    const char *tls_sigalg; /* TLS 1.3 SignatureScheme OpenSSL negotiates for it */
} pqs_sig_alg;

const pqs_sig_alg *pqs_sig_lookup(const char *name);
size_t pqs_sig_count(void);
const pqs_sig_alg *pqs_sig_at(size_t i);
void pqs_sig_available(char *out, size_t outlen);
/* --help: the same list on f, then a newline. */
void pqs_sig_available_print(FILE *f);

/* Why NAME, a signature algorithm pqshake knows of but cannot offer (the ML-DSA
 * composites oqs-provider dropped, e.g. "mldsa44_p256"), is unavailable, naming the hybrid to use instead;
 * NULL for any other name. */
const char *pqs_sig_unavailable(const char *name);

/* pqs_sig_lookup for command-line option OPT (e.g. "--sig") of program PROG; an unknown or
 * unavailable name is pqs_usage_error's one line (the reason, or the names available). */
const pqs_sig_alg *pqs_sig_require(const char *prog, const char *opt, const char *name);

/* Our name for a key ("rsa-3072", "ml-dsa-65", ...), or "unknown". */
const char *pqs_sig_name_of_key(const EVP_PKEY *pk);

#endif
