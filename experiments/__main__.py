"""`python -m pqshake.experiments plan|run|resume|ls|load ...`: the experiment commands alone
(the same as under `pqshake`), with the same one-line error handling."""

from __future__ import annotations

import sys

import typer

from pqshake.errors import UserError

from .cli import register


def main(argv: list[str] | None = None) -> int:
    app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False)
    register(app)
    try:
        app(args=argv, standalone_mode=False)
    except UserError as e:
        print(f"pqshake: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("pqshake: interrupted", file=sys.stderr)
        return 130
    except SystemExit as e:
        return int(e.code or 0)
    except Exception as e:  # click usage errors
        import click

        if isinstance(e, click.exceptions.ClickException):
            e.show()
            return e.exit_code
        if isinstance(e, click.exceptions.Abort):
            print("pqshake: aborted", file=sys.stderr)
            return 130
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
