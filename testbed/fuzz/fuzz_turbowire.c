/* fuzz_turbowire.c - libFuzzer target for the TurboTLS parsers that read peer input: the
 * datagram header (both directions), the TCP binding, and reassembly driven by parsed
 * datagrams. Build: make -C testbed fuzz; run e.g. build/fuzz/fuzz_turbowire -runs=200000 */
#include <stdint.h>
#include <stdlib.h>

#include "turbowire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pqs_turbo_dgram d;
    if (pqs_turbo_parse(data, size, &d) == PQS_TW_OK) {
        if (d.offset > d.total || d.len > d.total - d.offset || d.index >= d.count || d.payload + d.len != data + size)
            abort();
        pqs_treasm r;
        if (pqs_treasm_init(&r, d.total) == 0) {
            if (pqs_treasm_add(&r, d.offset, d.payload, d.len) != (long)d.len || r.prefix > r.total)
                abort();
            pqs_treasm_free(&r);
        }
    }
    pqs_turbo_bind b;
    if (pqs_turbo_bind_parse(data, size, &b) && (b.have > PQS_TURBO_MAX_FLIGHT || b.ch_len > PQS_TURBO_MAX_FLIGHT))
        abort();
    return 0;
}
