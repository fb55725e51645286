"""``fltr-audit compare``: the privacy-utility table of a results store."""

from __future__ import annotations

from pathlib import Path

import typer

from fltr_audit.cli.app import app
from fltr_audit.cli.common import parse_list
from fltr_audit.errors import FltrError
from fltr_audit.store import load
from reports.compare import FORMATS, compare, format_table


@app.command("compare")
def compare_command(
    store: Path = typer.Option(..., "--store", help="Results store (SQLite) written by a campaign."),
    by: str = typer.Option("defense", "--by", help="Comma-separated attack-table columns to group by."),
    fmt: str = typer.Option("table", "--format", help=f"Output format: {', '.join(FORMATS)}."),
    averaging: str = typer.Option("macro", "--averaging", help="Attack scores averaged per query (macro) or pooled (micro)."),
    json_out: bool = typer.Option(False, "--json", help="Same as --format json."),
) -> None:
    """Attack precision/recall/F1 per defense with 95% CIs over seeds and folds, the audited
    epsilon lower bound next to the claimed one, nDCG@10 change against no defense, and
    Welch t-tests against the undefended baseline (Bonferroni-corrected)."""
    fmt = "json" if json_out else parse_list(fmt, "--format", FORMATS)[0]
    averaging = parse_list(averaging, "--averaging", ("macro", "micro"))[0]
    tables = load(store)
    attacks = tables["attacks"]
    if attacks.empty:
        raise FltrError(f"--store {store}: no attack results ({int((tables['runs']['status'] == 'done').sum())} done runs)")
    keys = parse_list(by, "--by")
    for key in keys:
        if key not in attacks.columns or key in ("attack", "f1", "precision", "recall"):
            raise FltrError(f"--by: unknown column {key!r} (choose from defense, click_model, algo, "
                            "data, threat_model, probe_cohort, fold, seed)")
    typer.echo(format_table(compare(tables, by=keys, averaging=averaging), fmt), nl=False)
