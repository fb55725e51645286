"""`fltr-audit attack DIR`: run attacks on the rounds a training run recorded (`--record-rounds`)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import typer

from fltr_audit.cli.app import app
from fltr_audit.cli.common import check_at_least, emit_json, parse_list, print_table, progress
from fltr_audit.errors import FltrError


@app.command("attack")
def attack(
    recording: Path = typer.Argument(..., help="A recording (docs/recording-format.md): the run folder of `train ... --record-rounds`, its "
                                                      "recording/ folder, or a folder of recordings (one per Flower client)."),
    attacks: str = typer.Option("olsr,score,prob,distance,random3", "--attack", help="Comma-separated attacks."),
    min_shown: int = typer.Option(None, "--min-shown",
                                  help="Score only lists with at least this many documents (default: a full "
                                       "list, as `audit` scores)."),
    require_click: bool = typer.Option(True, "--require-click/--all-lists",
                                       help="Score only lists with a click (as `audit`)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the random baselines."),
    json_out: bool = typer.Option(False, "--json", help="Print the records as JSON."),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bar."),
) -> None:
    """Guess the clicks behind every recorded round; one row per round and attack (macro average)."""
    from attacks.registry import make_attack, needed
    from attacks.scoring import score_guess, summarize
    from fltr_audit.store.recording import read_recording, recording_folders

    if min_shown is not None:
        check_at_least({"--min-shown": min_shown}, 0)
    if (recording / "recording").is_dir():  # pointed at the run folder: attack its recording
        recording = recording / "recording"
    names = parse_list(attacks, "--attack")
    built = {name: make_attack(name, **needed(name, {"seed": seed})) for name in names}
    batches = [batch for folder in recording_folders(recording) for batch in read_recording(folder)]
    if not batches:
        raise FltrError(f"{recording}: no recorded rounds (record them with train --record-rounds)")
    rows = []
    with progress(len(batches), "attacking rounds", quiet or json_out) as bar:
        for batch in batches:
            threat = batch.view.threat_model + (" (aggregate only)" if batch.view.messages is None else "")
            full = batch.view.interactions.shown.shape[-1] if batch.view.interactions is not None else 0
            for name, attack_obj in built.items():
                per_query = score_guess(attack_obj.guess(batch.view), batch,
                                        min_shown=full if min_shown is None else min_shown,
                                        require_click=require_click)
                macro = summarize(per_query)[0]
                rows.append({"round": batch.view.round, "threat_model": threat, "attack": name, **macro})
            bar.advance()
    table = pd.DataFrame(rows)
    if json_out:
        emit_json(table.to_dict(orient="records"))
        return
    cols = ["round", "threat_model", "attack", "accuracy", "precision", "recall", "f1", "auc", "n_queries"]
    print_table(f"attacks on {recording} (macro average over the lists of each round)",
                [{c: (f"{v:.3f}" if isinstance(v, float) else v) for c, v in row.items()}
                 for row in table[cols].to_dict(orient="records")])
