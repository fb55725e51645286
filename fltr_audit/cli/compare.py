"""``fltr-audit compare``: the privacy-utility table of a results store, with both verdicts
(``fltr_audit.api.comparison``)."""

from __future__ import annotations

from pathlib import Path
from typing import List

import typer

from fltr_audit.cli import options as o
from fltr_audit.cli.app import app
from fltr_audit.cli.common import emit_json, print_glossary_pointer
from fltr_audit.constraints import Options, check

SHOWN = ("attack", "auc", "leakage", "leakage_verdict", "claim_verdict", "epsilon_lb", "ndcg10_delta")


@app.command("compare")
def compare_command(
    store: Path = typer.Option(..., "--store", help="Results store (SQLite) written by a campaign."),
    by: List[str] = typer.Option(["defense"], "--by", help="Attack-table column(s) to group by: repeat or "
                                                          "comma-separate."),
    fmt: str = typer.Option("table", "--format", help="Output format: table (the main columns), markdown, csv or "
                                                      "json (every column)."),
    averaging: str = typer.Option("macro", "--averaging", help="Attack scores averaged per query (macro) or pooled (micro)."),
    pool: List[str] = typer.Option([], "--pool", help="Swept setting(s) to pool over (default: none; every "
                                                      "setting the campaign sweeps is kept apart): repeat or "
                                                      "comma-separate."),
    min_effect: o.MinEffect = None,
    json_out: o.Json = False,
    quiet: o.Quiet = False,
) -> None:
    """Per defense and attack: AUC against real and counterfactual clicks, leakage with a 95 % CI
    over lists, the leakage verdict and the claim verdict (epsilon audits pooled over runs),
    precision/recall/F1, and the nDCG@10 change against no defense."""
    from fltr_audit.api.comparison import compare  # start-up: the engine loads when the command runs
    # start-up: loaded when the command runs, not for --help
    from reports.compare import FORMATS, format_table

    check("--format", fmt, (Options(FORMATS),))
    table = compare(store, by=by, averaging=averaging, min_effect=min_effect, pool=pool)
    if json_out or fmt == "json":  # the encoding every command's --json uses (infinite epsilon as "inf")
        emit_json(table.to_dict(orient="records"))
    elif fmt == "table":
        # start-up: loaded when the command runs, not for --help
        from reports.sweeps import swept_in

        print_compare(table, [*by, *(a for a in swept_in(table) if a not in by)])
        print_glossary_pointer()
    else:
        typer.echo(format_table(table, fmt), nl=False)


def print_compare(table, keys: list[str]) -> None:
    """The comparison as a rich table of at most 100 columns: the keys, the attack, AUC, leakage
    with its 95 % CI, both verdicts, the audited epsilon bound and the nDCG@10 change (every
    column: ``--format csv`` or ``json``)."""
    # start-up: loaded when the command runs, not for --help
    from fltr_audit.api.verdict_tables import print_rows, wrap_name
    from reports.compare import with_ci
    from reports.sweeps import axis_name

    columns = [c for c in table.columns if c in keys or c in SHOWN or c.rsplit("_ci_", 1)[0] in ("leakage",)]
    text = with_ci(table[columns])
    rows = []
    for _, r in text.iterrows():
        row = {axis_name(k): (wrap_name(r[k]) if k == "defense" else str(r[k])) for k in keys if k in r}
        row["attack"] = str(r["attack"])
        for column, label in (("auc", "AUC"), ("leakage", "leakage\n[95 % CI]"), ("leakage_verdict", "leakage verdict"),
                              ("claim_verdict", "claim\nverdict"), ("epsilon_lb", "ε audited"),
                              ("ndcg10_delta", "ΔnDCG@10")):
            if column in r:
                row[label] = str(r[column]).replace(" [", "\n[")
        rows.append(row)
    if rows:
        print_rows("Compare: per group and attack (reference rows are baselines, not tests; every column: "
                   "--format csv|json)", rows, right=("AUC", "ε audited", "ΔnDCG@10"),
                   whole=("defense", "attack", "leakage\n[95 % CI]", "leakage verdict", "AUC", "ΔnDCG@10"))
