"""Bloom Filter Encryption's peer input (issue 22, first slice): the ciphertext parser that
guards bfe-bf's length-less deserializer, fuzzed under ASan+UBSan. The library itself is tested
by build/tests/test_bfe in make test-c (key generation, encapsulation, puncture, replay)."""

from testbed_helpers import run_fuzz


def test_bfe_ciphertext_parser_fuzz_smoke():
    p = run_fuzz("fuzz_bfe_ct", "-runs=200000", "-seed=1")
    assert p.returncode == 0, p.stderr[-3000:]
    assert "Done 200000 runs" in p.stderr
