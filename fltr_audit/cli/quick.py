"""``fltr-audit --help`` and ``--version`` without importing the commands (numpy, pandas, the
engine): the top-level commands and their help are read from the command modules' source
(``ast``), in the order ``COMMAND_MODULES`` registers them, onto the real groups of
``cli.app``; click renders the help exactly as for the full application
(``tests/test_cli_quick.py`` holds the two equal)."""

from __future__ import annotations

import ast
from pathlib import Path

from fltr_audit._version import __version__

COMMAND_MODULES = ("attack", "audit", "audit_defense", "audit_run", "audit_unlearning", "bench", "bench_attacks", "bench_core",
                   "campaign", "compare",
                   "data", "defenses", "demo", "epsilon", "explain", "flower", "lists", "report", "train", "train_fedips",
                   "train_foltr_es")
"""The modules that register commands; the top-level commands are listed in this order."""


def top_level_commands() -> list[tuple[str, str]]:
    """(name, docstring) of every ``@app.command("name")`` function, in registration order."""
    folder = Path(__file__).resolve().parent
    found = []
    for module in COMMAND_MODULES:
        tree = ast.parse((folder / f"{module}.py").read_text(encoding="utf-8"))
        for node in tree.body:
            if not isinstance(node, ast.FunctionDef):
                continue
            for deco in node.decorator_list:
                if (isinstance(deco, ast.Call) and isinstance(deco.func, ast.Attribute) and deco.func.attr == "command"
                        and isinstance(deco.func.value, ast.Name) and deco.func.value.id == "app" and deco.args
                        and isinstance(deco.args[0], ast.Constant)):
                    found.append((deco.args[0].value, ast.get_docstring(node) or ""))
    return found


def quick(args: list[str], prog: str | None = None) -> int | None:
    """The exit code of ``--version`` or ``--help`` alone, answered here; None for anything else."""
    if args == ["--version"]:
        print(f"fltr-audit {__version__}")
        return 0
    if args != ["--help"]:
        return None
    # start-up: --version loads no typer
    import typer

    from fltr_audit.cli.app import Typer, app

    shown = Typer(name=app.info.name, help=app.info.help, add_completion=False)
    for group in app.registered_groups:
        shown.add_typer(group.typer_instance, name=group.name)
    for name, doc in top_level_commands():
        shown.command(name, help=doc)(lambda: None)
    shown.callback()(app.registered_callback.callback)
    command = typer.main.get_command(shown)
    try:
        command.main(args=args, prog_name=prog, standalone_mode=False)
    except SystemExit as exc:  # pragma: no cover - click exits after the help in standalone mode only
        return int(exc.code or 0)
    return 0
