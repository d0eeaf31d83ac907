/* module_errmark.h - a provider module's libcrypto error marks mirrored onto the loader's
 * error queue (module_errmark.c says why). */
#ifndef PQS_MODULE_ERRMARK_H
#define PQS_MODULE_ERRMARK_H

#include <openssl/core.h>

/* Call first thing in OSSL_provider_init, with the core's handle and dispatch table. */
void pqs_module_errmark_init(const OSSL_CORE_HANDLE *handle, const OSSL_DISPATCH *in);

#endif
