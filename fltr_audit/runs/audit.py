"""One audit run: train, probe under a defense, attack, score, audit the defense's claim.

Part of the composition root: it wires the engine to the ``defenses`` and ``attacks`` packages.
A run is a typed ``RunSpec`` (``fltr_audit.spec.run``; one grid point of a campaign,
``fltr_audit.spec.grid``); ``run_audit`` turns it into the result tables of ``docs/store.md``:

1. **Base model** -- the algorithm trained for ``rounds`` rounds with the ``train_click_model``
   and *no* defense (each round's queries drawn without replacement when the training split has
   enough of them, else with replacement) (Pham §4.1 pre-trains with perfect clicks). All
   attacks of all defenses of one seed probe this same model, so attack results differ only by
   what the defense does to the messages (``runs.models``).
2. **Utility** -- the same training with the defense applied; its final offline nDCG@10 on the
   test split, and the change against the base model, measure the defense's cost.
3. **Probe** (Pham §4.1, ``runs.probe_rounds``) -- every query of the probe split issued by a
   fresh client under each click model, through the defense and aggregation path, grouped in
   cohorts; every attack guesses the clicks from the server's view; scoring is per query, against
   the real clicks and against K counterfactual click vectors of the same users on the same lists
   (``probe.counterfactual``, default 20; ``attacks.scoring``): leakage is the difference.
4. **Epsilon audits** (``runs.epsilon_audits``) -- the worst-case audit the claim verdict rests on
   and the natural one beside it, each keyed by the run key and its kind.

Every use of the defense -- the defended training, the probe, the audits -- builds a fresh stack
from the run's ``DefenseSpec``, so a stateful defense (adaptive clipping) starts each use from its
declared state, whatever ran before in the process.

A campaign's ``[audit_run]`` section adds the ``run_audits`` row of ``fltr-audit audit-run`` for
the run's settings (``runs.whole_run``, called by ``runs.executors``).
"""

from __future__ import annotations

from typing import Any, Mapping

import pandas as pd

from attacks.epsilon import epsilon_rows
from attacks.registry import attack_spec, make_attack
from attacks.roc import roc_points
from attacks.scoring import Evaluation, Slots, evaluate, summarize
from fltr_audit.runs.epsilon_audits import epsilon_audits, randomized_response
from defenses.robust.compose import check_cohort
from fltr_audit.runs.models import build_algorithm, final_ndcg, run_stack, splits_of, trained, without_poison
from fltr_audit.runs.probe_rounds import (attack_params, counterfactual_draws, probe_rounds, probe_seed, redraw,
                                          threat_label)
from fltr_audit.spec.run import RunSpec, as_run_spec


def run_audit(config: RunSpec | Mapping[str, Any]) -> dict[str, pd.DataFrame]:
    """Compute every table of one run (see the module docstring); a run config dict is read as
    ``RunSpec.from_json``."""
    config = as_run_spec(config)
    splits = splits_of(config)
    defense = config.defense.name
    context = {"algo": config.algorithm.name, "setting": algorithm_setting(config), "data": config.data.spec,
               "fold": config.data.fold, "seed": config.seed}

    check_cohort(config.defense.build(), config.algorithm.clients)
    poison = config.algorithm.poison
    base = trained(without_poison(config))  # the model the probe attacks: never poisoned
    defended = trained(config, config.defense) if defense != "none" or poison is not None else base
    base_ndcg, _ = final_ndcg(config, splits, base)
    ndcg, ndcg5 = final_ndcg(config, splits, defended)
    integrity = {} if poison is None else {"poison": poison.text,
                                           "malicious_mean": float(defended.curves["malicious_clients"].mean())}
    if "aggregator_fallbacks" in defended.config:
        integrity["aggregator_fallbacks"] = defended.config["aggregator_fallbacks"]
    utility = pd.DataFrame([{**context, "click_model": config.algorithm.train_click_model, "defense": defense,
                             "ndcg10": ndcg, "ndcg10_delta": ndcg - base_ndcg, "ndcg5": ndcg5, **integrity}])
    curves = defended.curves.assign(defense=defense, algo=context["algo"], setting=context["setting"],
                                    **({"poison": poison.text} if poison is not None else {}))
    if poison is not None:  # an integrity run: its privacy side is the same run without the poisoning
        return {"utility": utility, "curves": curves}
    attack_rows, query_rows = _probe_and_attack(config, splits, base, context)
    tables = {
        "utility": utility,
        "curves": curves,
        "attacks": pd.DataFrame(attack_rows),
        "per_query": pd.concat(query_rows, ignore_index=True) if query_rows else pd.DataFrame(),
    }
    if config.audit.epsilon_audit:
        stack = run_stack(config, splits)
        audit_rows = epsilon_audits(config, splits, stack, base)
        if audit_rows:
            tables["audits"] = pd.DataFrame([{**context, "defense": defense, **row} for row in audit_rows])
        rr = randomized_response(stack)
        if rr is not None:
            tables["epsilon"] = pd.DataFrame(epsilon_rows(config.probe.click_models, [rr.p],
                                                          levels=splits.train.n_levels))
    return tables


