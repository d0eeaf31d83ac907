"""`pqshake analyze` and `pqshake figures`."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from pqshake import safe_write as sw

from . import stats as S


def _out(run_dirs: List[Path], out: Optional[Path]) -> Path:
    """Where the analysis writes (for the one-line full-disk message)."""
    return out if out is not None else Path(run_dirs[0]) / "analysis"


def register(app: typer.Typer) -> None:
    @app.command("analyze")
    def analyze_cmd(
        run_dirs: List[Path] = typer.Argument(..., help="run directories results/<name>/<id> (several merge "
                                              "when their metadata agree)"),
        out: Optional[Path] = typer.Option(None, "--out", help="output folder (default: FIRST_RUN_DIR/analysis)"),
        speed: Optional[str] = typer.Option(None, "--speed", help="pqs-speed JSON lines for the CPU term of the "
                                            "bound: FILE, 'none', or 'auto' (default: RUN_DIR/speed.jsonl, else "
                                            "run build/bin/pqs-speed now)"),
        baseline: Optional[str] = typer.Option(None, "--baseline", help="GROUP:SIG of the slowdown baseline "
                                               "(default: x25519:ecdsa-p256, else a classical pair)"),
        allow_differ: List[str] = typer.Option([], "--allow-differ", help="merge even though this meta.json "
                                               "field differs (e.g. git.commit, or cpu_wakeup: the sessions' "
                                               "wake-up setting); repeatable"),
        bootstrap: int = typer.Option(S.BOOTSTRAP_N, "--bootstrap", min=100, max=1_000_000,
                                      help="bootstrap resamples per CI"),
        seed: int = typer.Option(S.BOOTSTRAP_SEED, "--seed", help="bootstrap seed"),
        exclude_suspect: bool = typer.Option(False, "--exclude-suspect", help="leave out the cells whose "
                                             "validity verdict is suspect (named in the output)"),
    ) -> None:
        """Summary per cell (counts, percentiles, bootstrap CIs, slowdown, TCP figures, model bound) as
        parquet, CSV, LaTeX and Markdown under RUN_DIR/analysis/."""
        from .report import analyze

        with sw.storage_errors(_out(run_dirs, out)):
            analyze(run_dirs, out=out, speed=speed, baseline=baseline, allow_differ=allow_differ, n_boot=bootstrap,
                    seed=seed, exclude_suspect=exclude_suspect)

    @app.command("merge")
    def merge_cmd(
        run_dirs: List[Path] = typer.Argument(..., help="the shards' run directories (run --shard I/N), or folders "
                                              "holding them (a Slurm batch folder)"),
        out: Optional[Path] = typer.Option(None, "--out", help="output folder (default: the folder the runs share, "
                                           "/merged)"),
        allow_differ: List[str] = typer.Option([], "--allow-differ", help="merge even though this meta.json field "
                                               "differs (experiment.sha256, git.commit, backend, one stack.* "
                                               "field, cpu_wakeup: the sessions' wake-up setting); repeatable"),
        allow_mixed_stacks: bool = typer.Option(False, "--allow-mixed-stacks", help="merge shards measured on "
                                                "different crypto stacks (OpenSSL, liboqs, oqs-provider: every "
                                                "stack.*version* field); stacks.csv and report.md say which cell "
                                                "ran on which, notes name the profiles and modes that compare "
                                                "algorithms across stacks"),
        figures: bool = typer.Option(True, "--figures/--no-figures", help="also draw the figures and report.md"),
        style: str = typer.Option("thesis", "--style", help="thesis | paper | slides"),
        speed: Optional[str] = typer.Option(None, "--speed", help="as for analyze"),
        baseline: Optional[str] = typer.Option(None, "--baseline", help="as for analyze"),
    ) -> None:
        """One analysis of an experiment's shards: refuses different experiment files, commits, stack versions
        (unless --allow-mixed-stacks) or backends; lists which cells ran on which machine (machines.csv) and
        crypto stack (stacks.csv), both in report.md, and notes algorithms compared across CPU models or stacks."""
        from .merge import default_out, expand, merge

        with sw.storage_errors(out if out is not None else default_out(expand(run_dirs))):
            merge(run_dirs, out=out, allow_differ=allow_differ, allow_mixed_stacks=allow_mixed_stacks,
                  figures=figures, style=style, speed=speed, baseline=baseline)

    @app.command("figures")
    def figures_cmd(
        run_dirs: List[Path] = typer.Argument(..., help="run directories (several merge as in analyze)"),
        style: str = typer.Option("thesis", "--style", help="thesis | paper | slides"),
        only: List[str] = typer.Option([], "--only", help="figure kind(s) by name or number, repeatable or "
                                       "comma-separated: the table in analysis/README.md (an unknown one is "
                                       "refused with the list)"),
        profile: List[str] = typer.Option([], "--profile", help="restrict the per-profile figures (ecdf, box, modes) to these profiles; repeatable"),
        out: Optional[Path] = typer.Option(None, "--out", help="output folder (default: FIRST_RUN_DIR/analysis)"),
        speed: Optional[str] = typer.Option(None, "--speed", help="as for analyze"),
        baseline: Optional[str] = typer.Option(None, "--baseline", help="as for analyze"),
        allow_differ: List[str] = typer.Option([], "--allow-differ", help="as for analyze"),
        png: bool = typer.Option(True, "--png/--no-png", help="also write PNG next to each PDF"),
        exclude_suspect: bool = typer.Option(False, "--exclude-suspect", help="as for analyze"),
    ) -> None:
        """Figures (PDF and PNG) and report.md with a caption per figure, under RUN_DIR/analysis/."""
        from .figures import parse_only, render
        from .report import analyze, write_report

        parse_only(only)  # refuse a bad --only before any work
        with sw.storage_errors(_out(run_dirs, out)):
            a = analyze(run_dirs, out=out, speed=speed, baseline=baseline, allow_differ=allow_differ,
                        echo=lambda s: None, exclude_suspect=exclude_suspect)
            done, skipped = render(a, style=style, only=only, profiles=profile or None,
                                   formats=("pdf", "png") if png else ("pdf",))
            rep = write_report(a, done, skipped, style)
        for n in a.summary.notes:
            print(f"note: {n}")
        print(f"wrote {rep}")
