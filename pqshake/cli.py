"""The `pqshake` command. Subcommands live beside the code they drive; this file only joins
them and turns every UserError into one line on stderr (never a traceback)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from pqshake.errors import UserError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Measure post-quantum TLS 1.3 handshakes over emulated networks.",
)


def _version(value: bool) -> None:
    if value:
        from pqshake import __version__

        print(f"pqshake {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="print the version and exit")) -> None:
    """Measure post-quantum TLS 1.3 handshakes over emulated networks."""


_registered: list[bool] = []


def _register() -> None:
    # Once per process: main() may be called again in-process (tests), and typer would add every
    # command again each time.
    if _registered:
        return
    _registered.append(True)
    from pqshake.emulation import cli as emulation_cli

    emulation_cli.register(app)
    from pqshake.experiments import cli as experiments_cli; experiments_cli.register(app)
    from pqshake import doctor; doctor.register(app)
    from pqshake.analysis import cli as analysis_cli; analysis_cli.register(app)
    from pqshake.experiments import slurm; slurm.register(app)
    _register_reproduce(app)


def _register_reproduce(app: typer.Typer) -> None:
    """`pqshake reproduce`: a published result rerun (docs/reproductions.md). It joins the runner
    and the analysis, so it lives here, with the command line."""
    from pathlib import Path
    from typing import Optional

    @app.command("reproduce")
    def reproduce_cmd(
        name: Optional[str] = typer.Argument(None, help="a reproduction of experiments/reproductions/ (--list)"),
        list_: bool = typer.Option(False, "--list", help="list the reproductions and exit"),
        quick: bool = typer.Option(False, "--quick", help="the reproduction's quick set: a few cells, minutes"),
        experiment: Optional[Path] = typer.Option(None, "--experiment", help="run this experiment file instead "
                                                  "(e.g. fewer cells or samples); published cells it lacks are "
                                                  "listed as not run"),
        run_dir: Optional[Path] = typer.Option(None, "--run", help="compare this finished run; nothing is run"),
        out: Optional[Path] = typer.Option(None, "--out", help="results root (default results/ or $PQS_RESULTS)"),
        yes: bool = typer.Option(False, "--yes", "-y", help="do not ask before a very long run"),
        quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress output"),
        parallel: Optional[str] = typer.Option(None, "--parallel", metavar="auto|N",
                                               help="links side by side, as for run"),
        speed: Optional[str] = typer.Option(None, "--speed", help="as for analyze"),
    ) -> None:
        """Run a published result's experiment, analyse it, and write analysis/reproduction.md and
        figures/reproduction.pdf: per published cell theirs, ours with its CI, the difference and a verdict."""
        from pqshake import reproductions as R

        if list_:
            for n in R.names():
                r = R.load(R.ROOT / n)
                print(f"{n:<20} {r.title}" + ("  [--quick]" if r.quick else ""))
            return
        if name is None:
            raise UserError("pqshake reproduce: give a NAME (pqshake reproduce --list shows them)", exit_code=2)
        if run_dir is not None and (experiment is not None or quick):
            raise UserError("--run compares a finished run: it goes without --quick and --experiment", exit_code=2)
        spec = R.get(name)
        published = spec.read_published()  # a bad copy is refused before a long run
        if run_dir is None:
            from pqshake.experiments.runner import start_run
            from pqshake.experiments.slots import parse_parallel

            par = parse_parallel(parallel, "--parallel") if parallel is not None else None
            exp = experiment if experiment is not None else spec.experiment_file(quick)
            run_dir = start_run(exp, out=out, yes=yes, quiet=quiet, parallel=par)
        from pqshake import safe_write as sw
        from pqshake.analysis import reproduction as RP
        from pqshake.analysis.report import analyze, provenance_line

        with sw.storage_errors(Path(run_dir) / "analysis"):
            a = analyze([run_dir], speed=speed, echo=(lambda s: None) if quiet else print)
            c = RP.compare(spec, published, a.summary.table)
            md, figs = RP.write(c, a.out_dir, provenance_line(a.run, a.speed), quick=quick)
        print(f"{spec.name}: {c.top_line()}")
        for r in c.table.itertuples(index=False):
            if r.verdict != RP.REPRODUCED:
                print(f"  {r.verdict}: {r.cell}: theirs {r.theirs_ms:.2f} ms, ours {r.ours_ms:.2f} ms "
                      f"({r.diff_ms:+.2f} ms, {r.diff_pct:+.1f} %)")
        print(f"wrote {md} and {figs[0].parent}/reproduction.pdf")


def _maybe_rootless(argv: list[str]) -> None:
    """Not root: commands that build namespaces re-execute inside a user namespace of their own
    (emulation/rootless.py), or stop with the sysctl that would allow it."""
    import os

    from pqshake.emulation import rootless

    # `reproduce --list` and `reproduce --run RUN_DIR` build no network
    no_net = bool({"--help", "--list", "--run"} & {a.split("=")[0] for a in argv})
    if os.geteuid() != 0 and not rootless.inside() and rootless.wants(argv) and not no_net:
        rootless.reexec(argv)


def main(argv: list[str] | None = None) -> int:
    import signal

    # Started as a background job of a non-interactive shell (`make test &`, the container's
    # entrypoint), a process inherits SIGINT ignored, and Python then never raises
    # KeyboardInterrupt: Ctrl-C (or kill -INT) would not stop a run. Take the default back.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    _register()
    try:
        _maybe_rootless(sys.argv[1:] if argv is None else argv)
        # standalone_mode=False: typer.Exit(code) comes back as the return value.
        rc = app(args=argv, standalone_mode=False)
    except UserError as e:
        print(f"pqshake: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("pqshake: interrupted", file=sys.stderr)
        return 130
    except SystemExit as e:  # typer/click exits for --help and usage errors
        return int(e.code or 0)
    except Exception as e:  # click usage errors and the like
        import click

        if isinstance(e, click.exceptions.ClickException):
            e.show()
            return e.exit_code
        if isinstance(e, click.exceptions.Abort):
            print("pqshake: aborted", file=sys.stderr)
            return 130
        raise
    return rc if isinstance(rc, int) else 0


if __name__ == "__main__":
    sys.exit(main())
