/* oqs_groups.c - the provider's group table (see oqsprov.h and oqsprov/README.md).
 *
 * Code points follow the Open Quantum Safe conventions where they exist:
 *   OQS      = oqs-provider's current ALGORITHMS.md (0.9/0.10 series)
 *   OQS-0.8  = oqs-provider's earlier table (HQC, Kyber and the first ML-KEM hybrids were
 *              dropped from the current one; their last published values are kept)
 *   private  = pqshake's choice in the TLS private-use range 0xFE00-0xFEFF (no OQS value)
 *   IANA     = the registered code point OpenSSL 3.5 implements natively (native rows)
 * OQS's own mlkem512/768/1024 use the IANA points 0x0200-0x0202, which OpenSSL 3.5 already
 * serves natively; libssl looks groups up by code point and takes the first provider's, so
 * liboqs's ML-KEM gets OQS's earlier distinct points (oqs_mlkem*, 0x0247-0x0249) and can be
 * measured side by side with OpenSSL's; the native points are served by liboqs only in the
 * native-codepoints mode (the native rows at the end). */
#include <string.h>
#include <strings.h>
#include <stdio.h>

#include <oqs/oqs.h>

#include "oqsprov.h"

#define HYB(n, alg, cl, cp, lvl, fam, src) {n, alg, cl, cp, lvl, 0, 0, fam, src}

