/* module_errmark.c - error marks of a provider module's own libcrypto, mirrored onto the
 * loader's error queue. Linked into both modules (pqs-oqs.so, oqsprovider.so) with
 * -Wl,--wrap=ERR_set_mark,--wrap=ERR_pop_to_mark,--wrap=ERR_clear_last_mark.
 *
 * Why: a module built here carries its own copy of the pinned libcrypto, so a process that
 * loads it has two per-thread error queues. The module's EVP calls run in a child library
 * context whose providers are the loader's (OSSL_LIB_CTX_new_child), i.e. code of the loader's
 * libcrypto, which raises its errors into the loader's queue. libcrypto's "try, then forget
 * the errors" idiom (ERR_set_mark ... ERR_pop_to_mark) runs in the module's copy and so only
 * ever cleans the module's queue. The case that broke handshakes: oqs-provider's EC halves
 * (P-256/384/521 hybrids) check every generated key with d2i_PrivateKey_ex, whose
 * OSSL_DECODER tries the loader's decoders one after the other (decoder_lib.c,
 * decoder_process: mark, decode, pop); the SubjectPublicKeyInfo decoder fails on the PKCS#8
 * input as expected and leaves "nested asn1 error" in the loader's queue; libssl's
 * SSL_get_error then reports SSL_ERROR_SSL instead of SSL_ERROR_WANT_READ for any
 * non-blocking handshake step (ssl_lib.c: a non-empty queue wins), and the handshake is
 * abandoned although nothing failed. With the marks mirrored, a pop in the module also pops
 * what the loader's providers raised since the matching mark.
 *
 * The core hands every provider these operations on the loader's queue
 * (OSSL_FUNC_CORE_SET_ERROR_MARK, ..._POP_ERROR_TO_MARK, ..._CLEAR_LAST_ERROR_MARK); they act on
 * the calling thread's queue and ignore the handle. Marks are balanced in OpenSSL's code, so
 * the loader's marks stay balanced too. */
#include <openssl/core_dispatch.h>

#include "module_errmark.h"

int __real_ERR_set_mark(void);
int __real_ERR_pop_to_mark(void);
int __real_ERR_clear_last_mark(void);
int __wrap_ERR_set_mark(void);
int __wrap_ERR_pop_to_mark(void);
int __wrap_ERR_clear_last_mark(void);

/* The loader's error-mark operations. One loader per process (the module's libcrypto copy is
 * private to it), so one set; written by the first OSSL_provider_init, before any provider code
 * of the module runs, read-only afterwards. */
static struct {
    const OSSL_CORE_HANDLE *handle;
    OSSL_FUNC_core_set_error_mark_fn *set_mark;
    OSSL_FUNC_core_pop_error_to_mark_fn *pop_to_mark;
    OSSL_FUNC_core_clear_last_error_mark_fn *clear_last_mark;
} loader_err;

void pqs_module_errmark_init(const OSSL_CORE_HANDLE *handle, const OSSL_DISPATCH *in)
{
    if (loader_err.handle != NULL)
        return;
    for (; in != NULL && in->function_id != 0; in++) {
        switch (in->function_id) {
        case OSSL_FUNC_CORE_SET_ERROR_MARK:
            loader_err.set_mark = OSSL_FUNC_core_set_error_mark(in);
            break;
        case OSSL_FUNC_CORE_POP_ERROR_TO_MARK:
            loader_err.pop_to_mark = OSSL_FUNC_core_pop_error_to_mark(in);
            break;
        case OSSL_FUNC_CORE_CLEAR_LAST_ERROR_MARK:
            loader_err.clear_last_mark = OSSL_FUNC_core_clear_last_error_mark(in);
            break;
        default:
            break;
        }
    }
    /* all three or none: a mark set without its pop would unbalance the loader's queue */
    if (loader_err.set_mark && loader_err.pop_to_mark && loader_err.clear_last_mark)
        loader_err.handle = handle;
}

int __wrap_ERR_set_mark(void)
{
    if (loader_err.handle != NULL)
        loader_err.set_mark(loader_err.handle);
    return __real_ERR_set_mark();
}

int __wrap_ERR_pop_to_mark(void)
{
    if (loader_err.handle != NULL)
        loader_err.pop_to_mark(loader_err.handle);
    return __real_ERR_pop_to_mark();
}

int __wrap_ERR_clear_last_mark(void)
{
    if (loader_err.handle != NULL)
        loader_err.clear_last_mark(loader_err.handle);
    return __real_ERR_clear_last_mark();
}
