"""One audit run: train, probe under a defense, attack, score, audit the defense's claim.

Part of the composition root (with ``campaign`` and ``cli``): it wires the engine to the
``defenses`` and ``attacks`` packages. A run's configuration is one grid point of a
campaign (``fltr_audit.campaign.expand``); ``run_audit`` turns it into the result tables of
``docs/store.md``:

1. **Base model** -- the algorithm trained for ``rounds`` rounds with the
   ``train_click_model`` and *no* defense (each round's queries drawn without replacement
   when the training split has enough of them, else with replacement, as FPDGD's
   1,000 clients x 4 queries on MQ2008's ~470 training queries needs) (Pham §4.1 pre-trains with perfect clicks). All
   attacks of all defenses of one seed probe this same model, so attack results differ only
   by what the defense does to the messages.
2. **Utility** -- the same training with the defense applied; its final offline nDCG@10
   on the test split, and the change against the base model, measure the defense's cost.
3. **Probe** (Pham §4.1) -- every query of the probe split is issued by a fresh client
   under each click model, through the defense and aggregation path, grouped in cohorts;
   every attack guesses the clicks from the server's view; scoring is per query.
4. **Epsilon audit** -- for FOLtR-ES, the query-distinguishing test on the privatized
   metric (``_audit_metric``) beside the exact epsilon by enumeration. For vector messages, the defense's client transforms (and its aggregation) as a
   mechanism on two inputs of one client (two probe clients' undefended messages, the pair
   farthest apart among the first probe clients): the projection test's error rates give an
   empirical lower bound on epsilon, set beside the claimed epsilon and scope. When the
   aggregator hides messages the audited output is the cohort mean, the other members drawn
   from the probe clients' messages (secure aggregation's exact sum is simulated by the mean:
   its fixed-point error is far below the noise that matters here).

The pre-trained models are cached per process, keyed by their configuration, so the runs of
one campaign that differ only by defense train the base model once per worker.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

import numpy as np
import pandas as pd

from attacks.audit import audit as empirical_audit
from attacks.audit import projection_statistic
from attacks.epsilon import epsilon_rows
from attacks.foltr_decode import audit_query_distinguishing
from attacks.registry import attack_needs, make_attack
from attacks.scoring import score_guess, summarize
from defenses.stack import DefenseStack, parse_defense
from fltr_audit import metrics
from fltr_audit.algorithms import registry as algorithms
from fltr_audit.data.load import load_splits
from fltr_audit.federation import TrainResult, train
from fltr_audit.interfaces import Algorithm
from fltr_audit.messages import Messages
from fltr_audit.probe import probe

AUDIT_POOL = 50
TRAINING_KEYS = ("data", "fold", "normalization", "queries", "algo", "rounds", "clients", "queries_per_client",
                 "ranker", "train_click_model", "params", "seed")
AUDIT_COLUMNS = ("mechanism", "attack", "threat_model", "claimed_epsilon", "claimed_delta", "claimed_scope",
                 "epsilon_point", "epsilon_lb", "confidence", "n_trials", "fpr", "fnr", "verdict")


def build_algorithm(config: dict, splits: Any, click_model: str) -> Algorithm:
    """The algorithm a run configuration names, with the given click model (cached per process)."""
    return _algorithm(json.dumps({k: config.get(k) for k in TRAINING_KEYS}, sort_keys=True), click_model)


@lru_cache(maxsize=32)
def _algorithm(key: str, click_model: str) -> Algorithm:
    config = json.loads(key)
    settings = {k: config.get(k) for k in ("ranker", "seed", "clients", "queries_per_client", "params")}
    return algorithms.build(config["algo"], splits_of(config), click_model, settings)


@lru_cache(maxsize=8)
def _splits(data: str, fold: int, normalization: str, queries: int | None, seed: int) -> Any:
    return load_splits(data, fold, normalization=normalization, queries=queries, seed=seed)


def splits_of(config: dict) -> Any:
    return _splits(config["data"], config["fold"], config.get("normalization", "none"), config.get("queries"),
                   config["seed"])


def _training_key(config: dict, defense: str) -> str:
    return json.dumps({**{k: config.get(k) for k in TRAINING_KEYS}, "defense": defense}, sort_keys=True)


@lru_cache(maxsize=16)
def _trained(key: str) -> TrainResult:
    config = json.loads(key)
    splits = splits_of(config)
    stack = parse_defense(config["defense"])
    algorithm = build_algorithm(config, splits, config["train_click_model"])
    return train(
        algorithm,
        splits.train,
        clients=config["clients"],
        queries_per_client=config["queries_per_client"],
        rounds=config["rounds"],
        seed=config["seed"],
        eval_data=splits.test,
        eval_every=max(1, config["rounds"] // 20),
        client_defenses=stack.client,
        aggregator=stack.aggregator,
        replace=config["clients"] * config["queries_per_client"] > splits.train.n_queries,
    )


def trained(config: dict, defense: str = "none") -> TrainResult:
    """The model trained under ``defense`` for this configuration (cached per process)."""
    return _trained(_training_key(config, defense))


def run_audit(config: dict) -> dict[str, pd.DataFrame]:
    """Compute every table of one run (see the module docstring)."""
    splits = splits_of(config)
    stack = parse_defense(config["defense"])
    context = {"algo": config["algo"], "setting": algorithm_setting(config), "data": config["data"],
               "fold": config["fold"], "seed": config["seed"]}

    base = trained(config)
    defended = trained(config, stack.name) if stack.name != "none" else base
    base_ndcg, _ = _final_ndcg(config, splits, base)
    ndcg, ndcg5 = _final_ndcg(config, splits, defended)
    utility = pd.DataFrame([{**context, "click_model": config["train_click_model"], "defense": stack.name,
                             "ndcg10": ndcg, "ndcg10_delta": ndcg - base_ndcg, "ndcg5": ndcg5}])
    curves = defended.curves.assign(defense=stack.name, algo=context["algo"], setting=context["setting"])

    probe_cfg = config["probe"]
    data = splits.get(probe_cfg["split"])
    attack_rows, query_rows = [], []
    for click_model in probe_cfg["click_models"]:
        algorithm = build_algorithm(config, splits, click_model)
        batches = probe(algorithm, base.params, data, seed=config["seed"],
                        queries_per_client=probe_cfg["queries_per_client"], cohort_size=probe_cfg["cohort"],
                        client_defenses=stack.client, aggregator=stack.aggregator)
        for name in config["attacks"]:
            attack = make_attack(name, **_attack_params(name, config, algorithm))
            per_query = pd.concat(
                [score_guess(attack.guess(b.view), b, min_shown=probe_cfg["min_shown"],
                             require_click=probe_cfg["require_click"]) for b in batches],
                ignore_index=True,
            )
            threat = "server (aggregate only)" if batches[0].view.messages is None else "server"
            for row in summarize(per_query):
                attack_rows.append({**context, "click_model": click_model, "defense": stack.name,
                                    "threat_model": threat, "attack": name, "probe_cohort": probe_cfg["cohort"],
                                    **row})
            query_rows.append(per_query.assign(click_model=click_model, defense=stack.name, attack=name))

    tables = {
        "utility": utility,
        "curves": curves,
        "attacks": pd.DataFrame(attack_rows),
        "per_query": pd.concat(query_rows, ignore_index=True) if query_rows else pd.DataFrame(),
    }
    if config.get("epsilon_audit", True):
        audit_row = _audit_defense(config, splits, stack, base)
        if audit_row is None:
            audit_row = _audit_metric(config, splits, stack, base)
        if audit_row is not None:
            tables["audits"] = pd.DataFrame([{**context, "defense": stack.name, **audit_row}])
        rr = _randomized_response(stack)
        if rr is not None:
            tables["epsilon"] = pd.DataFrame(epsilon_rows(probe_cfg["click_models"], [rr.p],
                                                          levels=splits.train.n_levels))
    return tables


def algorithm_setting(config: dict) -> str:
    """The algorithm's own parameters as one short label (e.g. ``gamma=0.5``), so that tables
    keep runs of different settings of one algorithm apart; empty for the defaults."""
    parts = [f"{k}={v}" for k, v in sorted((config.get("params") or {}).items())]
    if config.get("ranker", "linear") != "linear":
        parts.insert(0, f"ranker={config['ranker']}")
    return ",".join(parts)


def _randomized_response(stack: DefenseStack) -> Any:
    """The stack's transform of FOLtR-ES metric values (randomized response), if any: the client
    defense that declares ``privatizes = "metric"`` (vector defenses may leave it out)."""
    found = [d for d in stack.client if getattr(d, "privatizes", "vector") == "metric"]
    return found[0] if found else None


def _audit_metric(config: dict, splits: Any, stack: DefenseStack, base: TrainResult) -> dict | None:
    """Empirical epsilon of a FOLtR-ES metric message: the query-distinguishing attack on the
    worst-case pair of relevance placements of the exact enumeration (FOLtR-ES §4, Eq. 9)."""
    if algorithms.algorithm_spec(config["algo"]).message_kind != "seed+metric":
        return None
    algorithm = build_algorithm(config, splits, config["train_click_model"])
    row = audit_query_distinguishing(_randomized_response(stack), algorithm.click_model,
                                     n_trials=config.get("audit_trials", 10000), seed=config["seed"], k=algorithm.k)
    row["mechanism"] = stack.name
    return {key: row[key] for key in AUDIT_COLUMNS}


def _attack_params(name: str, config: dict, algorithm: Any) -> dict:
    """What an attack needs beyond the server view (its declared ``needs``: its own seed, the
    public algorithm, the list length k), and the distance heuristics' threshold."""
    available = {"seed": config["seed"], "algorithm": algorithm, "k": algorithm.k}
    params = {need: available[need] for need in attack_needs(name) if need in available}
    if name.startswith("distance"):
        # Pham's threshold 5 is half of a 10-document list; FedIPS shows K = 5
        params["threshold"] = algorithm.k // 2
    return params


