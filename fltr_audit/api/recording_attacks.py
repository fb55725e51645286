"""``fltr_audit.attack_recording``: run attacks on recorded rounds (a training run's
``--record-rounds``, or a Flower app's recording mod) and read them as ``audit`` reads a probe --
the ``fltr-audit attack`` command.

Each attack's guesses are scored against the recording's clicks and, given the users' click model
(``click_model``, or the run folder's ``config.json``), against counterfactual clicks redrawn from
it on the same shown lists: one row per attack (and per client with ``by_client``) with its AUC,
the counterfactual AUC, the leakage with its interval and the leakage verdict of the attacks'
family (``reports.leakage``), as ``audit`` gives them. A round that recorded no shown lists
(``server-blind``) or no clicks cannot be scored; the result says so in one line (``unscored``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from attacks.registry import attack_spec, make_attack, needed
from attacks.scoring import score_guess, summarize
from fltr_audit.constraints import POSITIVE_INT, Interval, check
from fltr_audit.engine.clicks import cascade_model, redraw_cascade, shown_labels
from fltr_audit.engine.randomness import stream
from fltr_audit.errors import FltrError
from fltr_audit.runs.progress import NO_PROGRESS, Progress
from fltr_audit.store.recording import read_manifest, read_recording, recording_folders
from reports.leakage import MIN_EFFECT, leakage_table, leakage_verdicts

DEFAULT_ATTACKS = ("olsr", "score", "prob", "distance", "random3")
UNSCORABLE = "{n} of {total} recorded rounds cannot be scored: {why} (docs/flower-app.md)"
NO_CLICK_MODEL = ("no counterfactual: the users' click model is not known (give --click-model), so the leakage "
                  "(AUC real - counterfactual) and its verdict cannot be computed; AUC against the real clicks only")


@dataclass(frozen=True)
class RecordingAttack:
    """What the attacks on a recording found: ``attacks`` (one row per attack, and client with
    ``by_client``), ``verdicts`` (the leakage verdict of each family), ``rounds`` (one row per
    recorded round and attack), and ``unscored`` / ``no_baseline`` (one line each, "" when all
    could be scored)."""

    attacks: pd.DataFrame
    verdicts: pd.DataFrame
    rounds: pd.DataFrame
    click_model: str | None
    unscored: str
    no_baseline: str

    def as_json(self) -> dict[str, Any]:
        """What ``fltr-audit attack --json`` prints as its result."""
        return {"attacks": self.attacks.to_dict(orient="records"), "verdicts": self.verdicts.to_dict(orient="records"),
                "rounds": self.rounds.to_dict(orient="records"), "click_model": self.click_model,
                "unscored": self.unscored or None, "no_baseline": self.no_baseline or None}


def _click_model_of(recording: Path, click_model: str | None) -> str | None:
    """``click_model`` as given, else the one the run folder's ``config.json`` names (None if neither)."""
    if click_model is not None:
        return click_model
    for folder in (recording, recording.parent):
        config = folder / "config.json"
        if config.is_file():
            try:
                return json.loads(config.read_text()).get("click_model")
            except (ValueError, OSError):
                return None
    return None


def _counterfactual(batch, click_model: str | None, draws: int, seed: int) -> np.ndarray | None:
    """K clicks redrawn from the cascade ``click_model`` on the batch's shown lists (None without a model)."""
    if click_model is None or click_model == "pbm":
        return None
    documents, shown = batch.view.documents, batch.view.interactions.shown
    model = cascade_model(click_model, int(documents.n_levels))
    return redraw_cascade(model, shown_labels(documents.labels, shown), draws,
                          stream(seed, "counterfactual", int(batch.view.round)))


