"""``fltr-audit explain [TERM]``: what a word of the output means (``fltr_audit.api.glossary``)."""

from __future__ import annotations

import textwrap
from typing import Optional

import typer

from fltr_audit.cli import options as o
from fltr_audit.cli.app import app
from fltr_audit.cli.common import emit_json


@app.command("explain")
def explain(
    term: Optional[str] = typer.Argument(None, help="A word of the output, e.g. '±detect', 'lb/claim', "
                                                    "'limit of 10,000 trials' (none: every term)."),
    json_out: o.Json = False,
) -> None:
    """What a word of fltr-audit's output means (the glossary: docs/concepts/glossary.md)."""
    # start-up: loaded when the command runs, not for --help
    from fltr_audit.api.glossary import explain as entries

    found = entries(term)
    if json_out:
        emit_json(found)
        return
    for entry in found:
        typer.echo(f"{entry['term']}:")
        typer.echo(textwrap.fill(entry["definition"], 100, initial_indent="  ", subsequent_indent="  "))
        typer.echo(f"  more: {entry['see']}")
