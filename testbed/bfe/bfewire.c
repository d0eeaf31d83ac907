/* bfewire.c - checked parsing of bfe-bf ciphertext bytes (bfewire.h). */
#include "bfewire.h"

size_t pqs_bfe_ct_v_len(unsigned k, unsigned key_size)
{
    if (k == 0 || key_size == 0 || k > PQS_BFE_MAX_K || key_size > PQS_BFE_MAX_KEY)
        return 0;
    return (size_t)k * key_size;
}

pqs_bfe_ct_status pqs_bfe_ct_parse(const uint8_t *buf, size_t len, size_t v_len, pqs_bfe_ct *out)
{
    if (buf == NULL || len < PQS_BFE_LEN_BYTES + PQS_BFE_U_BYTES)
        return PQS_BFE_CT_SHORT;
    uint32_t field = (uint32_t)buf[0] | (uint32_t)buf[1] << 8 | (uint32_t)buf[2] << 16 | (uint32_t)buf[3] << 24;
    if ((uint64_t)field != (uint64_t)len)
        return PQS_BFE_CT_LENGTH;
    if (v_len == 0 || v_len > PQS_BFE_MAX_V_BYTES || len - PQS_BFE_LEN_BYTES - PQS_BFE_U_BYTES != v_len)
        return PQS_BFE_CT_V_SIZE;
    if (buf[PQS_BFE_LEN_BYTES] != PQS_BFE_U_TAG)
        return PQS_BFE_CT_POINT;
    if (out != NULL) {
        out->u = buf + PQS_BFE_LEN_BYTES;
        out->v = out->u + PQS_BFE_U_BYTES;
        out->v_len = v_len;
    }
    return PQS_BFE_CT_OK;
}

const char *pqs_bfe_ct_status_name(pqs_bfe_ct_status s)
{
    switch (s) {
    case PQS_BFE_CT_OK: return "ok";
    case PQS_BFE_CT_SHORT: return "short";
    case PQS_BFE_CT_LENGTH: return "length_mismatch";
    case PQS_BFE_CT_V_SIZE: return "v_size";
    case PQS_BFE_CT_POINT: return "point_tag";
    case PQS_BFE_CT_LIBRARY: return "library";
    }
    return "unknown";
}
