/* oqsprov_module.c - the entry point that makes pqs-oqs (testbed/oqsprov) a loadable OpenSSL
 * provider module: $(BUILD)/lib/ossl-modules/pqs-oqs.so (`make -C testbed module`).
 *
 * The same provider code as the built-in one, linked with liboqs and the pinned libcrypto.a
 * (compiled PIC) into one shared object that exports only OSSL_provider_init (version script
 * oqsprov_module.map; everything else, libcrypto and liboqs included, is local). Its libcrypto
 * copy is a second instance next to the loading program's: the provider talks to the core
 * only through the dispatch table it is given, and its classical (EVP) halves run in a child
 * library context (OSSL_LIB_CTX_new_child) that mirrors the providers of the loader, i.e.
 * the loader's default provider does the ECDH. That is exactly how a system oqs-provider
 * (linked to a shared libcrypto.so.3) runs inside our statically linked programs.
 *
 * Load parameter: "native-codepoints" = "yes", as for the built-in provider (the seam passes
 * it only to the built-in one; `openssl` can set it in a config file). */
#include <openssl/core.h>

#include "module_errmark.h"
#include "oqsprov/oqsprov.h"

OSSL_provider_init_fn OSSL_provider_init;

/* Compiled -fvisibility=hidden: the entry point is the one default-visibility symbol. */
__attribute__((visibility("default"))) int OSSL_provider_init(const OSSL_CORE_HANDLE *handle, const OSSL_DISPATCH *in, const OSSL_DISPATCH **out,
                       void **provctx)
{
    /* the loader's error marks follow this copy's (module_errmark.c) */
    pqs_module_errmark_init(handle, in);
    return pqs_oqsprov_init(handle, in, out, provctx);
}
