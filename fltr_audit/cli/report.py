"""``fltr-audit report``: the audit report (HTML + Markdown) of a results store (``fltr_audit.api.comparison.report``)."""

from __future__ import annotations

from pathlib import Path

import typer

from fltr_audit.cli import options as o
from fltr_audit.cli.app import app
from fltr_audit.cli.common import emit_json


@app.command("report")
def report_command(
    store: Path = typer.Option(..., "--store", help="Results store (SQLite) written by a campaign."),
    out: Path = typer.Option(..., "--out", help="Folder for report.html, report.md, plots/ and the CSVs."),
    title: str = typer.Option("fltr-audit privacy audit", "--title", help="Report title."),
    min_effect: o.MinEffect = None,
    force: bool = typer.Option(False, "--force", help="Write into a non-empty --out folder (replacing the report's files)."),
    json_out: o.Json = False,
    quiet: o.Quiet = False,
) -> None:
    """Write report.html (self-contained) and report.md; print the HTML report's path."""
    from fltr_audit.api.comparison import report  # start-up: the engine loads when the command runs

    html = report(store, out, title=title, min_effect=min_effect, force=force)
    if json_out:
        emit_json({"html": str(html), "markdown": str(html.parent / "report.md")})
    else:
        typer.echo(str(html))
