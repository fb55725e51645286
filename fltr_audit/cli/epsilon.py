"""``fltr-audit epsilon``: worst-case epsilon of FOLtR-ES's privatized MaxRR (Table 2 method)."""

from __future__ import annotations

import typer

from attacks.epsilon import maxrr_epsilon
from fltr_audit.cli.app import app
from fltr_audit.cli.common import emit_json, parse_list, print_table
from fltr_audit.errors import FltrError


def _floats(value: str, option: str) -> list[float]:
    out = []
    for item in parse_list(value, option):
        try:
            out.append(float(item))
        except ValueError:
            raise FltrError(f"{option}: not a number: {item!r}") from None
    return out


@app.command("epsilon")
def epsilon(
    click_model: str = typer.Option(
        "perfect,navigational,informational", "--click-model", help="CCM name(s), comma-separated."
    ),
    p: str = typer.Option("0.25,0.5,0.75,0.9,0.95,0.99", "--p", help="Randomized-response p, comma-separated."),
    length: int = typer.Option(10, "--length", help="List length L (MaxRR takes L + 1 values)."),
    levels: int = typer.Option(3, "--levels", help="Relevance levels of the click model (3 or 5)."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON to stdout."),
) -> None:
    """Exact worst-case epsilon of privatized MaxRR over all pairs of relevance placements and
    all transmitted values (FOLtR-ES Eq. 9), next to the bound log(p (n-1)/(1-p)) (Eq. 10)."""
    from fltr_audit.engine.clicks import CCM_TABLES

    known_levels = sorted({lv for _, lv in CCM_TABLES})
    if levels not in known_levels:
        raise FltrError(f"--levels: must be one of {', '.join(map(str, known_levels))} (the click model tables), got {levels}")
    models = parse_list(click_model, "--click-model", tuple(sorted({m for m, _ in CCM_TABLES})))
    ps = _floats(p, "--p")
    results = [maxrr_epsilon(m, q, length, levels).as_dict() for m in models for q in ps]
    if json_out:
        emit_json(results)  # always a list of records, whatever its length
        return
    print_table(f"epsilon of privatized MaxRR, L = {length}, {levels} levels (n = {length + 1} values)", [
        {"click model": r["click_model"], "p": f"{r['p']:g}", "epsilon": f"{r['epsilon']:.2f}",
         "Eq. 10 bound": f"{r['theoretical']:.2f}",
         "worst MaxRR": "no click" if r["value"] == 0 else f"1/{r['value_index'] + 1}",
         "labels q1": "".join(map(str, r["placement_high"])), "labels q2": "".join(map(str, r["placement_low"]))}
        for r in results])
