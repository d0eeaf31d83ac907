/* provider_seam.c - provider loading for all three programs (see provider_seam.h). */
#include "provider_seam.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/core_dispatch.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/opensslv.h>
#include <openssl/params.h>
#include <openssl/provider.h>

#include <oqs/oqs.h>

#include "oqsprov/oqsprov.h"
#include "slhdsa_shim.h"

/* Open Quantum Safe's oqs-provider, linked in as liboqsprovider.a (static build). */
extern OSSL_provider_init_fn oqs_provider_init;

/* The seam's state: which providers were loaded, and the property query that prefers them. */
static struct {
    char names[PATH_MAX + 128];
    char propq[128];
    char module[PATH_MAX + 1]; /* a provider module loaded instead of ours ("" = none) */
    char module_name[128], module_version[64]; /* as the module reports them */
    OSSL_PROVIDER *loaded[5]; /* in load order; unloaded in reverse */
    int n_loaded;
    char kem_provider[PATH_MAX + 1]; /* "" = not configured: $PQS_PROVIDER, else oqsprovider */
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

/* Where OpenSSL looks for a module given by name: $OPENSSL_MODULES, else the compiled-in
 * MODULESDIR (for the pinned build a path that does not exist after installation, see
 * testbed/README.md), as provider_core.c does it. */
static const char *module_search_dir(OSSL_LIB_CTX *libctx)
{
    const char *d = OSSL_PROVIDER_get0_default_search_path(libctx);
    if (d == NULL || *d == '\0')
        d = getenv("OPENSSL_MODULES");
    if (d == NULL || *d == '\0')
        d = OPENSSL_info(OPENSSL_INFO_MODULES_DIR);
    return d != NULL ? d : "";
}

/* The OpenSSL error queue as one line ("reason: data; reason"), cleared. Repeated reasons
 * without new data and provider_core's "name=..." are left out. */
static void errors_one_line(char *buf, size_t len)
{
    const char *data = NULL;
    int flags = 0;
    unsigned long e;
    buf[0] = '\0';
    while ((e = ERR_get_error_all(NULL, NULL, NULL, &data, &flags)) != 0) {
        const char *r = ERR_reason_error_string(e);
        const char *d = (flags & ERR_TXT_STRING) && data != NULL ? data : "";
        if (strncmp(d, "name=", 5) == 0)
            continue;
        if (*d == '\0' && (r == NULL || strstr(buf, r) != NULL))
            continue;
        size_t l = strlen(buf);
        snprintf(buf + l, len - l, "%s%s%s%s", l ? "; " : "", r ? r : "error", *d ? ": " : "", d);
    }
    for (char *c = buf; *c; c++) /* one line, whatever dlerror() said */
        if (*c == '\n' || *c == '\r')
            *c = ' ';
}

/* A provider module instead of ours: NAME (OpenSSL's lookup: NAME.so in $OPENSSL_MODULES or
 * the default module directory), FILE.so (the same directory, file name given) or a path
 * (contains '/'; made absolute). The module runs with its own libcrypto if it has one (a
 * system oqs-provider linked to libcrypto.so.3, or our pqs-oqs.so with a static copy) and
 * reaches ours only through the core dispatch table and a child library context. */
static int load_module(OSSL_LIB_CTX *libctx, const char *name)
{
    char target[PATH_MAX + 1];
    const char *dir = module_search_dir(libctx);
    size_t nl = strlen(name);
    if (strchr(name, '/') != NULL) {
        if (realpath(name, target) == NULL)
            snprintf(target, sizeof target, "%s", name); /* OpenSSL reports the missing file */
    } else if (nl > 3 && strcmp(name + nl - 3, ".so") == 0) {
        snprintf(target, sizeof target, "%s/%s", dir, name);
    } else {
        snprintf(target, sizeof target, "%s", name);
    }
    ERR_clear_error();
    OSSL_PROVIDER *prov = OSSL_PROVIDER_load(libctx, target);
    if (prov == NULL) {
        char why[768];
        errors_one_line(why, sizeof why);
        if (strchr(name, '/') != NULL)
            fprintf(stderr,
                    "cannot load provider module '%s': %s; give the path of an OpenSSL 3 provider module "
                    "(exports OSSL_provider_init), or its name with OPENSSL_MODULES set to its directory "
                    "(Fedora/openSUSE oqsprovider: OPENSSL_MODULES=/usr/lib64/ossl-modules); built in: %s, %s, none\n",
                    name, why[0] ? why : "not loaded", PQS_OQS_PROVIDER_NAME, PQS_OQSPROV_NAME);
        else
            fprintf(stderr,
                    "cannot load provider module '%s': %s (searched %s); set OPENSSL_MODULES to the directory "
                    "holding %s%s (Fedora/openSUSE oqsprovider: OPENSSL_MODULES=/usr/lib64/ossl-modules; Arch: "
                    "/usr/lib/ossl-modules; Debian/Ubuntu: /usr/lib/x86_64-linux-gnu/ossl-modules) or give its "
                    "path; built in: %s, %s, none\n",
                    name, why[0] ? why : "not found", dir, name,
                    nl > 3 && strcmp(name + nl - 3, ".so") == 0 ? "" : ".so", PQS_OQS_PROVIDER_NAME,
                    PQS_OQSPROV_NAME);
        return -1;
    }
    seam_state.loaded[seam_state.n_loaded++] = prov;
    add_name(target);
    snprintf(seam_state.module, sizeof seam_state.module, "%s", target);
    const char *mname = NULL, *mversion = NULL;
    OSSL_PARAM q[] = {OSSL_PARAM_utf8_ptr(OSSL_PROV_PARAM_NAME, &mname, 0),
                      OSSL_PARAM_utf8_ptr(OSSL_PROV_PARAM_VERSION, &mversion, 0), OSSL_PARAM_END};
    if (OSSL_PROVIDER_get_params(prov, q)) {
        if (mname != NULL)
            snprintf(seam_state.module_name, sizeof seam_state.module_name, "%s", mname);
        if (mversion != NULL)
            snprintf(seam_state.module_version, sizeof seam_state.module_version, "%s", mversion);
    }
    ERR_clear_error();
    return 0;
}

/* Registers and loads a provider linked into the program; params may be NULL. */
static OSSL_PROVIDER *load_builtin(OSSL_LIB_CTX *libctx, const char *name, OSSL_provider_init_fn *init,
                                   const OSSL_PARAM *params)
{
    OSSL_PROVIDER *prov = NULL;
    if (OSSL_PROVIDER_add_builtin(libctx, name, init))
        prov = params != NULL ? OSSL_PROVIDER_load_ex(libctx, name, (OSSL_PARAM *)params)
                              : OSSL_PROVIDER_load(libctx, name);
    if (prov == NULL) {
        fprintf(stderr, "cannot load the built-in provider %s\n", name);
        ERR_print_errors_fp(stderr);
        return NULL;
    }
    seam_state.loaded[seam_state.n_loaded++] = prov;
    return prov;
}

typedef struct {
    char *buf;
    size_t len;
} name_list;

static int collect_group_name(const OSSL_PARAM params[], void *arg)
{
    name_list *nl = arg;
    const char *s = NULL;
    const OSSL_PARAM *p = OSSL_PARAM_locate_const(params, OSSL_CAPABILITY_TLS_GROUP_NAME);
    if (p == NULL || !OSSL_PARAM_get_utf8_string_ptr(p, &s) || s == NULL)
        return 1;
    size_t l = strlen(nl->buf);
    snprintf(nl->buf + l, nl->len - l, "%s%s", l ? "," : "", s);
    return 1;
}

/* pqs-oqs, built in. skip: comma-separated groups it leaves to another provider, or NULL. */
static int load_pqs_oqs(OSSL_LIB_CTX *libctx, int native, const char *skip)
{
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string(PQS_OQSPROV_PARAM_NATIVE, (char *)(native ? "yes" : "no"), 0),
        OSSL_PARAM_construct_utf8_string(PQS_OQSPROV_PARAM_SKIP, (char *)(skip ? skip : ""), 0),
        OSSL_PARAM_construct_end()};
    if (load_builtin(libctx, PQS_OQSPROV_NAME, pqs_oqsprov_init, params) == NULL)
        return -1;
    add_name(native ? PQS_OQSPROV_NAME "(native-codepoints)" : PQS_OQSPROV_NAME);
    if (native) { /* prefer ours where it implements an OpenSSL-native name */
        size_t l = strlen(seam_state.propq);
        snprintf(seam_state.propq + l, sizeof seam_state.propq - l, "%s%s", l ? "," : "",
                 PQS_OQSPROV_PREFER);
    }
    return 0;
}

