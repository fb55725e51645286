"""`fltr-audit attack DIR`: run attacks on the rounds a training run or a Flower app recorded, and
read them as `audit` reads a probe (``fltr_audit.api.recording_attacks``)."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Optional

import typer

from fltr_audit.cli import options as o
from fltr_audit.cli.app import app
from fltr_audit.cli.common import emit_json, print_glossary_pointer
from fltr_audit.cli.progress import progress


@app.command("attack")
def attack(
    recording: Path = typer.Argument(..., help="A recording (docs/recording-format.md): the run folder of `train ... "
                                               "--record-rounds`, its recording/ folder, or a folder of recordings "
                                               "(one per Flower client)."),
    attack: o.Attacks = ["olsr", "score", "prob", "distance", "random3"],
    click_model: o.ClickModel = None,
    by_client: bool = typer.Option(False, "--by-client", help="One row per attack and client (each client its own "
                                                             "leakage verdict)."),
    min_shown: Optional[int] = typer.Option(None, "--min-shown", help="Score only lists with at least this many "
                                            "documents (default: a full list, as `audit` scores)."),
    require_click: bool = typer.Option(True, "--require-click/--all-lists",
                                       help="Score only lists with a click (as `audit`)."),
    counterfactual: int = typer.Option(20, "--counterfactual", help="Counterfactual click vectors drawn per list."),
    min_effect: o.MinEffect = None,
    seed: o.Seed = 0,
    json_out: o.Json = False,
    quiet: o.Quiet = False,
) -> None:
    """Attack every recorded round: per attack the AUC against the real and the counterfactual clicks,
    the leakage and the leakage verdict (the users' click model: --click-model, or the run's)."""
    # start-up: the engine loads here
    from fltr_audit.api.comparison import min_effect_of
    from fltr_audit.api.recording_attacks import attack_recording

    effect = min_effect_of(min_effect)
    with progress(1, "attacking the recorded rounds", quiet or json_out) as bar:
        result = attack_recording(recording, attack, min_shown=min_shown, require_click=require_click, seed=seed,
                                  click_model=click_model, counterfactual=counterfactual, by_client=by_client,
                                  min_effect=effect)
        bar.advance()
    if json_out:
        emit_json(result.as_json())
        return
    print_recording_attack(result, recording, effect)
    print_glossary_pointer()


def print_recording_attack(result, recording: Path, min_effect: float) -> None:
    """The per-attack table (as `audit` prints leakage) and, below it, what could not be scored."""
    # start-up: loaded when the command runs, not for --help
    from fltr_audit.api.verdict_tables import print_rows

    rows = []
    for r in result.attacks.to_dict(orient="records"):
        ci = "" if r["leakage_ci_low"] != r["leakage_ci_low"] else \
            f"\n[{r['leakage_ci_low']:+.3f}, {r['leakage_ci_high']:+.3f}]"
        row = {"client": str(r["client"])} if "client" in r else {}
        row.update({"attack": r["attack"] + (" (ref.)" if r["reference"] else ""), "lists": f"{int(r['n_lists']):,}",
                    "AUC": f"{r['auc']:.3f}", "AUC cf.": _number(r["auc_counterfactual"], ".3f"),
                    "leakage [95 % CI]": _number(r["leakage"], "+.3f") + ci,
                    "leakage verdict": "reference" if r["reference"] else str(r.get("leakage_verdict") or "n/a")})
        rows.append(row)
    if rows:
        model = result.click_model or "unknown"
        print_rows(f"Attacks on {recording} (click model {model}; leakage = AUC real - counterfactual; the verdict "
                   f"of the informed attacks together, 'no measurable leakage' below {min_effect:g})", rows,
                   right=("lists", "AUC", "AUC cf."), whole=("leakage [95 % CI]", "leakage verdict"))
    if "client" not in result.attacks.columns:
        # start-up: loaded when the command runs, not for --help
        from reports.compare import leakage_text

        for _, v in result.verdicts.iterrows():
            typer.echo(textwrap.fill(f"Leakage verdict ({v['threat_model']}): {leakage_text(v, min_effect)}", 100))
    if result.no_baseline:
        typer.echo(textwrap.fill(result.no_baseline, 100))
    if result.unscored:
        typer.echo(result.unscored)  # one line


def _number(value, fmt: str) -> str:
    return "n/a" if value is None or value != value else format(value, fmt)
