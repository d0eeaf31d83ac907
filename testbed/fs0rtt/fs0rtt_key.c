/* fs0rtt_key.c - a BFE key folder read back (fs0rtt_key.h), verified before use. The folder is
 * pqs-bfe-keygen's: public.bin and secret.bin (bfe-bf's serializations) and key.json (one JSON
 * line: parameters, sizes, SHA-256 of both files, key generation cost). bfe-bf's deserializers
 * take no length, so a file is only handed to them once its size and hash match key.json. */
#include "fs0rtt_key.h"

#include <errno.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

/* The process's one relic context (fs0rtt_key.h). */
static pthread_mutex_t relic_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t relic_threads_once = PTHREAD_ONCE_INIT;

static void one_openmp_thread(void) { omp_set_num_threads(1); }

void pqs_fs0rtt_lock(void)
{
    pthread_once(&relic_threads_once, one_openmp_thread);
    pthread_mutex_lock(&relic_lock);
}

void pqs_fs0rtt_unlock(void) { pthread_mutex_unlock(&relic_lock); }

void pqs_fs0rtt_sha256_hex(const uint8_t *buf, size_t len, char out[65])
{
    unsigned char md[32];
    unsigned int mdlen = 0;
    memset(md, 0, sizeof md);
    EVP_Digest(buf, len, md, &mdlen, EVP_sha256(), NULL);
    for (int i = 0; i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
}

uint64_t pqs_fs0rtt_secret_bytes(const bfe_bf_secret_key_t *sk, unsigned *punctured_slots)
{
    unsigned m = sk->filter.bitset.size, words = (m + 63) / 64, set = 0;
    for (unsigned i = 0; i < words; i++)
        set += (unsigned)__builtin_popcountll(sk->filter.bitset.bits[i]);
    if (punctured_slots != NULL)
        *punctured_slots = set;
    /* bloom.h's bf_write: hash count and size (2 x uint32), then the bitset's 64-bit words */
    return 8u + (uint64_t)words * 8u + (uint64_t)(m - set) * PQS_FS0RTT_SLOT_BYTES;
}

/* The whole file, NUL-terminated (key.json is read as text). NULL with why filled. */
static uint8_t *slurp(const char *path, size_t *len, char *why, size_t whylen)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        snprintf(why, whylen, "cannot read %s: %s", path, strerror(errno));
        return NULL;
    }
    uint8_t *buf = NULL;
    size_t cap = 0, n = 0;
    for (;;) {
        if (n + 65536 + 1 > cap) {
            size_t nc = cap ? cap * 2 : 131072;
            uint8_t *nb = realloc(buf, nc);
            if (nb == NULL) {
                free(buf);
                fclose(f);
                snprintf(why, whylen, "%s: out of memory", path);
                return NULL;
            }
            buf = nb;
            cap = nc;
        }
        size_t r = fread(buf + n, 1, 65536, f);
        n += r;
        if (r < 65536)
            break;
    }
    bool err = ferror(f);
    fclose(f);
    if (err) {
        free(buf);
        snprintf(why, whylen, "cannot read %s", path);
        return NULL;
    }
    buf[n] = 0;
    *len = n;
    return buf;
}

/* key.json members, read from our own one-line file: "name":value. */
static const char *member(const char *json, const char *name)
{
    char needle[64];
    snprintf(needle, sizeof needle, "\"%s\":", name);
    const char *p = strstr(json, needle);
    return p ? p + strlen(needle) : NULL;
}

static bool member_u64(const char *json, const char *name, uint64_t *out)
{
    const char *p = member(json, name);
    char *end = NULL;
    if (p == NULL)
        return false;
    errno = 0;
    unsigned long long v = strtoull(p, &end, 10);
    if (errno || end == p)
        return false;
    *out = v;
    return true;
}

static bool member_hex(const char *json, const char *name, char out[65])
{
    const char *p = member(json, name);
    if (p == NULL || *p != '"' || strlen(p) < 66 || p[65] != '"')
        return false;
    memcpy(out, p + 1, 64);
    out[64] = 0;
    return true;
}

