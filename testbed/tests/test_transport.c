/* test_transport.c - the operations table (transport.h): the shipped rows are complete, and a
 * transport added the documented way (tests/loop: its folder, one row) runs through the same
 * steps pqs-timer and pqs-server take: options, mode checks, setup/handshake/request/close,
 * the line's members, listen/serve. Built with the loop row (Makefile: PQS_EXTRA_TRANSPORT). */
#include <arpa/inet.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "transport.h"
#include "unit.h"

static bool complete(const pqs_transport *t)
{
    return t->name && t->client_setup && t->client_handshake && t->client_request
           && t->client_close && t->close && t->server_listen && t->server_serve
           && (t->json_member == NULL) == (t->attempt_json == NULL)
           && (t->client_opts == NULL || (t->opt && t->opts_given && t->client_opts_need && t->server_opts_need))
           && pqs_transport_refuses(t, pqs_modes[0]) == NULL;
}

typedef struct {
    pqs_srv *s;
    int rc;
} serve_arg;

static void *serve_thread(void *arg)
{
    serve_arg *a = arg;
    char why[256];
    a->rc = a->s->transport->server_serve(a->s, why, sizeof why);
    return NULL;
}

static void own(pqs_json *j, const void *arg)
{
    const pqs_client *c = arg;
    pqs_transport_find("test", "loop")->attempt_json(j, c, NULL);
}

