"""``fltr-audit report``: the audit report (HTML + Markdown) of a results store."""

from __future__ import annotations

from pathlib import Path

import typer

from fltr_audit.atomic import write_files
from fltr_audit.cli.app import app
from fltr_audit.cli.common import emit_json
from fltr_audit.cli.compare import check_min_effect, min_effect_option
from fltr_audit.errors import FltrError
from fltr_audit.store.results import load
from reports.render import render_report


@app.command("report")
def report_command(
    store: Path = typer.Option(..., "--store", help="Results store (SQLite) written by a campaign."),
    out: Path = typer.Option(..., "--out", help="Directory for report.html, report.md, plots/ and the CSVs."),
    title: str = typer.Option("fltr-audit privacy audit", "--title", help="Report title."),
    min_effect: float = min_effect_option(),
    force: bool = typer.Option(False, "--force", help="Write into a non-empty --out folder (replacing the report's files)."),
    json_out: bool = typer.Option(False, "--json", help="Print the written paths as JSON."),
) -> None:
    """Write report.html (self-contained) and report.md; print the HTML report's path."""
    min_effect = check_min_effect(min_effect)
    if out.exists() and not out.is_dir():
        raise FltrError(f"--out {out}: exists and is not a directory")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise FltrError(f"--out {out}: folder is not empty (use --force to write into it)")
    tables = load(store)
    if tables["runs"].empty:
        raise FltrError(f"--store {store}: no runs recorded")
    files = render_report(tables, title=title, methods={"Store": str(store)}, min_effect=min_effect)
    try:
        write_files(out, files)
    except OSError as exc:
        raise FltrError(f"--out {out}: {exc.strerror or exc}") from None
    html = out / "report.html"
    if json_out:
        emit_json({"html": str(html), "markdown": str(out / "report.md")})
    else:
        typer.echo(str(html))