def _final_ndcg(config: dict, splits: Any, result: TrainResult) -> tuple[float, float]:
    """Offline nDCG@10 and nDCG@5 of a trained model on the test split."""
    algorithm = build_algorithm(config, splits, config["train_click_model"])
    scores = algorithm.ranker.score(result.params, splits.test.features)
    return float(metrics.mean_ndcg(scores, splits.test, k=10)), float(metrics.mean_ndcg(scores, splits.test, k=5))


def _audit_defense(config: dict, splits: Any, stack: DefenseStack, base: TrainResult) -> dict | None:
    """Empirical epsilon of the stack on one client's vector message (None for seed+metric)."""
    algorithm = build_algorithm(config, splits, config["train_click_model"])
    data = splits.get(config["probe"]["split"])
    qpc = config["probe"]["queries_per_client"]
    first = data.subset(np.arange(min(AUDIT_POOL * qpc, data.n_queries)))  # one undefended cohort suffices
    batches = probe(algorithm, base.params, first, seed=config["seed"], queries_per_client=qpc,
                    cohort_size=AUDIT_POOL)
    messages = batches[0].view.messages
    if messages is None or messages.vector is None:
        return None
    g = np.asarray(base.params, dtype=np.float64)
    pool = messages.updates(g)
    u0, u1 = _farthest_pair(pool)
    kind = messages.vector_kind
    cohort = int(config["probe"]["cohort"])
    hides = stack.aggregator.aggregate(messages, batches[0].view.participants, np.random.default_rng(0)).messages is None

    def defended(updates: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        msgs = Messages(n_interactions=np.ones(len(updates), dtype=np.int64), vector_kind=kind,
                        vector=updates + g if kind == "weights" else updates.copy())
        for defense in stack.client:
            msgs = defense.apply(msgs, g, rng)
        return msgs.updates(g)

    def mechanism(rng: np.random.Generator, n_trials: int, which: int) -> np.ndarray:
        target = (u0, u1)[which]
        out = np.empty((n_trials, len(g)))
        if not hides:
            # every row of a cohort is one independent trial of the client-side transforms
            for start in range(0, n_trials, cohort):
                rows = min(cohort, n_trials - start)
                batch = defended(np.repeat(target[None, :], cohort, axis=0), rng)
                out[start:start + rows] = batch[:rows]
            return out
        for t in range(n_trials):
            others = pool[rng.integers(0, len(pool), size=cohort - 1)]
            out[t] = defended(np.vstack([target[None, :], others]), rng).mean(axis=0)
        return out

    if hides:
        statistic = projection_statistic(u0 / cohort, u1 / cohort)
    else:
        statistic = projection_statistic(u0, u1)
    result = empirical_audit(mechanism, statistic, claim=stack.claim, n_trials=config.get("audit_trials", 10000), seed=config["seed"],
                             threat_model="server (aggregate only)" if hides else "server",
                             mechanism_name=stack.name, attack_name="projection")
    return {key: value for key, value in result.as_dict().items() if key in AUDIT_COLUMNS}


def _farthest_pair(updates: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The two rows of ``updates`` farthest apart in L2 (the strongest neighbouring pair on hand)."""
    sq = (updates**2).sum(1)
    dist = sq[:, None] + sq[None, :] - 2 * updates @ updates.T
    i, j = np.unravel_index(np.argmax(dist), dist.shape)
    return updates[i], updates[j]
