/* stacks.c - the one list of TLS stacks of the tcp transport (stacks.h). The first row is the
 * default --tls-stack, so runs that name none are OpenSSL's, as before the list existed. */
#include "stacks.h"

#include <openssl/crypto.h>

#include "cli.h"

extern const pqs_transport pqs_transport_tcp, pqs_tcp_stack_s2n;
const char *pqs_s2n_stack_version(void); /* s2n/stack.c */
void pqs_s2n_describe(pqs_doc *d, const void *row); /* s2n/s2n_common.c: its security policies */

static const char *openssl_version(void) { return OpenSSL_version(OPENSSL_VERSION_STRING); }

const pqs_tls_stack pqs_tls_stacks[] = {
    {.name = "openssl", .table = &pqs_transport_tcp, .client = &pqs_tls_openssl_client,
     .server = &pqs_tls_openssl_server, .version = openssl_version},
    {.name = "s2n", .table = &pqs_tcp_stack_s2n, .client = &pqs_tls_s2n_client, .server = &pqs_tls_s2n_server,
     .version = pqs_s2n_stack_version, .describe = pqs_s2n_describe},
};
const size_t pqs_tls_stack_count = sizeof pqs_tls_stacks / sizeof pqs_tls_stacks[0];

const pqs_tls_stack *pqs_tls_stack_find(const char *prog, const char *name)
{
    return pqs_cli_row_find(prog, "--tls-stack", name, pqs_tls_stacks, pqs_tls_stack_count, sizeof pqs_tls_stacks[0]);
}

bool pqs_tls_stack_impl(size_t k, pqs_impl *out)
{
    if (k >= pqs_tls_stack_count)
        return false;
    const pqs_tls_stack *st = &pqs_tls_stacks[k];
    *out = (pqs_impl){.name = st->name, .table = st->table, .version = st->version, .describe = st->describe,
                      .row = st};
    return true;
}

void pqs_tls_stack_json(pqs_json *j, const void *opts)
{
    const tcp_opts *o = opts;
    pqs_json_str(j, "tls_stack", o->stack->name);
    pqs_json_str(j, "tls_stack_version", o->stack->version());
}

void pqs_tls_stack_ready_json(pqs_json *j, const pqs_srv *s) { pqs_tls_stack_json(j, s->opts); }
