"""The probe of one audit run (Pham §4.1): every query of the probe split issued by fresh clients
under a click model, through the defense and aggregation path, grouped in cohorts, under the run's
threat model; the counterfactual click vectors each probed list is scored against; and what an
attack needs beyond the server's view. The probe's streams are keyed by the run's seed and fold
(``probe_seed``): folds are independent replicates, and every defense of a seed is probed on the
same clicks (common random numbers)."""

from __future__ import annotations

from typing import Any

import numpy as np

from attacks.registry import attack_spec, needed
from defenses.robust.compose import rule_of
from defenses.stack import DefenseStack
from fltr_audit.base.means import nanmean
from fltr_audit.constraints import POSITIVE_INT, ParameterError, check
from fltr_audit.engine.malicious import malicious_probe
from fltr_audit.engine.messages import RoundBatch
from fltr_audit.engine.probe import MAX_PROBE_ROUNDS, probe_cohorts
from fltr_audit.engine.randomness import stream
from fltr_audit.runs.noise_model import noise_model
from fltr_audit.spec.run import ProbeSettings, RunSpec


def probe_seed(config: RunSpec) -> int:
    """The seed of a run's probe streams (clicks, counterfactual draws, random baselines),
    derived from the run seed *and the fold*: probe clients of different folds then draw
    independent clicks, so that lists pooled over the folds of one seed are independent
    replicates (the CIs over lists assume it). The same for every defense of a run
    (common random numbers: defenses are compared on the same clicks)."""
    return int(np.random.SeedSequence([int(config.seed), int(config.data.fold)]).generate_state(1)[0])


def counterfactual_draws(probe_cfg: ProbeSettings) -> int:
    """K, the counterfactual click vectors per probed list (``probe.counterfactual``, default 20)."""
    draws = probe_cfg.counterfactual
    check("probe.counterfactual", draws, POSITIVE_INT)
    return int(draws)


def redraw(algorithm: Any, batch: RoundBatch, data: Any, draws: int, seed: int) -> np.ndarray:
    """The counterfactual clicks of one probe round, (draws, n, B, k): the algorithm's click
    model on the same shown lists from ``stream(seed, "counterfactual", round)``, independent
    of the real clicks; the message the attacker sees is unchanged."""
    if batch.view.interactions is None:
        raise ParameterError("probe.counterfactual", "the counterfactual baseline needs the shown lists of the probe")
    rng = stream(seed, "counterfactual", int(batch.view.round))
    return algorithm.redraw_clicks(batch.truth, batch.view.interactions, data, draws, rng)


def threat_label(view: Any, stack: DefenseStack | None = None) -> str:
    """The threat model an attack row names: ``server (robust output)`` when the server sees only what a
    robust rule releases (``view=output``: the rule inside a secure robust-aggregation protocol),
    ``server (aggregate only)`` when an honest server sees only the aggregate, else the view's own."""
    if view.threat_model == "server" and view.messages is None:
        rule = None if stack is None else rule_of(stack.aggregator)
        return "server (robust output)" if rule is not None and rule.view == "output" else "server (aggregate only)"
    return view.threat_model


def probe_rounds(config: RunSpec, algorithm: Any, params: np.ndarray, data: Any, stack: DefenseStack
                 ) -> tuple[list, dict]:
    """The probe's rounds under the run's threat model (``probe.threat_model``, default server)
    and the columns its attack rows add: ``cohorts_lost`` and ``queries_left_out``
    (``fltr_audit.engine.probe``); for ``server-malicious``, the manipulation and its mean cost to the
    other members (nDCG@10 of their shown lists, honest vs served; ``fltr_audit.engine.malicious``).

    Sample size: ``probe.lists`` N (absent: one pass over the split) -- passes over the split,
    at most ``probe.rounds`` (default ``MAX_PROBE_ROUNDS``), until at least N lists can be scored
    (``scorable_lists``). The stopping rule reads only the clicks' counts, never an attack, so it
    does not bias the leakage."""
    probe_cfg = config.probe
    threat_model = config.probe.threat_model
    common = dict(seed=probe_seed(config), queries_per_client=probe_cfg.queries_per_client,
                  cohort_size=probe_cfg.cohort, client_defenses=stack.client, aggregator=stack.aggregator)
    if threat_model != "server-malicious":
        lists = probe_cfg.lists
        passes = probe_cfg.rounds or (1 if lists is None else MAX_PROBE_ROUNDS)
        enough = None if lists is None else (
            lambda batches: sum(scorable_lists(b, probe_cfg.min_shown, probe_cfg.require_click)
                                for b in batches) >= lists)
        found = probe_cohorts(algorithm, params, data, threat_model=threat_model, passes=passes, enough=enough,
                              **common)
        return found.batches, {"cohorts_lost": found.cohorts_lost, "queries_left_out": found.queries_left_out}

    manipulation = config.probe.manipulation
    rounds = malicious_probe(algorithm, params, data, manipulation=manipulation, **common)
    honest = nanmean([r.others_ndcg_honest for r in rounds])  # NaN when no round had other members
    served = nanmean([r.others_ndcg_served for r in rounds])
    return [r.batch for r in rounds], {"manipulation": manipulation, "others_ndcg_honest": honest,
                                       "others_ndcg_served": served, "others_ndcg_cost": honest - served}


def scorable_lists(batch: RoundBatch, min_shown: int, require_click: bool) -> int:
    """Lists of a probe round that leakage can be scored on: at least ``min_shown`` shown
    documents, a click when ``require_click``, and not every shown document clicked (AUC needs
    both classes)."""
    mask = batch.view.interactions.mask if batch.view.interactions is not None else np.ones(
        np.shape(batch.truth.clicks), dtype=bool)
    clicks = np.asarray(batch.truth.clicks, dtype=bool) & mask
    shown, clicked = mask.sum(-1), clicks.sum(-1)
    keep = (shown >= min_shown) & (clicked < shown) & ((clicked > 0) if require_click else True)
    return int(keep.sum())


def attack_params(name: str, config: RunSpec, algorithm: Any, stack: DefenseStack) -> dict:
    """What an attack needs beyond the server view, as its spec's ``needs`` says: the probe
    seed, the public algorithm, its list length, the defense stack's noise model."""
    available = {"seed": probe_seed(config), "algorithm": algorithm, "k": algorithm.k}
    if "noise" in attack_spec(name).needs:
        isolated = config.probe.threat_model == "server-malicious"
        available["noise"] = noise_model(stack,
                                         members=config.probe.cohort if isolated else 1)
    return needed(name, available)
