"""``fltr-audit compare``: the privacy-utility table of a results store, with both verdicts."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import typer

from fltr_audit.cli.app import app
from fltr_audit.cli.common import emit_json, parse_list
from fltr_audit.constraints import OPEN_UNIT, check
from fltr_audit.errors import FltrError
from fltr_audit.store.results import load
from reports.compare import FORMATS, as_references, compare, format_table
from reports.leakage import MIN_EFFECT

MIN_EFFECT_HELP = ("Smallest leakage (AUC) worth finding: 'no measurable leakage' needs every informed "
                   "attack's upper 95 % bound below it. In (0, 1).")


def check_min_effect(value: float) -> float:
    """``value`` when it lies in (0, 1); else ParameterError naming ``min_effect`` (``main``
    says ``--min-effect``)."""
    check("min_effect", value, OPEN_UNIT, "an AUC difference")
    return float(value)


def min_effect_option() -> float:
    """The ``--min-effect`` option shared by compare, report, demo and audit."""
    return typer.Option(MIN_EFFECT, "--min-effect", help=MIN_EFFECT_HELP)


@app.command("compare")
def compare_command(
    store: Path = typer.Option(..., "--store", help="Results store (SQLite) written by a campaign."),
    by: str = typer.Option("defense", "--by", help="Comma-separated attack-table columns to group by."),
    fmt: str = typer.Option("table", "--format", help=f"Output format: {', '.join(FORMATS)} (table: a rich "
                                                     "table of the main columns; csv and json: every column)."),
    averaging: str = typer.Option("macro", "--averaging", help="Attack scores averaged per query (macro) or pooled (micro)."),
    min_effect: float = min_effect_option(),
    json_out: bool = typer.Option(False, "--json", help="Same as --format json."),
) -> None:
    """Per defense and attack: AUC against real and counterfactual clicks, leakage with a 95 % CI
    over lists, the leakage verdict and the claim verdict (epsilon audits pooled over runs),
    precision/recall/F1, and the nDCG@10 change against no defense."""
    min_effect = check_min_effect(min_effect)
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
    table = as_references(compare(tables, by=keys, averaging=averaging, min_effect=min_effect))
    if fmt == "table":
        print_compare(table, keys)
        return
    if fmt == "json":  # the encoding every command's --json uses (infinite epsilon as "inf")
        emit_json(table.to_dict(orient="records"))
        return
    typer.echo(format_table(table, fmt), nl=False)


SHOWN = ("attack", "auc", "leakage", "leakage_verdict", "claim_verdict", "epsilon_lb", "ndcg10_delta")


def print_compare(table: pd.DataFrame, keys: list[str]) -> None:
    """The comparison as a rich table of at most 100 columns: the keys, the attack, AUC, leakage
    with its 95 % CI, both verdicts, the audited epsilon bound and the nDCG@10 change (every
    column: ``--format csv`` or ``json``)."""
    from fltr_audit.cli.verdict_tables import print_rows, wrap_name
    from reports.compare import with_ci

    columns = [c for c in table.columns if c in keys or c in SHOWN or c.rsplit("_ci_", 1)[0] in ("leakage",)]
    text = with_ci(table[columns])
    rows = []
    for _, r in text.iterrows():
        row = {k: (wrap_name(r[k], 18) if k == "defense" else str(r[k])) for k in keys if k in r}
        row["attack"] = str(r["attack"])
        for column, label in (("auc", "AUC"), ("leakage", "leakage [95 % CI]"), ("leakage_verdict", "leakage verdict"),
                              ("claim_verdict", "claim verdict"), ("epsilon_lb", "ε audited"),
                              ("ndcg10_delta", "ΔnDCG@10")):
            if column in r:
                row[label] = str(r[column]).replace(" [", "\n[")
        rows.append(row)
    if rows:
        print_rows("Compare: per group and attack (reference rows are baselines, not tests; every column: "
                   "--format csv|json)", rows, right=("AUC", "ε audited", "ΔnDCG@10"))
