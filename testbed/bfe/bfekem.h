/* bfekem.h - pqshake's use of bfe-bf (Bloom Filter Encryption on Boneh-Franklin; pairing-based,
 * not post-quantum): what wraps the library's calls that take peer input. Needs bfe-bf's and
 * relic's headers (BFE_CPPFLAGS in testbed/Makefile); linked only where BFE is (test_bfe so far). */
#ifndef PQS_BFEKEM_H
#define PQS_BFEKEM_H

#include <stddef.h>
#include <stdint.h>

#include <bfe/bfe-bf.h>

#include "bfewire.h"

/* pqs_bfe_ct_decode: ciphertext bytes received from a peer into *ct, for decapsulation with the
 * secret key of pk. The bytes are checked first (pqs_bfe_ct_parse with pk's k * key_size); only
 * then does bfe_bf_ciphertext_deserialize see them. PQS_BFE_CT_OK: *ct holds the ciphertext
 * (bfe_bf_clear_ciphertext after use); anything else: *ct holds nothing to clear. */
pqs_bfe_ct_status pqs_bfe_ct_decode(bfe_bf_ciphertext_t *ct, const bfe_bf_public_key_t *pk, const uint8_t *buf,
                                    size_t len);

#endif