int main(void)
{
    /* the table: tcp first (the default), names unique, every row complete */
    CHECK_STR("default_is_tcp", pqs_transports[0]->name, "tcp");
    bool all = true, unique = true;
    for (size_t k = 0; k < pqs_transport_count; k++) {
        all = all && complete(pqs_transports[k]);
        for (size_t m = 0; m < k; m++)
            unique = unique && strcmp(pqs_transports[k]->name, pqs_transports[m]->name) != 0;
    }
    CHECK("rows_complete", all);
    CHECK("names_unique", unique);
    const pqs_transport *loop = pqs_transport_find("test", "loop");
    CHECK("loop_row_found", loop != NULL && pqs_transports[pqs_transport_count - 1] == loop);
    const pqs_transport *quic = pqs_transport_find("test", "quic"), *turbo = pqs_transport_find("test", "turbotls");
    CHECK_STR("quic_refuses_0rtt", pqs_transport_refuses(quic, pqs_mode_find("test", "0rtt")),
              "0-RTT is not in OpenSSL's QUIC server");
    CHECK("quic_runs_hrr", pqs_transport_refuses(quic, pqs_mode_find("test", "hrr")) == NULL);
    CHECK("turbotls_runs_resume", pqs_transport_refuses(turbo, pqs_mode_find("test", "resume")) == NULL);
    /* the first missing trait's reason: fs0rtt over turbotls lacks early data only */
    CHECK_STR("turbotls_fs0rtt_early", pqs_transport_refuses(turbo, pqs_mode_find("test", "fs0rtt")),
              "0-RTT is not part of TurboTLS here");
    CHECK_STR("loop_refuses_resume", pqs_transport_refuses(loop, pqs_mode_find("test", "resume")), "no TLS");
    /* a trait a table does not explain gets the general reason, not NULL */
    pqs_transport bare = {.name = "bare"};
    CHECK("unexplained_trait_refused", pqs_transport_why_not(&bare, PQS_TRAIT_ECH) != NULL);
    /* the modes' table: full first, names unique, every member writer with its member name */
    CHECK_STR("default_mode_is_full", pqs_modes[0]->name, "full");
    bool modes_ok = true;
    for (size_t k = 0; k < pqs_mode_count; k++) {
        const pqs_mode_ops *m = pqs_modes[k];
        modes_ok = modes_ok && m->name && m->usage && (m->header_member == NULL) == (m->header_json == NULL)
                   && (m->attempt_member == NULL) == (m->attempt_json == NULL)
                   && (m->opts == NULL || (m->opt && m->opts_given && m->opts_need))
                   && m->resumes == ((m->needs & PQS_TRAIT(TICKET)) != 0)
                   && m->early == ((m->needs & PQS_TRAIT(EARLY_DATA)) != 0);
        for (size_t n = 0; n < k; n++)
            modes_ok = modes_ok && strcmp(m->name, pqs_modes[n]->name) != 0;
    }
    CHECK("mode_rows_complete", modes_ok);

    /* options: the loop row's own option through the assembled getopt table */
    pqs_cli cli;
    pqs_cli_init(&cli, "test");
    pqs_optset os;
    memset(&os, 0, sizeof os);
    pqs_optset_add(&os, pqs_cli_rows, PQS_OWNER_COMMON);
    for (size_t k = 0; k < pqs_transport_count; k++)
        pqs_optset_add(&os, pqs_transports[k]->client_opts, (int)k);
    char *argv[] = {"test", "--transport", "loop", "--loop-chunk", "100", "--response-bytes", "5000", NULL};
    int argc = 7, c, owner, id;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "", os.rows, NULL)) != -1) {
        if (!pqs_optset_which(&os, c, &owner, &id))
            break;
        if (owner == PQS_OWNER_COMMON)
            pqs_cli_opt(&cli, "test", id, optarg);
        else if (owner >= 0)
            pqs_transports[owner]->opt(cli.opts[owner], "test", id, optarg);
    }
    CHECK("parsed_transport", cli.transport == loop);
    CHECK("parsed_response_bytes", cli.response_bytes == 5000);
    pqs_cli_check_client(&cli, "test", false); /* exits 2 on a refusal (cli.mode: full) */
    CHECK("full_mode_accepted", true);

    /* server: listen on loopback, serve in a thread until SIGUSR1 */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    char logpath[4096];
    const char *tmp = getenv("TMPDIR") != NULL ? getenv("TMPDIR") : P_tmpdir;
    snprintf(logpath, sizeof logpath, "%s/pqs-test-transport-XXXXXX", tmp);
    int lfd = mkstemp(logpath);
    close(lfd);
    pqs_sink log;
    pqs_sink_open(&log, logpath, 0);
    pqs_server_params sp = {.threads = 1, .backlog = 16};
    const char *why = NULL;
    pqs_parse_hostport("127.0.0.1:0", true, &sp.listen, &why);
    pqs_srv s = {.prog = "test", .p = &sp, .transport = loop, .opts = cli.opts[cli.transport_idx], .log = &log,
                 .sigs = &sigs};
    s.state = calloc(1, loop->server_state_size);
    char swhy[256];
    CHECK("listen", loop->server_listen(&s, swhy, sizeof swhy) == 0 && s.threads == 1);
    serve_arg sa = {.s = &s};
    pthread_t tid;
    pthread_create(&tid, NULL, serve_thread, &sa);

    /* client: one attempt, the steps pqs-timer takes */
    pqs_client_params cp = {.response_bytes = cli.response_bytes, .request = true, .timeout_ns = 1000000000LL};
    char target[80];
    snprintf(target, sizeof target, "127.0.0.1:%u", (unsigned)ntohs(((struct sockaddr_in *)&s.bound)->sin_port));
    pqs_parse_hostport(target, false, &cp.connect, &why);
    unsigned char rbuf[16384];
    const unsigned char req[] = "PQS 17 5000\npadding";
    pqs_client cl = {.p = &cp, .opts = cli.opts[cli.transport_idx], .req = req, .req_len = 17, .rbuf = rbuf,
                     .rbuf_len = sizeof rbuf};
    cl.state = calloc(1, loop->client_state_size);
    pqs_attempt a;
    memset(&a, 0, sizeof a);
    bool set_up = loop->client_setup(&cl, &a);
    a.t0 = pqs_mono_ns();
    loop->client_handshake(&cl, &a, a.t0 + cp.timeout_ns);
    if (a.hs_done)
        loop->client_request(&cl, &a, a.t0 + cp.timeout_ns);
    loop->client_close(&cl, &a);
    CHECK("attempt_ok", set_up && a.hs_done && a.err == PQS_ERR_NONE && a.t_hs >= a.t0 && a.t_end >= a.t_hs);
    CHECK("attempt_response", a.resp_bytes == 5000 && a.req_sent == 17);

    /* the line's members: its own object, null for the other transports' */
    pqs_json j;
    pqs_json_begin(&j, "attempt");
    pqs_transport_members_json(&j, loop, own, &cl);
    pqs_json_end(&j);
    j.buf[j.len] = '\0';
    CHECK("members_json", strstr(j.buf, "\"quic\":null,\"turbo\":null,\"loop\":{\"reads\":") != NULL);

    pthread_kill(tid, SIGUSR1);
    pthread_join(tid, NULL);
    pqs_sink_close(&log);
    CHECK("served", sa.rc == 0 && s.signal == SIGUSR1 && s.conns == 1 && s.ok == 1);
    FILE *f = fopen(logpath, "r");
    char line[4096] = "";
    if (f != NULL) {
        if (fgets(line, sizeof line, f) == NULL)
            line[0] = '\0';
        fclose(f);
    }
    unlink(logpath);
    /* through the one conn-line writer (core/connline.h): every server's members */
    static const char head[] = "{\"type\":\"conn\",\"conn\":0,\"worker\":0,\"peer\":\"127.0.0.1:";
    CHECK("conn_line", strncmp(line, head, sizeof head - 1) == 0
                           && strstr(line, "\"ok\":true,") != NULL
                           && strstr(line, "\"response_bytes\":5000,\"close\":null,\"transport\":\"loop\",") != NULL
                           && strstr(line, "\"fs0rtt\":null,\"quic\":null,\"turbo\":null,\"loop\":null}\n") != NULL);
    free(s.state);
    free(cl.state);
    pqs_cli_free(&cli);
    UNIT_EXIT();
}
