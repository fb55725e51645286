"""The per-process caches of one audit run's inputs: the data splits, the algorithm for each click
model, the trained models (the base model trained without defense, and under each defense) and
their final offline nDCG. Keyed by the spec's frozen data and algorithm parts, the seed and the
defense's canonical name, so the runs of one campaign that differ only by defense train the base
model once per worker; every model is trained from a fresh defense stack."""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from functools import lru_cache
from typing import Any

from defenses.robust.binding import bind_run
from defenses.robust.compose import rule_of
from defenses.stack import DefenseStack
from fltr_audit.engine import metrics
from fltr_audit.engine.algorithms import registry as algorithms
from fltr_audit.engine.data.load import load_splits
from fltr_audit.engine.federation import TrainResult, train
from fltr_audit.engine.interfaces import Algorithm
from fltr_audit.engine.population import parse_non_iid
from fltr_audit.engine.training import TrainSettings
from fltr_audit.runs.robustness import check_robustness, prepared
from fltr_audit.spec.defense import NO_DEFENSE, DefenseSpec
from fltr_audit.spec.run import AlgorithmSettings, DataSettings, RunSpec


def build_algorithm(config: RunSpec, splits: Any, click_model: str) -> Algorithm:
    """The algorithm a run configuration names, with the given click model (cached per process)."""
    return _algorithm(config.data, config.algorithm, config.seed, click_model)


@lru_cache(maxsize=32)
def _algorithm(data: DataSettings, algo: AlgorithmSettings, seed: int, click_model: str) -> Algorithm:
    settings = {"ranker": algo.ranker, "seed": seed, "clients": algo.clients,
                "queries_per_client": algo.queries_per_client, "params": algo.kwargs()}
    return algorithms.build(algo.name, _splits(data, seed), click_model, settings)


@lru_cache(maxsize=8)
def _splits(data: DataSettings, seed: int) -> Any:
    return load_splits(data.spec, data.fold, normalization=data.normalization, queries=data.queries, seed=seed)


def splits_of(config: RunSpec) -> Any:
    return _splits(config.data, config.seed)


_TRAINED: OrderedDict[tuple, TrainResult] = OrderedDict()
_TRAINED_MAX = 16


def trained(config: RunSpec, defense: DefenseSpec = NO_DEFENSE) -> TrainResult:
    """The model trained under ``defense`` (default: none) for this configuration, from a fresh
    stack (cached per process, keyed by the training settings and the defense's canonical name)."""
    key = (config.data, config.algorithm, config.seed, defense.name)
    if key in _TRAINED:
        _TRAINED.move_to_end(key)
        return _TRAINED[key]
    result = _train(config, defense.build())
    _TRAINED[key] = result
    while len(_TRAINED) > _TRAINED_MAX:
        _TRAINED.popitem(last=False)
    return result


def run_stack(config: RunSpec, splits: Any, defense: DefenseSpec | None = None) -> DefenseStack:
    """A fresh stack of ``defense`` (default: the run's) bound to the run (``defenses.robust.binding``:
    fltrust's root set, FOLtR-ES's message decoder)."""
    algo = config.algorithm
    return bind_run((defense or config.defense).build(), build_algorithm(config, splits, algo.train_click_model),
                    splits.train, algo.queries_per_client, config.seed)


def without_poison(config: RunSpec) -> RunSpec:
    """The run without its poisoning (the base model the probe attacks is the same with and without one)."""
    return config if config.algorithm.poison is None else \
        config.replace(algorithm=dataclasses.replace(config.algorithm, poison=None))


def _train(config: RunSpec, stack: DefenseStack) -> TrainResult:
    splits = splits_of(config)
    algo = config.algorithm
    algorithm = build_algorithm(config, splits, algo.train_click_model)
    poison = check_robustness(None if algo.poison is None else algo.poison.text, algo.name, stack, algo.clients)
    poisoning, stack = prepared(poison, stack, algorithm, splits.train, algo.queries_per_client, config.seed)
    result = train(algorithm, splits.train,
                   TrainSettings(clients=algo.clients, queries_per_client=algo.queries_per_client, rounds=algo.rounds,
                                 seed=config.seed, eval_every=max(1, algo.rounds // 20),
                                 replace=algo.clients * algo.queries_per_client > splits.train.n_queries,
                                 population=algo.population, non_iid=parse_non_iid(algo.non_iid)),
                   eval_data=splits.test, defenses=stack, poisoning=poisoning)
    rule = rule_of(stack.aggregator)
    if rule is not None:  # cohorts too small for the rule (Krum's 2f + 3) run with its fallback, counted
        result.config["aggregator_fallbacks"] = rule.fallbacks
    return result


def final_ndcg(config: RunSpec, splits: Any, result: TrainResult) -> tuple[float, float]:
    """Offline nDCG@10 and nDCG@5 of a trained model on the test split."""
    algorithm = build_algorithm(config, splits, config.algorithm.train_click_model)
    scores = algorithm.ranker.score(result.params, splits.test.features)
    return float(metrics.mean_ndcg(scores, splits.test, k=10)), float(metrics.mean_ndcg(scores, splits.test, k=5))
