"""The `pqshake` command. Subcommands live beside the code they drive; this file only joins
them and turns every UserError into one line on stderr (never a traceback)."""

from __future__ import annotations

import sys

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


def _maybe_rootless(argv: list[str]) -> None:
    """Not root: commands that build namespaces re-execute inside a user namespace of their own
    (emulation/rootless.py), or stop with the sysctl that would allow it."""
    import os

    from pqshake.emulation import rootless

    if os.geteuid() != 0 and not rootless.inside() and rootless.wants(argv) and "--help" not in argv:
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
