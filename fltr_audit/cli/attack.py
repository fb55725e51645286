"""`fltr-audit attack DIR`: run attacks on the rounds a training run or a Flower app recorded
(``fltr_audit.api.recording_attacks``)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from fltr_audit.cli import options as o
from fltr_audit.cli.app import app
from fltr_audit.cli.common import emit_json, print_table
from fltr_audit.cli.progress import progress


@app.command("attack")
def attack(
    recording: Path = typer.Argument(..., help="A recording (docs/recording-format.md): the run folder of `train ... "
                                               "--record-rounds`, its recording/ folder, or a folder of recordings "
                                               "(one per Flower client)."),
    attack: o.Attacks = ["olsr", "score", "prob", "distance", "random3"],
    min_shown: Optional[int] = typer.Option(None, "--min-shown", help="Score only lists with at least this many "
                                            "documents (default: a full list, as `audit` scores)."),
    require_click: bool = typer.Option(True, "--require-click/--all-lists",
                                       help="Score only lists with a click (as `audit`)."),
    seed: o.Seed = 0,
    json_out: o.Json = False,
    quiet: o.Quiet = False,
) -> None:
    """Guess the clicks behind every recorded round; one row per round and attack (macro average)."""
    from fltr_audit.api.recording_attacks import attack_recording  # start-up: the engine loads here

    with progress(1, "attacking the recorded rounds", quiet or json_out) as bar:
        table = attack_recording(recording, attack, min_shown=min_shown, require_click=require_click, seed=seed)
        bar.advance()
    if json_out:
        emit_json(table.to_dict(orient="records"))
        return
    cols = ["round", "threat_model", "attack", "accuracy", "precision", "recall", "f1", "auc", "n_queries"]
    print_table(f"attacks on {recording} (macro average over the lists of each round)",
                [{c: (f"{v:.3f}" if isinstance(v, float) else v) for c, v in row.items()}
                 for row in table[cols].to_dict(orient="records")])