def attack_recording(recording: str | Path, attacks: Sequence[str] = DEFAULT_ATTACKS, min_shown: int | None = None,
                     require_click: bool = True, seed: int = 0, click_model: str | None = None,
                     counterfactual: int = 20, by_client: bool = False, min_effect: float = MIN_EFFECT,
                     progress: Progress = NO_PROGRESS) -> RecordingAttack:
    """Attack every recorded round, score the guesses against the recording's clicks and their
    counterfactual, and give the leakage verdict (module docstring). ``recording``: a recording
    folder, a run folder holding ``recording/``, or a folder of recordings (one per Flower client)."""
    if min_shown is not None:
        check("min_shown", min_shown, (Interval(int, 0, None),))
    check("counterfactual", counterfactual, POSITIVE_INT)
    recording = Path(recording)
    if (recording / "recording").is_dir():  # pointed at the run folder: attack its recording
        recording = recording / "recording"
    built = {name: make_attack(name, **needed(name, {"seed": seed})) for name in attacks}
    folders = recording_folders(recording)
    defense = read_manifest(folders[0]).defense
    batches = [batch for folder in folders for batch in read_recording(folder)]
    if not batches:
        raise FltrError(f"{recording}: no recorded rounds (record them with train --record-rounds)")
    model = _click_model_of(recording, click_model)
    lists, rounds, blind = [], [], {}
    for batch in batches:
        if batch.view.interactions is None or batch.truth.clicks.size == 0:
            why = "server-blind, no shown lists" if batch.view.interactions is None else "no ground-truth clicks"
            blind[why] = blind.get(why, 0) + 1
            progress.advance()
            continue
        threat = batch.view.threat_model + (" (aggregate only)" if batch.view.messages is None else "")
        full = batch.view.interactions.shown.shape[-1]
        cf = _counterfactual(batch, model, counterfactual, seed)
        for name, attack in built.items():
            per_query = score_guess(attack.guess(batch.view), batch, counterfactual=cf,
                                    min_shown=full if min_shown is None else min_shown, require_click=require_click)
            rounds.append({"round": batch.view.round, "threat_model": threat, "attack": name,
                           **summarize(per_query)[0]})
            lists.append(per_query.assign(round=batch.view.round, threat_model=threat, attack=name))
        progress.advance()
    unscored = "; ".join(UNSCORABLE.format(n=n, total=len(batches), why=why) for why, n in blind.items())
    attack_rows, verdicts = _leakage(lists, defense, model, by_client, min_effect)
    return RecordingAttack(attacks=attack_rows, verdicts=verdicts, rounds=pd.DataFrame(rounds), click_model=model,
                           unscored=unscored, no_baseline="" if model not in (None, "pbm") or not lists
                           else NO_CLICK_MODEL)


def _leakage(lists: list[pd.DataFrame], defense: str, click_model: str | None, by_client: bool,
             min_effect: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per attack (and client): lists, AUC, counterfactual AUC, leakage with its 95 % interval over
    lists, and each family's leakage verdict (``reports.leakage``: reference attacks never decide)."""
    if not lists:
        return pd.DataFrame(), pd.DataFrame()
    per_query = pd.concat(lists, ignore_index=True).assign(defense=defense, click_model=click_model or "unknown")
    # the per-list rows join their attack row by run key: one key per client keeps the clients apart
    per_query["run_key"] = "client-" + per_query["client"].astype(str) if by_client else "recording"
    keys = ["defense", "click_model", "threat_model", *(["client"] if by_client else [])]
    groups = per_query.groupby([*keys, "attack", "run_key"], sort=False)
    attacks = groups[["auc", "auc_counterfactual"]].mean().reset_index()
    attacks["reference"] = [attack_spec(a).reference for a in attacks["attack"]]
    attacks["leakage"] = attacks["auc"] - attacks["auc_counterfactual"]
    table = leakage_table({"attacks": attacks, "per_query": per_query}, keys)
    rows = table[[*keys, "attack", "reference", "n_lists", "auc", "auc_counterfactual", "leakage",
                  "leakage_ci_low", "leakage_ci_high", "p_leakage"]]
    if per_query["auc_counterfactual"].isna().all():
        return rows, pd.DataFrame()
    verdicts = leakage_verdicts(table, keys, min_effect=min_effect)
    return rows.merge(verdicts[[*keys, "leakage_verdict"]], on=keys, how="left"), verdicts
