/* bfekem.c - the checked path from received bytes to bfe-bf (bfekem.h). */
#include "bfekem.h"

#include <relic/relic.h>

/* The parser's point size is relic's for the curve it was built for (FP_PRIME=381). */
_Static_assert(PQS_BFE_U_BYTES == 1 + 2 * RLC_FP_BYTES, "PQS_BFE_U_BYTES does not match relic's field size");

pqs_bfe_ct_status pqs_bfe_ct_decode(bfe_bf_ciphertext_t *ct, const bfe_bf_public_key_t *pk, const uint8_t *buf,
                                    size_t len)
{
    pqs_bfe_ct_status st = pqs_bfe_ct_parse(buf, len, pqs_bfe_ct_v_len(pk->filter_hash_count, pk->key_size), NULL);
    if (st != PQS_BFE_CT_OK)
        return st;
    if (bfe_bf_ciphertext_deserialize(ct, buf) != BFE_SUCCESS) {
        bfe_bf_clear_ciphertext(ct);
        return PQS_BFE_CT_LIBRARY;
    }
    return PQS_BFE_CT_OK;
}
