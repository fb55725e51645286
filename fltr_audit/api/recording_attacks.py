"""``fltr_audit.attack_recording``: run attacks on recorded rounds (a training run's
``--record-rounds``, or a Flower app's recording mod) -- the ``fltr-audit attack`` command."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import pandas as pd

from attacks.registry import make_attack, needed
from attacks.scoring import score_guess, summarize
from fltr_audit.constraints import Interval, check
from fltr_audit.errors import FltrError
from fltr_audit.runs.progress import NO_PROGRESS, Progress
from fltr_audit.store.recording import read_recording, recording_folders

DEFAULT_ATTACKS = ("olsr", "score", "prob", "distance", "random3")


def attack_recording(recording: str | Path, attacks: Sequence[str] = DEFAULT_ATTACKS, min_shown: int | None = None,
                     require_click: bool = True, seed: int = 0, progress: Progress = NO_PROGRESS) -> pd.DataFrame:
    """One row per recorded round and attack (macro averages over the round's lists): guesses
    scored against the recording's ground truth. ``recording``: a recording folder, a run folder
    holding ``recording/``, or a folder of recordings (one per Flower client)."""
    if min_shown is not None:
        check("min_shown", min_shown, (Interval(int, 0, None),))
    recording = Path(recording)
    if (recording / "recording").is_dir():  # pointed at the run folder: attack its recording
        recording = recording / "recording"
    built = {name: make_attack(name, **needed(name, {"seed": seed})) for name in attacks}
    batches = [batch for folder in recording_folders(recording) for batch in read_recording(folder)]
    if not batches:
        raise FltrError(f"{recording}: no recorded rounds (record them with train --record-rounds)")
    rows = []
    for batch in batches:
        threat = batch.view.threat_model + (" (aggregate only)" if batch.view.messages is None else "")
        full = batch.view.interactions.shown.shape[-1] if batch.view.interactions is not None else 0
        for name, attack in built.items():
            per_query = score_guess(attack.guess(batch.view), batch, min_shown=full if min_shown is None else min_shown,
                                    require_click=require_click)
            rows.append({"round": batch.view.round, "threat_model": threat, "attack": name, **summarize(per_query)[0]})
        progress.advance()
    return pd.DataFrame(rows)

