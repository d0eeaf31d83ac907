"""The libFuzzer target for the provider's decoding and decapsulation entry points builds
(clang -fsanitize=fuzzer,address,undefined) and survives a short deterministic run."""
from testbed_helpers import run_fuzz


def test_fuzz_smoke(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    p = run_fuzz("fuzz_oqsprov", "-runs=2000", "-seed=1", corpus)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "Done 2000 runs" in p.stderr
