"""``fltr-audit compare``: the privacy-utility table of a results store, with both verdicts."""

from __future__ import annotations

from pathlib import Path

import typer

from fltr_audit.cli.app import app
from fltr_audit.cli.common import parse_list
from fltr_audit.errors import FltrError
from fltr_audit.store import load
from reports.compare import FORMATS, check_min_effect, compare, format_table
from reports.leakage import MIN_EFFECT

MIN_EFFECT_HELP = ("Smallest leakage (AUC) worth finding: 'no measurable leakage' needs every informed "
                   "attack's upper 95 % bound below it. In (0, 1).")


def min_effect_option() -> float:
    """The ``--min-effect`` option shared by compare, report, demo and audit."""
    return typer.Option(MIN_EFFECT, "--min-effect", help=MIN_EFFECT_HELP)


def checked_min_effect(value: float) -> float:
    """``value`` if it lies in (0, 1), else a one-line error naming ``--min-effect``."""
    try:
        return check_min_effect(value)
    except ValueError as exc:
        raise FltrError(str(exc)) from None


@app.command("compare")
def compare_command(
    store: Path = typer.Option(..., "--store", help="Results store (SQLite) written by a campaign."),
    by: str = typer.Option("defense", "--by", help="Comma-separated attack-table columns to group by."),
    fmt: str = typer.Option("table", "--format", help=f"Output format: {', '.join(FORMATS)}."),
    averaging: str = typer.Option("macro", "--averaging", help="Attack scores averaged per query (macro) or pooled (micro)."),
    min_effect: float = min_effect_option(),
    json_out: bool = typer.Option(False, "--json", help="Same as --format json."),
) -> None:
    """Per defense and attack: AUC against real and counterfactual clicks, leakage with a 95 % CI
    over lists, the leakage verdict and the claim verdict (epsilon audits pooled over runs),
    precision/recall/F1, and the nDCG@10 change against no defense."""
    min_effect = checked_min_effect(min_effect)
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
    typer.echo(format_table(compare(tables, by=keys, averaging=averaging, min_effect=min_effect), fmt), nl=False)
