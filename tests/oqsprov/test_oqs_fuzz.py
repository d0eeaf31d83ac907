"""The libFuzzer target for the provider's decoding and decapsulation entry points builds
(clang -fsanitize=fuzzer,address,undefined) and survives a short deterministic run."""
import shutil
import subprocess

import pytest

from testbed_helpers import BUILD, REPO
from needs import need


def test_fuzz_smoke(tmp_path):
    need(shutil.which("clang") is not None, "no clang: make deps installs it")
    subprocess.run(["make", "-s", "-C", str(REPO / "testbed"), f"BUILD={BUILD}", "fuzz"], check=True)
    exe = BUILD / "fuzz" / "fuzz_oqsprov"
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    p = subprocess.run([str(exe), "-runs=2000", "-seed=1", str(corpus)], capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "Done 2000 runs" in p.stderr