static const pqs_oqs_group table[] = {
    /* FrodoKEM */
    {"frodo640aes", OQS_KEM_alg_frodokem_640_aes, PQS_CL_NONE, 0xFE00, 1, 0, 0, "frodo", "OQS"},
    HYB("p256_frodo640aes", OQS_KEM_alg_frodokem_640_aes, PQS_CL_P256, 0xFE01, 1, "frodo", "OQS"),
    HYB("x25519_frodo640aes", OQS_KEM_alg_frodokem_640_aes, PQS_CL_X25519, 0xFE02, 1, "frodo", "OQS"),
    {"frodo640shake", OQS_KEM_alg_frodokem_640_shake, PQS_CL_NONE, 0xFE03, 1, 0, 0, "frodo", "OQS"},
    HYB("p256_frodo640shake", OQS_KEM_alg_frodokem_640_shake, PQS_CL_P256, 0xFE04, 1, "frodo", "OQS"),
    HYB("x25519_frodo640shake", OQS_KEM_alg_frodokem_640_shake, PQS_CL_X25519, 0xFE05, 1, "frodo", "OQS"),
    {"frodo976aes", OQS_KEM_alg_frodokem_976_aes, PQS_CL_NONE, 0xFE06, 3, 0, 0, "frodo", "OQS"},
    HYB("p384_frodo976aes", OQS_KEM_alg_frodokem_976_aes, PQS_CL_P384, 0xFE07, 3, "frodo", "OQS"),
    HYB("x448_frodo976aes", OQS_KEM_alg_frodokem_976_aes, PQS_CL_X448, 0xFE08, 3, "frodo", "OQS"),
    {"frodo976shake", OQS_KEM_alg_frodokem_976_shake, PQS_CL_NONE, 0xFE09, 3, 0, 0, "frodo", "OQS"},
    HYB("p384_frodo976shake", OQS_KEM_alg_frodokem_976_shake, PQS_CL_P384, 0xFE0A, 3, "frodo", "OQS"),
    HYB("x448_frodo976shake", OQS_KEM_alg_frodokem_976_shake, PQS_CL_X448, 0xFE0B, 3, "frodo", "OQS"),
    {"frodo1344aes", OQS_KEM_alg_frodokem_1344_aes, PQS_CL_NONE, 0xFE0C, 5, 0, 0, "frodo", "OQS"},
    HYB("p521_frodo1344aes", OQS_KEM_alg_frodokem_1344_aes, PQS_CL_P521, 0xFE0D, 5, "frodo", "OQS"),
    {"frodo1344shake", OQS_KEM_alg_frodokem_1344_shake, PQS_CL_NONE, 0xFE0E, 5, 0, 0, "frodo", "OQS"},
    HYB("p521_frodo1344shake", OQS_KEM_alg_frodokem_1344_shake, PQS_CL_P521, 0xFE0F, 5, "frodo", "OQS"),
    /* BIKE */
    {"bikel1", OQS_KEM_alg_bike_l1, PQS_CL_NONE, 0xFE10, 1, 0, 0, "bike", "OQS"},
    HYB("p256_bikel1", OQS_KEM_alg_bike_l1, PQS_CL_P256, 0xFE11, 1, "bike", "OQS"),
    HYB("x25519_bikel1", OQS_KEM_alg_bike_l1, PQS_CL_X25519, 0xFE12, 1, "bike", "OQS"),
    {"bikel3", OQS_KEM_alg_bike_l3, PQS_CL_NONE, 0xFE13, 3, 0, 0, "bike", "OQS"},
    HYB("p384_bikel3", OQS_KEM_alg_bike_l3, PQS_CL_P384, 0xFE14, 3, "bike", "OQS"),
    HYB("x448_bikel3", OQS_KEM_alg_bike_l3, PQS_CL_X448, 0xFE15, 3, "bike", "OQS"),
    {"bikel5", OQS_KEM_alg_bike_l5, PQS_CL_NONE, 0xFE16, 5, 0, 0, "bike", "OQS"},
    HYB("p521_bikel5", OQS_KEM_alg_bike_l5, PQS_CL_P521, 0xFE17, 5, "bike", "OQS"),
    /* HQC */
    {"hqc128", OQS_KEM_alg_hqc_128, PQS_CL_NONE, 0x0244, 1, 0, 0, "hqc", "OQS-0.8"},
    HYB("p256_hqc128", OQS_KEM_alg_hqc_128, PQS_CL_P256, 0x2F44, 1, "hqc", "OQS-0.8"),
    HYB("x25519_hqc128", OQS_KEM_alg_hqc_128, PQS_CL_X25519, 0x2FB0, 1, "hqc", "OQS-0.8"),
    {"hqc192", OQS_KEM_alg_hqc_192, PQS_CL_NONE, 0x0245, 3, 0, 0, "hqc", "OQS-0.8"},
    HYB("p384_hqc192", OQS_KEM_alg_hqc_192, PQS_CL_P384, 0x2F45, 3, "hqc", "OQS-0.8"),
    HYB("x448_hqc192", OQS_KEM_alg_hqc_192, PQS_CL_X448, 0x2FB1, 3, "hqc", "OQS-0.8"),
    {"hqc256", OQS_KEM_alg_hqc_256, PQS_CL_NONE, 0x0246, 5, 0, 0, "hqc", "OQS-0.8"},
    HYB("p521_hqc256", OQS_KEM_alg_hqc_256, PQS_CL_P521, 0x2F46, 5, "hqc", "OQS-0.8"),
    /* Kyber (round-3, pre-standard) */
    {"kyber512", OQS_KEM_alg_kyber_512, PQS_CL_NONE, 0x023A, 1, 0, 0, "kyber", "OQS-0.8"},
    HYB("p256_kyber512", OQS_KEM_alg_kyber_512, PQS_CL_P256, 0x2F3A, 1, "kyber", "OQS-0.8"),
    HYB("x25519_kyber512", OQS_KEM_alg_kyber_512, PQS_CL_X25519, 0x2F39, 1, "kyber", "OQS-0.8"),
    {"kyber768", OQS_KEM_alg_kyber_768, PQS_CL_NONE, 0x023C, 3, 0, 0, "kyber", "OQS-0.8"},
    HYB("p384_kyber768", OQS_KEM_alg_kyber_768, PQS_CL_P384, 0x2F3C, 3, "kyber", "OQS-0.8"),
    HYB("x448_kyber768", OQS_KEM_alg_kyber_768, PQS_CL_X448, 0x2F90, 3, "kyber", "OQS-0.8"),
    HYB("x25519_kyber768", OQS_KEM_alg_kyber_768, PQS_CL_X25519, 0x6399, 3, "kyber", "OQS-0.8"),
    HYB("p256_kyber768", OQS_KEM_alg_kyber_768, PQS_CL_P256, 0x639A, 3, "kyber", "OQS-0.8"),
    {"kyber1024", OQS_KEM_alg_kyber_1024, PQS_CL_NONE, 0x023D, 5, 0, 0, "kyber", "OQS-0.8"},
    HYB("p521_kyber1024", OQS_KEM_alg_kyber_1024, PQS_CL_P521, 0x2F3D, 5, "kyber", "OQS-0.8"),
    /* ML-KEM, liboqs's implementation (OpenSSL's own is MLKEM512/768/1024, X25519MLKEM768...) */
    {"oqs_mlkem512", OQS_KEM_alg_ml_kem_512, PQS_CL_NONE, 0x0247, 1, 0, 0, "mlkem", "OQS-0.8"},
    HYB("p256_mlkem512", OQS_KEM_alg_ml_kem_512, PQS_CL_P256, 0x2F4B, 1, "mlkem", "OQS"),
    /* oqs-provider (0.9.0 and 0.11.0) puts ML-KEM first in its X25519/X448 ML-KEM hybrids (share and
     * secret, as X25519MLKEM768 does): pq_first, so the two providers interoperate. */
    {"x25519_mlkem512", OQS_KEM_alg_ml_kem_512, PQS_CL_X25519, 0x2FB6, 1, 1, 0, "mlkem", "OQS"},
    {"oqs_mlkem768", OQS_KEM_alg_ml_kem_768, PQS_CL_NONE, 0x0248, 3, 0, 0, "mlkem", "OQS-0.8"},
    HYB("p384_mlkem768", OQS_KEM_alg_ml_kem_768, PQS_CL_P384, 0x2F4C, 3, "mlkem", "OQS"),
    {"x448_mlkem768", OQS_KEM_alg_ml_kem_768, PQS_CL_X448, 0x2FB7, 3, 1, 0, "mlkem", "OQS"},
    HYB("x25519_mlkem768", OQS_KEM_alg_ml_kem_768, PQS_CL_X25519, 0x2FB4, 3, "mlkem", "OQS-0.8"),
    HYB("p256_mlkem768", OQS_KEM_alg_ml_kem_768, PQS_CL_P256, 0x2FB5, 3, "mlkem", "OQS-0.8"),
    {"oqs_mlkem1024", OQS_KEM_alg_ml_kem_1024, PQS_CL_NONE, 0x0249, 5, 0, 0, "mlkem", "OQS-0.8"},
    HYB("p521_mlkem1024", OQS_KEM_alg_ml_kem_1024, PQS_CL_P521, 0x2F4D, 5, "mlkem", "OQS"),
    HYB("p384_mlkem1024", OQS_KEM_alg_ml_kem_1024, PQS_CL_P384, 0x2F4A, 5, "mlkem", "OQS-0.8"),
    /* sntrup761 (Streamlined NTRU Prime; no OQS TLS code point; claimed NIST level 2) */
    {"sntrup761", OQS_KEM_alg_ntruprime_sntrup761, PQS_CL_NONE, 0xFE60, 2, 0, 0, "ntru", "private"},
    HYB("p256_sntrup761", OQS_KEM_alg_ntruprime_sntrup761, PQS_CL_P256, 0xFE61, 2, "ntru", "private"),
    HYB("x25519_sntrup761", OQS_KEM_alg_ntruprime_sntrup761, PQS_CL_X25519, 0xFE62, 2, "ntru", "private"),
    /* Classic McEliece: listed so that it is refused with its reason (public key > share). */
    {"mceliece348864", OQS_KEM_alg_classic_mceliece_348864, PQS_CL_NONE, 0, 1, 0, 0, "mceliece", "-"},
    {"mceliece348864f", OQS_KEM_alg_classic_mceliece_348864f, PQS_CL_NONE, 0, 1, 0, 0, "mceliece", "-"},
    {"mceliece460896", OQS_KEM_alg_classic_mceliece_460896, PQS_CL_NONE, 0, 3, 0, 0, "mceliece", "-"},
    {"mceliece460896f", OQS_KEM_alg_classic_mceliece_460896f, PQS_CL_NONE, 0, 3, 0, 0, "mceliece", "-"},
    {"mceliece6688128", OQS_KEM_alg_classic_mceliece_6688128, PQS_CL_NONE, 0, 5, 0, 0, "mceliece", "-"},
    {"mceliece6688128f", OQS_KEM_alg_classic_mceliece_6688128f, PQS_CL_NONE, 0, 5, 0, 0, "mceliece", "-"},
    {"mceliece6960119", OQS_KEM_alg_classic_mceliece_6960119, PQS_CL_NONE, 0, 5, 0, 0, "mceliece", "-"},
    {"mceliece6960119f", OQS_KEM_alg_classic_mceliece_6960119f, PQS_CL_NONE, 0, 5, 0, 0, "mceliece", "-"},
    {"mceliece8192128", OQS_KEM_alg_classic_mceliece_8192128, PQS_CL_NONE, 0, 5, 0, 0, "mceliece", "-"},
    {"mceliece8192128f", OQS_KEM_alg_classic_mceliece_8192128f, PQS_CL_NONE, 0, 5, 0, 0, "mceliece", "-"},
    /* Native rows (native-codepoints mode only): OpenSSL's algorithm names, OpenSSL's TLS
     * groups (the default provider declares them), liboqs underneath, native share layout. */
    {"X25519MLKEM768", OQS_KEM_alg_ml_kem_768, PQS_CL_X25519, 0, 3, 1, 1, "mlkem", "IANA 0x11EC"},
    {"SecP256r1MLKEM768", OQS_KEM_alg_ml_kem_768, PQS_CL_P256, 0, 3, 0, 1, "mlkem", "IANA 0x11EB"},
    {"SecP384r1MLKEM1024", OQS_KEM_alg_ml_kem_1024, PQS_CL_P384, 0, 5, 0, 1, "mlkem", "IANA 0x11ED"},
    {"ML-KEM-512", OQS_KEM_alg_ml_kem_512, PQS_CL_NONE, 0, 1, 0, 1, "mlkem", "IANA 0x0200"},
    {"ML-KEM-768", OQS_KEM_alg_ml_kem_768, PQS_CL_NONE, 0, 3, 0, 1, "mlkem", "IANA 0x0201"},
    {"ML-KEM-1024", OQS_KEM_alg_ml_kem_1024, PQS_CL_NONE, 0, 5, 0, 1, "mlkem", "IANA 0x0202"},
};

