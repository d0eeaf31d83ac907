/* describe.c - --describe (describe.h): the programs' tables walked into one JSON document. */
#include "describe.h"

#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>

#include "groups.h"
#include "json_quote.h"
#include "transport.h"
#include "version.h"

static void sep(pqs_doc *d, const char *key)
{
    if (d->depth > 0) {
        if (!d->first[d->depth])
            fputc(',', d->f);
        d->first[d->depth] = false;
    }
    if (key != NULL) {
        pqs_json_quote(d->f, key);
        fputc(':', d->f);
    }
}

static void open_(pqs_doc *d, const char *key, char c)
{
    sep(d, key);
    fputc(c, d->f);
    if (d->depth + 1 >= PQS_DOC_DEPTH)
        abort(); /* a table nested deeper than the document is built for: a build error */
    d->first[++d->depth] = true;
}

void pqs_doc_obj(pqs_doc *d, const char *key) { open_(d, key, '{'); }
void pqs_doc_arr(pqs_doc *d, const char *key) { open_(d, key, '['); }

void pqs_doc_end(pqs_doc *d, char close)
{
    fputc(close, d->f);
    d->depth--;
}

void pqs_doc_str(pqs_doc *d, const char *key, const char *val)
{
    sep(d, key);
    if (val == NULL)
        fputs("null", d->f);
    else
        pqs_json_quote(d->f, val);
}

void pqs_doc_bool(pqs_doc *d, const char *key, bool val)
{
    sep(d, key);
    fputs(val ? "true" : "false", d->f);
}

void pqs_doc_int(pqs_doc *d, const char *key, long long val)
{
    sep(d, key);
    fprintf(d->f, "%lld", val);
}

void pqs_doc_list(pqs_doc *d, const char *key, const char *list)
{
    pqs_doc_arr(d, key);
    for (const char *p = list ? list : ""; *p;) {
        size_t n = strcspn(p, ":,");
        if (n > 0) {
            char name[256];
            snprintf(name, sizeof name, "%.*s", (int)n, p);
            pqs_doc_str(d, NULL, name);
        }
        p += n;
        if (*p)
            p++;
    }
    pqs_doc_end(d, ']');
}

static const char *openssl_version(void) { return OpenSSL_version(OPENSSL_VERSION_STRING); }

static void implementation(pqs_doc *d, const pqs_impl *im)
{
    const pqs_transport *t = im->table;
    pqs_doc_obj(d, NULL);
    pqs_doc_str(d, "name", im->name);
    pqs_doc_str(d, "version", im->version ? im->version() : NULL);
    pqs_doc_bool(d, "tls13_only", t->tls13_only);
    /* every mode: null where it runs, else why not (the usage error of pqs_cli_check_client) */
    pqs_doc_obj(d, "modes");
    for (size_t m = 0; m < pqs_mode_count; m++)
        pqs_doc_str(d, pqs_modes[m]->name, pqs_transport_refuses(t, pqs_modes[m]));
    pqs_doc_end(d, '}');
    pqs_doc_obj(d, "traits"); /* what the modes are made of: null where carried, else why not */
    for (int k = 0; k < PQS_TRAIT__COUNT; k++)
        pqs_doc_str(d, pqs_traits[k].name, pqs_transport_why_not(t, (pqs_trait)k));
    pqs_doc_end(d, '}');
    pqs_doc_str(d, "early_data", pqs_transport_why_not(t, PQS_TRAIT_EARLY_DATA));
    pqs_doc_obj(d, "tcp_fastopen");
    pqs_doc_str(d, "client", t->client_tfo_why);
    pqs_doc_str(d, "server", t->server_tfo_why);
    pqs_doc_end(d, '}');
    /* OpenSSL's own options on a stack that is not OpenSSL: refused with these words */
    pqs_doc_obj(d, "options");
    pqs_doc_str(d, "--sigalgs", t->ossl ? NULL : PQS_NOT_OPENSSL_SIGALGS);
    pqs_doc_str(d, "--ciphersuites", t->ossl ? NULL : PQS_NOT_OPENSSL_CIPHERSUITES);
    pqs_doc_str(d, "--cert-comp", t->ossl ? NULL : PQS_NOT_OPENSSL_CERT_COMP);
    pqs_doc_str(d, "--psk-ke", pqs_transport_why_not(t, PQS_TRAIT_PSK_KE)); /* resume_psk's server half */
    pqs_doc_end(d, '}');
    if (t->ossl != NULL) { /* OpenSSL's lists, as --list-groups and --list-sigs give them */
        static char names[16384];
        pqs_groups_tls13_list(names, sizeof names);
        pqs_doc_list(d, "groups", names);
        pqs_sigalgs_tls13_list(names, sizeof names);
        pqs_doc_list(d, "sigalgs", names);
    }
    if (im->describe != NULL)
        im->describe(d, im->row);
    pqs_doc_end(d, '}');
}

int pqs_describe(const char *prog)
{
    pqs_doc d = {.f = stdout};
    pqs_doc_obj(&d, NULL);
    pqs_doc_str(&d, "type", "describe");
    pqs_doc_str(&d, "program", prog);
    pqs_doc_str(&d, "version", PQS_VERSION);
    pqs_doc_str(&d, "commit", PQS_GIT_COMMIT);
    pqs_doc_arr(&d, "modes");
    for (size_t m = 0; m < pqs_mode_count; m++)
        pqs_doc_str(&d, NULL, pqs_modes[m]->name);
    pqs_doc_end(&d, ']');
    pqs_doc_arr(&d, "transports");
    for (size_t k = 0; k < pqs_transport_count; k++) {
        const pqs_transport *t = pqs_transports[k];
        pqs_doc_obj(&d, NULL);
        pqs_doc_str(&d, "name", t->name);
        pqs_doc_str(&d, "implementation_option", t->impl_option);
        pqs_doc_arr(&d, "implementations");
        if (t->impl == NULL) { /* the table runs itself: one implementation */
            pqs_impl im = {.name = t->ossl ? "openssl" : t->name, .table = t,
                           .version = t->ossl ? openssl_version : NULL};
            implementation(&d, &im);
        }
        pqs_impl im;
        for (size_t i = 0; t->impl != NULL && t->impl(i, &im); i++)
            implementation(&d, &im);
        pqs_doc_end(&d, ']');
        pqs_doc_end(&d, '}');
    }
    pqs_doc_end(&d, ']');
    pqs_doc_end(&d, '}');
    fputc('\n', stdout);
    return fflush(stdout) == 0 && !ferror(stdout) ? 0 : 1;
}