def _probe_and_attack(config: RunSpec, splits: Any, base: Any, context: dict) -> tuple[list[dict], list]:
    """The ``attacks`` rows and ``per_query`` tables of every click model x attack: the probe of the
    base model under a fresh stack, each attack's guesses scored against the real and the
    counterfactual clicks."""
    probe_cfg = config.probe
    data = splits.get(probe_cfg.split)
    draws = counterfactual_draws(probe_cfg)
    attack_rows, query_rows = [], []
    for click_model in probe_cfg.click_models:
        algorithm = build_algorithm(config, splits, click_model)
        stack = run_stack(config, splits)
        batches, manipulation = probe_rounds(config, algorithm, base.params, data, stack)
        counterfactual = [redraw(algorithm, b, data, draws, probe_seed(config)) for b in batches]
        cell = {**context, "click_model": click_model, "defense": config.defense.name}
        for name in config.attacks:
            attack = make_attack(name, **attack_params(name, config, algorithm, stack))
            reference = attack_spec(name).reference
            if not batches:  # every cohort lost: the row says so instead of failing the run
                attack_rows.append({**cell, "attack": name, "reference": reference, "probe_cohort": probe_cfg.cohort,
                                    "averaging": "macro", "n_queries": 0, **manipulation})
                continue
            guesses = [attack.guess(b.view) for b in batches]
            scored = [evaluate(guess, b, counterfactual=cf, min_shown=probe_cfg.min_shown,
                               require_click=probe_cfg.require_click)
                      for guess, b, cf in zip(guesses, batches, counterfactual)]
            per_query = Evaluation.rows(scored)
            slots = Slots.concat([e.slots for e in scored])
            refined = guesses and guesses[0].attack.startswith(name)
            label = guesses[0].attack if refined else name            # e.g. bayes-approx where bayes searches
            roc = roc_points(slots)
            for row in summarize(per_query, slots=slots):
                row = {**row, **(roc if row["averaging"] == "macro" else {})}  # one curve per run and attack
                attack_rows.append({**cell, "threat_model": threat_label(batches[0].view, stack), "attack": label,
                                    "reference": reference, "probe_cohort": probe_cfg.cohort, **row, **manipulation,
                                    "degenerate_lists": sum(g.degenerate for g in guesses)})
            query_rows.append(per_query.assign(click_model=click_model, defense=config.defense.name, attack=label))
    return attack_rows, query_rows


def algorithm_setting(config: RunSpec) -> str:
    """The algorithm's own parameters as one short label (e.g. ``gamma=0.5``), so that tables
    keep runs of different settings of one algorithm apart; empty for the defaults."""
    parts = [f"{k}={v}" for k, v in config.algorithm.params]
    if config.algorithm.ranker != "linear":
        parts.insert(0, f"ranker={config.algorithm.ranker}")
    if config.algorithm.non_iid != "iid":
        parts.append(f"non_iid={config.algorithm.non_iid}")
    return ",".join(parts)
