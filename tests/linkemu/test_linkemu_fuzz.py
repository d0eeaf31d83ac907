"""The libFuzzer target of pqs-linkemu's file parsers (traces, delay series) and of its frame
parser, flow table and episodes (emulation/linkemu/fuzz/fuzz_trace.c), run briefly: a crash, a
sanitizer report or a broken invariant fails. No root needed."""

import shutil
import subprocess
from pathlib import Path

from needs import need

REPO = Path(__file__).resolve().parents[2]


def test_trace_parser_fuzz_smoke(tmp_path):
    need(shutil.which("clang") is not None, "clang missing (the fuzz targets need libFuzzer): make deps installs it")
    subprocess.run(["make", "-s", "-C", str(REPO / "emulation" / "linkemu"), f"BUILD={tmp_path}", "fuzz"], check=True)
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "trace").write_text("0\n5\n5\n10\n")
    (corpus / "series").write_text("0 10\n100 20.5\n100 50\n200 10\n")
    p = subprocess.run([str(tmp_path / "fuzz" / "fuzz_linkemu_trace"), "-runs=200000", "-seed=1", "-max_len=512",
                        str(corpus)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "Done 200000 runs" in p.stderr
