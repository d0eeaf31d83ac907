/* test_common.c - JSON writer, argument parsing, error names. */
#include <arpa/inet.h>
#include <stdint.h>
#include <stdlib.h>

#include "common.h"
#include "unit.h"

static const char *line(pqs_json *j)
{
    j->buf[j->len] = '\0';
    return j->buf;
}

int main(void)
{
    pqs_json j;
    pqs_json_begin(&j, "attempt");
    pqs_json_int(&j, "i", 3);
    pqs_json_bool(&j, "ok", true);
    pqs_json_str(&j, "error", NULL);
    pqs_json_int(&j, "neg_ns", -5);
    pqs_json_end(&j);
    CHECK_STR("json_basic", line(&j),
              "{\"type\":\"attempt\",\"i\":3,\"ok\":true,\"error\":null,\"neg_ns\":-5}\n");

    pqs_json_begin(&j, NULL);
    pqs_json_str(&j, "m", "a\"b\\c\nd\te\x01");
    pqs_json_end(&j);
    CHECK_STR("json_escape", line(&j), "{\"m\":\"a\\\"b\\\\c\\nd\\te\\u0001\"}\n");

    char *argv[] = {"x", "--a b"};
    pqs_json_begin(&j, NULL);
    pqs_json_str_array(&j, "argv", 2, argv);
    pqs_json_uint(&j, "u", UINT64_MAX);
    pqs_json_end(&j);
    CHECK_STR("json_array_uint", line(&j), "{\"argv\":[\"x\",\"--a b\"],\"u\":18446744073709551615}\n");

    /* a nested object and relative times (null when the moment never came) */
    pqs_json_begin(&j, NULL);
    pqs_json_int(&j, "a", 1);
    pqs_json_obj_begin(&j, "o");
    pqs_json_rel(&j, "t", 150, 100);
    pqs_json_rel(&j, "never", 0, 100);
    pqs_json_obj_end(&j);
    pqs_json_obj_begin(&j, "empty");
    pqs_json_obj_end(&j);
    pqs_json_int(&j, "z", 2);
    pqs_json_end(&j);
    CHECK_STR("json_obj_rel", line(&j), "{\"a\":1,\"o\":{\"t\":50,\"never\":null},\"empty\":{},\"z\":2}\n");

    pqs_json_begin(&j, NULL);
    pqs_json_int(&j, "a", 0);
    pqs_json_int(&j, "b", INT64_MIN);
    pqs_json_int(&j, "c", INT64_MAX);
    pqs_json_uint(&j, "d", 0);
    pqs_json_int(&j, "e", 1000000007);
    pqs_json_end(&j);
    CHECK_STR("json_int_limits", line(&j),
              "{\"a\":0,\"b\":-9223372036854775808,\"c\":9223372036854775807,\"d\":0,\"e\":1000000007}\n");

    pqs_json_begin(&j, "big");
    char big[PQS_JSON_MAX];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    pqs_json_str(&j, "s", big);
    pqs_json_end(&j);
    CHECK("json_overflow_marker", strstr(line(&j), "json line too long") != NULL && j.buf[j.len - 1] == '\n');

    uint64_t v = 0;
    CHECK("u64_ok", pqs_parse_u64("42", 0, 100, &v) && v == 42);
    CHECK("u64_range", !pqs_parse_u64("101", 0, 100, &v));
    CHECK("u64_junk", !pqs_parse_u64("4x", 0, 100, &v));
    CHECK("u64_neg", !pqs_parse_u64("-1", 0, 100, &v));
    CHECK("u64_empty", !pqs_parse_u64("", 0, 100, &v));

    int64_t ns = 0;
    CHECK("dur_ms", pqs_parse_duration_ns("500ms", &ns) && ns == 500000000LL);
    CHECK("dur_s", pqs_parse_duration_ns("1.5s", &ns) && ns == 1500000000LL);
    CHECK("dur_bare_ms", pqs_parse_duration_ns("20", &ns) && ns == 20000000LL);
    CHECK("dur_us", pqs_parse_duration_ns("250us", &ns) && ns == 250000LL);
    CHECK("dur_bad", !pqs_parse_duration_ns("5 hours", &ns));

    pqs_addr a;
    const char *why = NULL;
    CHECK("hp_v4", pqs_parse_hostport("127.0.0.1:4433", false, &a, &why) && a.port == 4433
                       && a.ss.ss_family == AF_INET);
    CHECK("hp_v6", pqs_parse_hostport("[::1]:443", false, &a, &why) && a.port == 443
                       && a.ss.ss_family == AF_INET6);
    CHECK("hp_localhost", pqs_parse_hostport("localhost:1", false, &a, &why) && a.ss.ss_family == AF_INET);
    CHECK("hp_zero_listen", pqs_parse_hostport("127.0.0.1:0", true, &a, &why) && a.port == 0);
    CHECK("hp_zero_connect", !pqs_parse_hostport("127.0.0.1:0", false, &a, &why));
    CHECK("hp_big_port", !pqs_parse_hostport("127.0.0.1:65536", true, &a, &why));
    CHECK("hp_no_port", !pqs_parse_hostport("127.0.0.1", true, &a, &why));
    CHECK("hp_name", !pqs_parse_hostport("example.com:80", true, &a, &why));
    CHECK("hp_v6_nobrackets", !pqs_parse_hostport("::1:80", true, &a, &why));

    char buf[80];
    pqs_parse_hostport("[::1]:8443", false, &a, &why);
    pqs_format_sockaddr((struct sockaddr *)&a.ss, buf, sizeof buf);
    CHECK_STR("format_v6", buf, "[::1]:8443");

    CHECK_STR("err_refused", pqs_err_str(PQS_ERR_CONNECT_REFUSED), "connect_refused");
    CHECK_STR("err_timeout", pqs_err_str(PQS_ERR_TIMEOUT), "timeout");
    CHECK_STR("err_verify", pqs_err_str(PQS_ERR_VERIFY_FAILED), "verify_failed");
    bool all_named = true;
    for (int e = 0; e < PQS_ERR__COUNT; e++) {
        const char *s = pqs_err_str((pqs_err)e);
        if (strcmp(s, "unknown") == 0)
            all_named = false;
        for (const char *p = s; *p; p++)
            if (!((*p >= 'a' && *p <= 'z') || *p == '_' || (*p >= '0' && *p <= '9')))
                all_named = false;
    }
    CHECK("err_all_snake_case", all_named);
    CHECK_STR("err_out_of_range", pqs_err_str((pqs_err)999), "unknown");
    UNIT_EXIT();
}
