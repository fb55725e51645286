"""``fltr-audit epsilon``: worst-case epsilon of FOLtR-ES's privatized MaxRR (Table 2 method;
``fltr_audit.api.epsilon``)."""

from __future__ import annotations

from typing import List

import typer

from fltr_audit.cli import options as o
from fltr_audit.cli.app import app
from fltr_audit.cli.common import emit_json, print_table


@app.command("epsilon")
def epsilon(
    click_model: List[str] = typer.Option(["perfect", "navigational", "informational"], "--click-model",
                                          help="Click model(s): repeat or comma-separate."),
    p: List[float] = typer.Option([0.25, 0.5, 0.75, 0.9, 0.95, 0.99], "--p",
                                  help="Randomized-response p: repeat or comma-separate."),
    length: int = typer.Option(10, "--length", help="List length L (MaxRR takes L + 1 values)."),
    levels: int = typer.Option(3, "--levels", help="Relevance levels of the click model (3 or 5)."),
    json_out: o.Json = False,
    quiet: o.Quiet = False,
) -> None:
    """Exact worst-case epsilon of privatized MaxRR over all pairs of relevance placements and
    all transmitted values (FOLtR-ES Eq. 9), next to the bound log(p (n-1)/(1-p)) (Eq. 10)."""
    from fltr_audit.api.epsilon import epsilon_table  # start-up: the engine loads when the command runs

    results = epsilon_table(click_model, p, length, levels)
    if json_out:
        emit_json(results)  # always a list of records, whatever its length
        return
    print_table(f"epsilon of privatized MaxRR, L = {length}, {levels} levels (n = {length + 1} values)", [
        {"click model": r["click_model"], "p": f"{r['p']:g}", "epsilon": f"{r['epsilon']:.2f}",
         "Eq. 10 bound": f"{r['theoretical']:.2f}",
         "worst MaxRR": "no click" if r["value"] == 0 else f"1/{r['value_index'] + 1}",
         "labels q1": "".join(map(str, r["placement_high"])), "labels q2": "".join(map(str, r["placement_low"]))}
        for r in results])
