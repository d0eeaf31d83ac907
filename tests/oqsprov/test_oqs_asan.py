"""The pqs-oqs groups through the ASan+UBSan builds (leak checking on exit).

Default suite: 50 full handshakes per group (56 groups, ~20 s here), plus the C malformed-
input tests (test_oqsprov) built with the sanitizers. The `slow` sweep: 300 handshakes per
group, 100 each in full, resume and hrr (~2 min here; liboqs and OpenSSL themselves are not
instrumented, only pqshake's code, so HQC-256 and FrodoKEM-1344 stay affordable)."""
import os
import subprocess

import pytest

from oqs_helpers import FAMILIES, OQS_GROUPS, server_groups
from testbed_helpers import BUILD, REPO, Server, run_timer
from needs import need

SAN_ENV = {  # pqs-oqs alone: every group of ours (the default leaves 29 to oqs-provider)
    "PQS_PROVIDER": "pqs-oqs",
    "ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0:exitcode=23",
    "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1:exitcode=24",
}
BAD = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:")


@pytest.fixture(scope="module")
def asan_built():
    need((BUILD / "deps.mk").exists(), "no build/deps.mk: run make build")
    subprocess.run(["make", "-s", "-C", str(REPO / "testbed"), f"BUILD={BUILD}", "asan"], check=True)
    return True


def sweep(tmp_path, modes, samples):
    total = 0
    for family, groups in FAMILIES.items():
        total += sweep_family(tmp_path / family, groups, family, modes, samples)
    return total


def sweep_family(tmp_path, groups, family, modes, samples):
    srv = Server(tmp_path, "--groups", server_groups(family), "--threads", "4", asan=True, env=SAN_ENV)
    total = 0
    try:
        for group in groups:
            for mode in modes:
                r = run_timer("--connect", srv.addr, "--ca", srv.ca, "--groups", group, "--mode", mode,
                              "--samples", samples, "--concurrency", 2, asan=True, env=SAN_ENV)
                assert r.returncode == 0, r.stderr[-3000:]
                assert not any(b in r.stderr for b in BAD), r.stderr[-3000:]
                assert r.summary["ok"] == samples, (group, mode, r.summary, r.attempts[:1], srv.proc.poll())
                total += samples
    finally:
        srv.stop()
    err = srv.stderr()
    assert srv.returncode == 0, err[-3000:]
    assert not any(b in err for b in BAD), err[-3000:]
    return total


def test_sanitized_50_per_group(tmp_path, asan_built):
    assert sweep(tmp_path, ["full"], 50) == 50 * len(OQS_GROUPS)


@pytest.mark.slow
def test_sanitized_every_mode_per_group(tmp_path, asan_built):
    # 30 per mode and group (90 per group): resumption and HelloRetryRequest through every pqs-oqs
    # KEM under the sanitizers; the volume is test_sanitized_50_per_group's (full). 300 per group
    # took 110 s of CI for no path this does not take.
    assert sweep(tmp_path, ["full", "resume", "hrr"], 30) == 90 * len(OQS_GROUPS)


def test_sanitized_c_tests(asan_built):
    """Round trips, malformed corpus and corrupted in-memory handshakes under the sanitizers."""
    exe = BUILD / "asan" / "tests" / "test_oqsprov"
    assert exe.exists()
    p = subprocess.run([str(exe)], capture_output=True, text=True, timeout=600,
                       env={**os.environ, **SAN_ENV})
    assert p.returncode == 0, (p.stdout[-2000:], p.stderr[-3000:])
    assert "FAIL" not in p.stdout and p.stdout.count("PASS") > 200
    assert not any(b in p.stderr for b in BAD), p.stderr[-3000:]