static pqs_fs0rtt_key *load(const char *dir, const char *public_path, bool secret, char *why, size_t whylen)
{
    char path[4200];
    size_t jlen = 0, plen = 0;
    uint8_t *json = NULL, *pub = NULL, *sec = NULL;
    pqs_fs0rtt_key *k = calloc(1, sizeof *k);
    if (k == NULL) {
        snprintf(why, whylen, "out of memory");
        return NULL;
    }
    char folder[4096];
    if (dir != NULL) {
        snprintf(folder, sizeof folder, "%s", dir);
    } else { /* the public key's folder holds its key.json */
        snprintf(folder, sizeof folder, "%s", public_path);
        char *slash = strrchr(folder, '/');
        if (slash != NULL)
            *slash = 0;
        else
            snprintf(folder, sizeof folder, ".");
    }
    snprintf(path, sizeof path, "%s/key.json", folder);
    if ((json = slurp(path, &jlen, why, whylen)) == NULL)
        goto fail;
    uint64_t format = 0, n = 0, slots = 0, hashes = 0, pub_bytes = 0, sec_bytes = 0, u = 0;
    char want_pub[65], want_sec[65];
    const char *pstr = member((char *)json, "p");
    if (!member_u64((char *)json, "format", &format) || !member_u64((char *)json, "n", &n)
        || !member_u64((char *)json, "slots", &slots) || !member_u64((char *)json, "k", &hashes)
        || !member_u64((char *)json, "public_bytes", &pub_bytes) || !member_u64((char *)json, "secret_bytes", &sec_bytes)
        || !member_hex((char *)json, "public_sha256", want_pub) || !member_hex((char *)json, "secret_sha256", want_sec)
        || pstr == NULL) {
        snprintf(why, whylen, "%s is not a key.json of pqs-bfe-keygen (regenerate the key)", path);
        goto fail;
    }
    if (format > PQS_FS0RTT_KEY_FORMAT) {
        snprintf(why, whylen, "%s has key format %llu, this pqshake reads %d: use the pqshake that wrote it",
                 path, (unsigned long long)format, PQS_FS0RTT_KEY_FORMAT);
        goto fail;
    }
    k->n = n;
    k->p = strtod(pstr, NULL);
    k->slots = (unsigned)slots;
    k->k = (unsigned)hashes;
    if (member_u64((char *)json, "keygen_ns", &u))
        k->keygen_ns = (int64_t)u;
    if (member_u64((char *)json, "keygen_cpu_ns", &u))
        k->keygen_cpu_ns = (int64_t)u;
    if (member_u64((char *)json, "threads", &u))
        k->keygen_threads = (int)u;
    memcpy(k->public_sha256, want_pub, sizeof want_pub);

    if (public_path == NULL)
        snprintf(path, sizeof path, "%s/public.bin", folder);
    else
        snprintf(path, sizeof path, "%s", public_path);
    char got[65];
    if ((pub = slurp(path, &plen, why, whylen)) == NULL)
        goto fail;
    pqs_fs0rtt_sha256_hex(pub, plen, got);
    if (plen != pub_bytes || plen != bfe_bf_public_key_size() || strcmp(got, want_pub) != 0) {
        snprintf(why, whylen, "%s does not match its key.json (size or sha256): regenerate the key", path);
        goto fail;
    }
    pqs_fs0rtt_lock();
    bfe_bf_init_public_key(&k->pk);
    int rc = bfe_bf_public_key_deserialize(&k->pk, pub);
    pqs_fs0rtt_unlock();
    if (rc != BFE_SUCCESS || k->pk.filter_hash_count != hashes || k->pk.filter_size != slots
        || k->pk.key_size != PQS_FS0RTT_KEY_BYTES || pqs_bfe_ct_v_len(k->k, k->pk.key_size) == 0) {
        snprintf(why, whylen, "%s: not a usable BFE public key (k %u, slots %u, key size %u)", path,
                 k->pk.filter_hash_count, k->pk.filter_size, k->pk.key_size);
        goto fail;
    }
    k->public_bytes = plen;
    if (secret) {
        size_t slen = 0;
        snprintf(path, sizeof path, "%s/secret.bin", folder);
        if ((sec = slurp(path, &slen, why, whylen)) == NULL)
            goto fail;
        pqs_fs0rtt_sha256_hex(sec, slen, got);
        if (slen != sec_bytes || strcmp(got, want_sec) != 0) {
            snprintf(why, whylen, "%s does not match its key.json (size or sha256): regenerate the key", path);
            goto fail;
        }
        pqs_fs0rtt_lock();
        bfe_bf_init_secret_key(&k->sk);
        rc = bfe_bf_secret_key_deserialize(&k->sk, sec);
        pqs_fs0rtt_unlock();
        k->has_sk = true;
        if (rc != BFE_SUCCESS || k->sk.filter.bitset.size != slots || k->sk.filter.hash_count != hashes
            || pqs_fs0rtt_secret_bytes(&k->sk, NULL) != slen) {
            snprintf(why, whylen, "%s: not the secret key of %s/public.bin", path, folder);
            goto fail;
        }
        k->secret_bytes = slen;
    }
    free(json);
    free(pub);
    free(sec);
    return k;
fail:
    free(json);
    free(pub);
    free(sec);
    pqs_fs0rtt_key_free(k);
    return NULL;
}

pqs_fs0rtt_key *pqs_fs0rtt_public_load(const char *path, char *why, size_t whylen)
{
    return load(NULL, path, false, why, whylen);
}

pqs_fs0rtt_key *pqs_fs0rtt_key_load(const char *dir, char *why, size_t whylen)
{
    return load(dir, NULL, true, why, whylen);
}

void pqs_fs0rtt_key_free(pqs_fs0rtt_key *k)
{
    if (k == NULL)
        return;
    pqs_fs0rtt_lock();
    if (k->has_sk)
        bfe_bf_clear_secret_key(&k->sk);
    bfe_bf_clear_public_key(&k->pk);
    pqs_fs0rtt_unlock();
    free(k);
}

void pqs_fs0rtt_key_members(pqs_json *j, const pqs_fs0rtt_key *k)
{
    pqs_json_uint(j, "n", k->n);
    pqs_json_double_exact(j, "p", k->p);
    pqs_json_uint(j, "k", k->k);
    pqs_json_uint(j, "slots", k->slots);
    pqs_json_uint(j, "public_bytes", k->public_bytes);
    pqs_json_str(j, "public_sha256", k->public_sha256);
}

void pqs_fs0rtt_key_json(pqs_json *j, const char *name, const pqs_fs0rtt_key *k)
{
    if (k == NULL) {
        pqs_json_null(j, name);
        return;
    }
    pqs_json_obj_begin(j, name);
    pqs_fs0rtt_key_members(j, k);
    pqs_json_obj_end(j);
}
