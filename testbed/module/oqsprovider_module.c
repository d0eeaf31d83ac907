/* oqsprovider_module.c - oqs-provider (liboqsprovider.a, built static by `make deps`) as a
 * loadable module for the pinned `openssl` program: $(BUILD)/lib/ossl-modules/oqsprovider.so.
 *
 * The static build names its entry point oqs_provider_init (so that it can sit next to other
 * providers in one program); a module must export OSSL_provider_init, which is all this file
 * adds. Linked like pqs-oqs.so (oqsprov_module.c): liboqs and the pinned libcrypto.a inside, only
 * the entry point exported, -z nodelete for the libcrypto copy's atexit handler. The programs do
 * not use this file: they register oqs_provider_init as a built-in (provider_seam.c).
 *
 * Its libcrypto copy is a second error queue in the loading process; pqs_module_errmark_init
 * mirrors that copy's error marks onto the loader's queue (module_errmark.c: without it the
 * P-256/384/521 hybrids fail non-blocking handshakes with a stray "nested asn1 error"). */
#include <openssl/core.h>

#include "module_errmark.h"

extern OSSL_provider_init_fn oqs_provider_init;
OSSL_provider_init_fn OSSL_provider_init;

/* Compiled -fvisibility=hidden: the entry point is the one default-visibility symbol. */
__attribute__((visibility("default"))) int OSSL_provider_init(const OSSL_CORE_HANDLE *handle, const OSSL_DISPATCH *in,
                                                              const OSSL_DISPATCH **out, void **provctx)
{
    pqs_module_errmark_init(handle, in);
    return oqs_provider_init(handle, in, out, provctx);
}
