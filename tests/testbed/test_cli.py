"""Command lines: --help documents every option; bad usage exits 2 with one line naming the
value and listing what is available, before any connection."""
import re

import pytest

from testbed_helpers import Server, run_timer, run_tool

TIMER_OPTS = ["--connect", "--groups", "--ca", "--no-verify", "--servername", "--sigalgs",
              "--ciphersuites", "--samples", "--duration", "--warmup", "--mode", "--hrr-decoy",
              "--early-data", "--response-bytes", "--request-bytes", "--concurrency", "--timeout",
              "--ticket-wait", "--no-instrument", "--out", "--fsync", "--start-gate", "--help"]
SERVER_OPTS = ["--listen", "--groups", "--sig", "--ca-sig", "--chain-depth", "--cert-dir",
               "--response-bytes", "--max-early-data", "--tickets", "--session-cache", "--no-tls12",
               "--threads", "--backlog", "--idle-timeout", "--log", "--fsync", "--help"]
SPEED_OPTS = ["--groups", "--sigs", "--aeads", "--only", "--samples", "--min-sample", "--budget",
              "--out", "--help"]


@pytest.mark.parametrize("tool,opts", [("pqs-timer", TIMER_OPTS), ("pqs-server", SERVER_OPTS),
                                       ("pqs-speed", SPEED_OPTS)])
def test_help_lists_every_option(tool, opts):
    p = run_tool(tool, "--help")
    assert p.returncode == 0
    for o in opts:
        assert re.search(rf"(^|\s){re.escape(o)}(\s|$)", p.stdout, re.M), f"{tool} --help lacks {o}"


def one_line_usage_error(p, *needles):
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert p.stdout == ""
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def ca(tmp_path_factory):
    with Server(tmp_path_factory.mktemp("ca"), "--groups", "x25519") as srv:
        return srv.ca


def test_timer_unknown_group(ca):
    one_line_usage_error(run_tool("pqs-timer", "--connect", "127.0.0.1:1", "--ca", ca, "--groups",
                                  "x25519:kyber9000"), "kyber9000", "X25519MLKEM768", "ffdhe2048")


def test_timer_bad_port(ca):
    one_line_usage_error(run_tool("pqs-timer", "--connect", "127.0.0.1:99999", "--ca", ca),
                         "127.0.0.1:99999", "1..65535")


def test_timer_missing_ca():
    one_line_usage_error(run_tool("pqs-timer", "--connect", "127.0.0.1:443", "--ca", "/nonexistent/ca.pem"),
                         "/nonexistent/ca.pem")


def test_timer_ca_not_pem(tmp_path):
    bad = tmp_path / "bad.pem"
    bad.write_text("not a certificate\n")
    one_line_usage_error(run_tool("pqs-timer", "--connect", "127.0.0.1:443", "--ca", bad), str(bad))


def test_timer_unknown_mode(ca):
    one_line_usage_error(run_tool("pqs-timer", "--connect", "127.0.0.1:1", "--ca", ca, "--mode", "2rtt"),
                         "2rtt", "full, resume, 0rtt, hrr, tls12")


def test_timer_requires_connect():
    one_line_usage_error(run_tool("pqs-timer"), "--connect")


def test_timer_unknown_option():
    one_line_usage_error(run_tool("pqs-timer", "--bogus"), "--bogus")


def test_timer_tls12_rejects_pq_group(ca):
    one_line_usage_error(run_tool("pqs-timer", "--connect", "127.0.0.1:1", "--ca", ca, "--mode", "tls12",
                                  "--groups", "MLKEM768"), "MLKEM768", "TLS 1.2")


def test_server_unknown_sig(tmp_path):
    one_line_usage_error(run_tool("pqs-server", "--sig", "dsa-1024", "--cert-dir", tmp_path),
                         "dsa-1024", "ml-dsa-44", "slh-dsa-sha2-128s")
    assert not (tmp_path / "ca.pem").exists()


def test_server_unknown_group(tmp_path):
    one_line_usage_error(run_tool("pqs-server", "--groups", "x25519:nope", "--cert-dir", tmp_path),
                         "nope", "X25519MLKEM768")
    assert not (tmp_path / "ca.pem").exists()


def test_server_bad_port(tmp_path):
    one_line_usage_error(run_tool("pqs-server", "--listen", "127.0.0.1:70000", "--cert-dir", tmp_path),
                         "70000")


def test_server_bad_chain_depth(tmp_path):
    one_line_usage_error(run_tool("pqs-server", "--chain-depth", "5", "--cert-dir", tmp_path), "1..4")


def test_server_missing_cert_dir(tmp_path):
    one_line_usage_error(run_tool("pqs-server", "--cert-dir", tmp_path / "nope"), "nope")


def test_speed_unknown_group():
    one_line_usage_error(run_tool("pqs-speed", "--groups", "x25519:bogus"), "bogus", "MLKEM768")


def test_speed_unknown_sig():
    one_line_usage_error(run_tool("pqs-speed", "--sigs", "rsa-1024"), "rsa-1024", "ml-dsa-65")


def test_server_listen_busy_is_environment_error(tmp_path):
    with Server(tmp_path / "a", "--groups", "x25519") as srv:
        p = run_tool("pqs-server", "--listen", srv.addr, "--cert-dir", tmp_path)
        assert p.returncode == 1 and "cannot listen" in p.stderr
