"""``fltr-audit report``: the audit report (HTML + Markdown) of a results store."""

from __future__ import annotations

from pathlib import Path

import typer

from fltr_audit.cli.app import app
from fltr_audit.cli.common import emit_json
from fltr_audit.errors import FltrError
from fltr_audit.store import load
from reports.render import write_report


@app.command("report")
def report_command(
    store: Path = typer.Option(..., "--store", help="Results store (SQLite) written by a campaign."),
    out: Path = typer.Option(..., "--out", help="Directory for report.html, report.md and plots/."),
    title: str = typer.Option("fltr-audit privacy audit", "--title", help="Report title."),
    json_out: bool = typer.Option(False, "--json", help="Print the written paths as JSON."),
) -> None:
    """Write report.html (self-contained) and report.md; print the HTML report's path."""
    tables = load(store)
    if tables["runs"].empty:
        raise FltrError(f"--store {store}: no runs recorded")
    if out.exists() and not out.is_dir():
        raise FltrError(f"--out {out}: exists and is not a directory")
    try:
        html = write_report(tables, out, title=title, methods={"Store": str(store)})
    except OSError as exc:
        raise FltrError(f"--out {out}: {exc.strerror or exc}") from None
    if json_out:
        emit_json({"html": str(html), "markdown": str(html.with_name("report.md"))})
    else:
        typer.echo(str(html))
