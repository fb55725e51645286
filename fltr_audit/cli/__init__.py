"""The ``fltr-audit`` command line: the composition root that wires engine, defenses,
attacks and reports together. ``main`` turns bad input into one line and exit code 2."""

from __future__ import annotations

import sys

import typer

try:  # newer typer raises the exceptions of its own vendored copy of click
    from typer._click.exceptions import ClickException, UsageError
except ImportError:  # pragma: no cover - typer releases built on the click package
    from click.exceptions import ClickException, UsageError

from fltr_audit.cli.app import app
from fltr_audit.cli import (  # noqa: F401  (each module registers its commands)
    attack,
    audit,
    bench_attacks,
    bench_core,
    campaign,
    compare,
    data,
    defenses,
    demo,
    epsilon,
    lists,
    report,
    train,
    train_fedips,
    train_foltr_es,
)
from fltr_audit.errors import FltrError


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; return the exit code (0 ok, 1 failure, 2 bad input)."""
    try:
        app(args=argv, standalone_mode=False)
    except FltrError as exc:
        print(f"fltr-audit: error: {exc}", file=sys.stderr)
        return _exit(2, argv)
    except typer.Exit as exc:
        return _exit(exc.exit_code, argv)
    except typer.Abort:
        print("fltr-audit: aborted", file=sys.stderr)
        return _exit(130, argv)
    except ClickException as exc:
        # one line naming the command and the option, not click's usage block
        command = getattr(getattr(exc, "ctx", None), "command_path", "fltr-audit")
        if exc.format_message():  # empty after the help a command without arguments prints
            print(f"{command}: error: {exc.format_message()}", file=sys.stderr)
        return _exit(2 if isinstance(exc, UsageError) else exc.exit_code, argv)
    return _exit(0, argv)


def _exit(code: int, argv: list[str] | None) -> int:
    if argv is None:
        sys.exit(code)
    return code