_Static_assert(sizeof table / sizeof table[0] <= PQS_OQS_MAX_ROWS, "raise PQS_OQS_MAX_ROWS");

size_t pqs_oqs_group_count(void) { return sizeof table / sizeof table[0]; }

const pqs_oqs_group *pqs_oqs_group_at(size_t i) { return i < pqs_oqs_group_count() ? &table[i] : NULL; }

const pqs_oqs_group *pqs_oqs_group_by_name(const char *name)
{
    for (size_t i = 0; i < pqs_oqs_group_count(); i++)
        if (strcasecmp(name, table[i].name) == 0)
            return &table[i];
    return NULL;
}

int pqs_oqs_group_sizes(const pqs_oqs_group *g, pqs_oqs_sizes *out)
{
    memset(out, 0, sizeof *out);
    if (!OQS_KEM_alg_is_enabled(g->oqs_alg))
        return 0;
    OQS_KEM *k = OQS_KEM_new(g->oqs_alg);
    if (k == NULL)
        return 0;
    out->pq_pub = k->length_public_key;
    out->pq_ct = k->length_ciphertext;
    out->pq_ss = k->length_shared_secret;
    OQS_KEM_free(k);
    out->cl_pub = pqs_cl_pub_len(g->cl);
    out->cl_ss = pqs_cl_ss_len(g->cl);
    out->pub = out->pq_pub + out->cl_pub;
    out->ct = out->pq_ct + out->cl_pub; /* the classical "ciphertext" is an ephemeral public */
    out->ss = out->pq_ss + out->cl_ss;
    return 1;
}

const char *pqs_oqs_refusal(const char *name, char *buf, size_t len)
{
    const pqs_oqs_group *g = pqs_oqs_group_by_name(name);
    if (g == NULL || len == 0)
        return NULL;
    pqs_oqs_sizes s;
    if (!pqs_oqs_group_sizes(g, &s)) {
        snprintf(buf, len, "%s refused: liboqs %s was built without %s", g->name, OQS_version(),
                 g->oqs_alg);
        return buf;
    }
    if (s.pub > PQS_OQS_MAX_SHARE || s.ct > PQS_OQS_MAX_SHARE) {
        snprintf(buf, len,
                 "%s refused: its %s (%zu bytes) is larger than a TLS 1.3 key share can carry (%u bytes)",
                 g->name, s.pub > PQS_OQS_MAX_SHARE ? "public key" : "ciphertext",
                 s.pub > PQS_OQS_MAX_SHARE ? s.pub : s.ct, PQS_OQS_MAX_SHARE);
        return buf;
    }
    return NULL;
}
