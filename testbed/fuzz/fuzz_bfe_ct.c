/* fuzz_bfe_ct.c - libFuzzer target for the check in front of bfe-bf's ciphertext deserializer
 * (bfe/bfewire.c, issue 22). Byte 0 picks the key's k (1..16), byte 1 its key size (1..32); the
 * rest is the ciphertext. An accepted buffer must be exactly what the library reads: the length
 * field equal to the bytes given, the point, then k * key_size bytes of v, all inside the buffer.
 * Build: make -C testbed fuzz; run e.g. build/fuzz/fuzz_bfe_ct -runs=200000 */
#include <stdint.h>
#include <stdlib.h>

#include "bfewire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    size_t v_len = pqs_bfe_ct_v_len(data[0] % PQS_BFE_MAX_K + 1u, data[1] % PQS_BFE_MAX_KEY + 1u);
    const uint8_t *in = data + 2;
    size_t n = size - 2;
    pqs_bfe_ct c;
    if (pqs_bfe_ct_parse(in, n, v_len, &c) != PQS_BFE_CT_OK)
        return 0;
    uint32_t field = (uint32_t)in[0] | (uint32_t)in[1] << 8 | (uint32_t)in[2] << 16 | (uint32_t)in[3] << 24;
    if (field != n || c.u != in + PQS_BFE_LEN_BYTES || c.v != c.u + PQS_BFE_U_BYTES || c.v_len != v_len ||
        c.v + c.v_len != in + n || c.u[0] != PQS_BFE_U_TAG)
        abort();
    return 0;
}
