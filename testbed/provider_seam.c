/* provider_seam.c - provider loading for all three programs (see provider_seam.h). */
#include "provider_seam.h"

#include <stdio.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/opensslv.h>
#include <openssl/provider.h>

#include <oqs/oqs.h>

#include "slhdsa_shim.h"

/* The seam's state: which providers were loaded, and the property query that prefers them. */
static struct {
    char names[256];
    char propq[128];
    OSSL_PROVIDER *loaded[4]; /* in load order; unloaded in reverse */
    int n_loaded;
} seam_state;

int pqs_load_providers(OSSL_LIB_CTX *libctx)
{
    OSSL_PROVIDER *def = OSSL_PROVIDER_load(libctx, "default");
    if (def == NULL) {
        fprintf(stderr, "cannot load the OpenSSL default provider\n");
        ERR_print_errors_fp(stderr);
        return -1;
    }
    snprintf(seam_state.names, sizeof seam_state.names, "default");
    seam_state.loaded[seam_state.n_loaded++] = def;

    /* SLH-DSA as a TLS 1.3 signature scheme: OpenSSL 3.5 implements SLH-DSA but declares no
     * TLS-SIGALG for it. The shim re-exports the default provider's SLH-DSA with the
     * capability attached. */
    OSSL_PROVIDER *shim = pqs_slhdsa_shim_load(libctx, def);
    if (shim != NULL) {
        seam_state.loaded[seam_state.n_loaded++] = shim;
        strncat(seam_state.names, ",", sizeof seam_state.names - strlen(seam_state.names) - 1);
        strncat(seam_state.names, PQS_SLHDSA_SHIM_NAME,
                sizeof seam_state.names - strlen(seam_state.names) - 1);
        snprintf(seam_state.propq, sizeof seam_state.propq, "?provider=%s", PQS_SLHDSA_SHIM_NAME);
    } else {
        ERR_clear_error();
    }

    /* LATER (liboqs KEM provider): OSSL_PROVIDER_add_builtin(libctx, "oqsprovider",
     * oqs_provider_init); OSSL_PROVIDER_load(libctx, "oqsprovider"); append its name here.
     * Its TLS-GROUP capability makes its groups valid for --groups and listed by pqs-speed. */
    return 0;
}

void pqs_unload_providers(void)
{
    while (seam_state.n_loaded > 0)
        OSSL_PROVIDER_unload(seam_state.loaded[--seam_state.n_loaded]);
}

const char *pqs_propq(void) { return seam_state.propq[0] ? seam_state.propq : NULL; }

const char *pqs_provider_names(void) { return seam_state.names; }

const char *pqs_openssl_version(void) { return OpenSSL_version(OPENSSL_VERSION_STRING); }

const char *pqs_liboqs_version(void) { return OQS_version(); }

void pqs_json_header_common(pqs_json *j, const char *tool, int argc, char **argv)
{
    /* The anchor pair: read back to back so lines from different hosts/processes can be
     * aligned: realtime = anchor_realtime_ns + (mono - anchor_mono_ns). */
    int64_t m0 = pqs_mono_ns();
    int64_t r = pqs_real_ns();
    int64_t m1 = pqs_mono_ns();
    pqs_json_str(j, "tool", tool);
    pqs_json_str(j, "pqshake_version", PQS_VERSION);
    pqs_json_str(j, "pqshake_commit", PQS_GIT_COMMIT);
    pqs_json_str(j, "openssl_version", pqs_openssl_version());
    pqs_json_str(j, "openssl_version_full", OpenSSL_version(OPENSSL_VERSION));
    pqs_json_str(j, "liboqs_version", pqs_liboqs_version());
    pqs_json_str(j, "providers", pqs_provider_names());
    pqs_json_str(j, "clock", "CLOCK_MONOTONIC");
    pqs_json_int(j, "anchor_mono_ns", m0 + (m1 - m0) / 2);
    pqs_json_int(j, "anchor_realtime_ns", r);
    pqs_json_int(j, "anchor_uncertainty_ns", m1 - m0);
    pqs_json_str_array(j, "argv", argc, argv);
}