/* The liboqs providers. Default (PQS_OQS_PROVIDER_NAME): oqs-provider built in, for
 * every group and signature it offers with its own code points, plus pqs-oqs for the liboqs
 * groups oqs-provider does not have (HQC, Kyber, sntrup761, liboqs's pure ML-KEM): pqs-oqs is
 * told to leave out every group oqs-provider declares, so each name has one implementation.
 * "pqs-oqs": ours alone (the cross-check). "none": OpenSSL's groups only. Anything else: a
 * provider module instead of both. */
static int load_kem_provider(OSSL_LIB_CTX *libctx)
{
    const char *name = seam_state.kem_provider[0] ? seam_state.kem_provider : getenv("PQS_PROVIDER");
    if (name == NULL || *name == '\0')
        name = PQS_OQS_PROVIDER_NAME;
    int native = seam_state.oqs_native;
    if (native < 0) {
        const char *e = getenv("PQS_OQS_NATIVE");
        native = e != NULL && (strcmp(e, "1") == 0 || strcmp(e, "yes") == 0);
    }
    if (strcmp(name, "none") == 0)
        return 0;
    if (strcmp(name, PQS_OQSPROV_NAME) == 0)
        return load_pqs_oqs(libctx, native, NULL);
    if (strcmp(name, PQS_OQS_PROVIDER_NAME) == 0) {
        OSSL_PROVIDER *oqs = load_builtin(libctx, PQS_OQS_PROVIDER_NAME, oqs_provider_init, NULL);
        if (oqs == NULL)
            return -1;
        add_name(PQS_OQS_PROVIDER_NAME);
        /* oqs-provider (0.9.0, unchanged in 0.11.0) builds each operation's algorithm table on the first query into
         * an unlocked global: two threads querying first at once (pqs-timer --concurrency,
         * pqs-server's workers) both allocate it and one table leaks (LeakSanitizer). Querying
         * every operation here, while the program is single-threaded, builds them once. */
        static const int ops[] = {OSSL_OP_SIGNATURE, OSSL_OP_KEM, OSSL_OP_KEYMGMT, OSSL_OP_ENCODER,
                                  OSSL_OP_DECODER};
        for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
            int no_cache = 0;
            const OSSL_ALGORITHM *a = OSSL_PROVIDER_query_operation(oqs, ops[i], &no_cache);
            if (a != NULL)
                OSSL_PROVIDER_unquery_operation(oqs, ops[i], a);
        }
        static char skip[8192];
        skip[0] = '\0';
        name_list nl = {skip, sizeof skip};
        OSSL_PROVIDER_get_capabilities(oqs, "TLS-GROUP", collect_group_name, &nl);
        return load_pqs_oqs(libctx, native, skip);
    }
    return load_module(libctx, name);
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

    /* The liboqs providers (oqs-provider and testbed/oqsprov): their TLS-GROUP capabilities
     * make their groups valid for --groups and part of pqs-speed's list, their TLS-SIGALG
     * capabilities (oqs-provider) their signature algorithms usable for certificates. */
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
    pqs_json_str(j, "provider_module", seam_state.module[0] ? seam_state.module : NULL);
    pqs_json_str(j, "provider_module_name", seam_state.module_name[0] ? seam_state.module_name : NULL);
    pqs_json_str(j, "provider_module_version", seam_state.module_version[0] ? seam_state.module_version : NULL);
    pqs_json_str(j, "clock", "CLOCK_MONOTONIC");
    pqs_json_int(j, "anchor_mono_ns", m0 + (m1 - m0) / 2);
    pqs_json_int(j, "anchor_realtime_ns", r);
    pqs_json_int(j, "anchor_uncertainty_ns", m1 - m0);
    /* argv[0] by its name only: the run's meta.json names each binary by its hash, and a run
     * directory must not carry the path of the machine that made it. */
    pqs_json_key(j, "argv");
    pqs_json_raw(j, "[");
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *slash = i == 0 ? strrchr(a, '/') : NULL;
        if (i)
            pqs_json_raw(j, ",");
        pqs_json_escaped(j, slash ? slash + 1 : a);
    }
    pqs_json_raw(j, "]");
}

const char *pqs_seam_provider_arg(const char *prog, const char *arg)
{
    if (arg[0] == '\0' || strlen(arg) >= PQS_PROVIDER_NAME_MAX)
        pqs_usage_error(prog, "bad --provider '%s': %s, %s, none, a provider module name or path", arg,
                        PQS_OQS_PROVIDER_NAME, PQS_OQSPROV_NAME);
    return arg;
}
