/* provider_seam.c - provider loading for all three programs (see provider_seam.h). */
#include "provider_seam.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/opensslv.h>
#include <openssl/params.h>
#include <openssl/provider.h>

#include <oqs/oqs.h>

#include "oqsprov/oqsprov.h"
#include "slhdsa_shim.h"

/* The seam's state: which providers were loaded, and the property query that prefers them. */
static struct {
    char names[256];
    char propq[128];
    OSSL_PROVIDER *loaded[4]; /* in load order; unloaded in reverse */
    int n_loaded;
    char kem_provider[64]; /* "" = not configured: $PQS_PROVIDER, else pqs-oqs */
    int oqs_native;        /* -1 = not configured: $PQS_OQS_NATIVE */
} seam_state = {.oqs_native = -1};

void pqs_seam_configure(const char *kem_provider, int native_codepoints)
{
    if (kem_provider != NULL)
        snprintf(seam_state.kem_provider, sizeof seam_state.kem_provider, "%s", kem_provider);
    if (native_codepoints >= 0)
        seam_state.oqs_native = native_codepoints != 0;
}

static void add_name(const char *name)
{
    if (seam_state.names[0])
        strncat(seam_state.names, ",", sizeof seam_state.names - strlen(seam_state.names) - 1);
    strncat(seam_state.names, name, sizeof seam_state.names - strlen(seam_state.names) - 1);
}

/* The KEM provider: ours (built in, the default), none, or a system one by name. */
static int load_kem_provider(OSSL_LIB_CTX *libctx)
{
    const char *name = seam_state.kem_provider[0] ? seam_state.kem_provider : getenv("PQS_PROVIDER");
    if (name == NULL || *name == '\0')
        name = PQS_OQSPROV_NAME;
    int native = seam_state.oqs_native;
    if (native < 0) {
        const char *e = getenv("PQS_OQS_NATIVE");
        native = e != NULL && (strcmp(e, "1") == 0 || strcmp(e, "yes") == 0);
    }
    if (strcmp(name, "none") == 0)
        return 0;
    OSSL_PROVIDER *prov = NULL;
    if (strcmp(name, PQS_OQSPROV_NAME) == 0) {
        OSSL_PARAM params[] = {
            OSSL_PARAM_construct_utf8_string(PQS_OQSPROV_PARAM_NATIVE, (char *)(native ? "yes" : "no"), 0),
            OSSL_PARAM_construct_end()};
        if (OSSL_PROVIDER_add_builtin(libctx, PQS_OQSPROV_NAME, pqs_oqsprov_init))
            prov = OSSL_PROVIDER_load_ex(libctx, PQS_OQSPROV_NAME, params);
        if (prov == NULL) {
            fprintf(stderr, "cannot load the built-in provider %s\n", PQS_OQSPROV_NAME);
            ERR_print_errors_fp(stderr);
            return -1;
        }
        seam_state.loaded[seam_state.n_loaded++] = prov;
        add_name(native ? PQS_OQSPROV_NAME "(native-codepoints)" : PQS_OQSPROV_NAME);
        if (native) { /* prefer ours where it implements an OpenSSL-native name */
            size_t l = strlen(seam_state.propq);
            snprintf(seam_state.propq + l, sizeof seam_state.propq - l, "%s%s", l ? "," : "",
                     PQS_OQSPROV_PREFER);
        }
        return 0;
    }
    prov = OSSL_PROVIDER_load(libctx, name);
    if (prov == NULL) {
        unsigned long e = ERR_peek_last_error();
        char buf[256] = "";
        if (e)
            ERR_error_string_n(e, buf, sizeof buf);
        fprintf(stderr,
                "cannot load provider '%s' (%s); the pinned OpenSSL is built no-shared no-module, so it "
                "cannot load provider modules: only built-in providers (%s) are available\n",
                name, buf[0] ? buf : "not found", PQS_OQSPROV_NAME);
        ERR_clear_error();
        return -1;
    }
    seam_state.loaded[seam_state.n_loaded++] = prov;
    add_name(name);
    return 0;
}

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

    /* The liboqs KEM provider (testbed/oqsprov): its TLS-GROUP capability makes its groups
     * valid for --groups, part of the server's default list and of pqs-speed's. */
    return load_kem_provider(libctx);
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
