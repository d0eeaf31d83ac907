/* test_groups.c - group list validation and rewriting, signature table, chain generation. */
#include <stdlib.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "certs.h"
#include "groups.h"
#include "provider_seam.h"
#include "unit.h"

int main(void)
{
    CHECK("providers_load", pqs_load_providers(NULL) == 0);
    SSL_CTX *ctx = SSL_CTX_new_ex(NULL, pqs_propq(), TLS_method());
    SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
    char why[4096];
    CHECK("validate_ok", pqs_groups_validate(ctx, "X25519MLKEM768:x25519:MLKEM1024", why, sizeof why));
    CHECK("validate_prefixes", pqs_groups_validate(ctx, "?*x25519/-secp256r1:MLKEM768", why, sizeof why));
    CHECK("validate_case", pqs_groups_validate(ctx, "X25519:mlkem768", why, sizeof why));
    CHECK("validate_unknown", !pqs_groups_validate(ctx, "x25519:bogus", why, sizeof why)
                                  && strstr(why, "'bogus'") && strstr(why, "X25519MLKEM768"));
    CHECK("validate_empty_item", !pqs_groups_validate(ctx, "x25519::secp256r1", why, sizeof why));
    CHECK("validate_empty", !pqs_groups_validate(ctx, "", why, sizeof why));

    char out[1024];
    pqs_groups_server_pref("a:b:c", out, sizeof out);
    CHECK_STR("server_pref_strict", out, "a/b/c");
    pqs_groups_server_pref("a:b/c", out, sizeof out);
    CHECK_STR("server_pref_passthrough", out, "a:b/c");
    pqs_groups_hrr_client("x25519", "*MLKEM768:secp256r1", out, sizeof out);
    CHECK_STR("hrr_client", out, "*x25519:MLKEM768:secp256r1");
    CHECK_STR("decoy_default", pqs_groups_pick_decoy("MLKEM768"), "x25519");
    CHECK_STR("decoy_skip", pqs_groups_pick_decoy("X25519:secp256r1"), "x448");

    pqs_groups_tls13_list(out, sizeof out);
    CHECK("tls13_list_has_hybrid", strstr(out, "X25519MLKEM768") != NULL);
    CHECK("tls13_list_no_sect", strstr(out, "sect163k1") == NULL);
    pqs_groups_server_default(out, sizeof out);
    CHECK("server_default_hybrid_first", strncmp(out, "X25519MLKEM768:", 15) == 0);
    CHECK("server_default_has_ffdhe", strstr(out, "ffdhe2048") != NULL);

    pqs_group_info gi[128];
    size_t n = pqs_groups_enumerate(NULL, gi, 128);
    bool kem = false, ec = false;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(gi[i].name, "X25519MLKEM768") == 0)
            kem = gi[i].is_kem && gi[i].id == 0x11EC;
        if (strcmp(gi[i].name, "secp256r1") == 0)
            ec = !gi[i].is_kem && gi[i].id == 23;
    }
    CHECK("enumerate_kem", kem);
    CHECK("enumerate_ec", ec);

    const char *required[] = {"ecdsa-p256", "ecdsa-p384", "ed25519", "rsa-2048", "rsa-3072",
                              "ml-dsa-44", "ml-dsa-65", "ml-dsa-87", "slh-dsa-sha2-128f",
                              "slh-dsa-sha2-128s"};
    bool all = true;
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++)
        all = all && pqs_sig_lookup(required[i]) != NULL;
    CHECK("sig_table_required", all);
    CHECK("sig_unknown", pqs_sig_lookup("dsa-1024") == NULL);

    /* Key naming round trip for the cheap algorithms. */
    const char *cheap[] = {"ecdsa-p256", "ecdsa-p384", "ed25519", "ml-dsa-44", "slh-dsa-sha2-128f"};
    bool rt = true;
    for (size_t i = 0; i < sizeof cheap / sizeof cheap[0]; i++) {
        EVP_PKEY *k = pqs_keygen(NULL, pqs_sig_lookup(cheap[i]));
        rt = rt && k && strcmp(pqs_sig_name_of_key(k), cheap[i]) == 0;
        EVP_PKEY_free(k);
    }
    CHECK("sig_name_roundtrip", rt);

    pqs_chain c;
    char err[256];
    const pqs_sig_alg *p256 = pqs_sig_lookup("ecdsa-p256");
    CHECK("chain_depth3", pqs_chain_generate(NULL, p256, p256, 3, PQS_CHAIN_SERVER, &c, err, sizeof err) == 0 && c.n_inter == 2);
    X509_STORE *st = X509_STORE_new();
    X509_STORE_add_cert(st, c.root);
    STACK_OF(X509) *untrusted = sk_X509_new_null();
    sk_X509_push(untrusted, c.inter[0]);
    sk_X509_push(untrusted, c.inter[1]);
    X509_STORE_CTX *vctx = X509_STORE_CTX_new();
    X509_STORE_CTX_init(vctx, st, c.leaf, untrusted);
    CHECK("chain_verifies", X509_verify_cert(vctx) == 1);
    X509_STORE_CTX_free(vctx);
    sk_X509_free(untrusted);
    X509_STORE_free(st);
    pqs_chain_free(&c);
    CHECK("chain_depth_bad", pqs_chain_generate(NULL, p256, p256, 5, PQS_CHAIN_SERVER, &c, err, sizeof err) != 0);

    SSL_CTX_free(ctx);
    pqs_unload_providers();
    UNIT_EXIT();
}
