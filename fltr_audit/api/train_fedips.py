"""``fltr_audit.train_fedips``: FedIPS (Li & Ouyang, Algorithm 1) and its FedAvg baseline, and the
lambda-Linear baseline -- ``fltr-audit train fedips | fedavg | lambda-linear``.

Data are normalized as FedIPS §4: queries whose documents all share one label dropped,
features scaled to [0, 1] per query. Curves record NDCG@5 (the paper's metric, ``ndcg5``)
and nDCG@10 (``offline_ndcg10``) of the global model on the test split.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable, Optional

import pandas as pd

from defenses.accounting import ParticipationSchedule, privacy_spent
from fltr_audit.engine import metrics
from fltr_audit.engine.algorithms.fedips import FedIPS, build_fedips
from fltr_audit.engine.algorithms.lambda_linear import train_lambda_linear
from fltr_audit.engine.data.dataset import Dataset, Splits
from fltr_audit.engine.data.load import load_splits
from fltr_audit.engine.federation import train
from fltr_audit.engine.population import check_per_user_clicks, parse_non_iid
from fltr_audit.engine.rankers import LinearRanker
from fltr_audit.engine.training import TrainHooks, TrainSettings, check_population
from fltr_audit.errors import FltrError
from fltr_audit.runs.robustness import check_robustness, prepared
from fltr_audit.spec.defense import DefenseSpec
from fltr_audit.store.interceptors import RecordingInterceptor, check_record_rounds
from fltr_audit.store.run_folder import run_folder, write_run

OnRound = Callable[[int, dict], None]

PROPENSITY_CHOICES = ("true", "estimated")


def load_fedips_splits(data: str, fold: int, queries: Optional[int] = None, seed: int = 0) -> Splits:
    """The splits of ``data`` prepared as FedIPS §4 (drop single-label queries, per-query min-max)."""
    return load_splits(data, fold, normalization="query-minmax", drop_single_label=True, queries=queries, seed=seed)


def ndcg_evaluators(test: Dataset) -> dict:
    """NDCG@5 (``ndcg5``) of a linear model on ``test``."""
    ranker = LinearRanker(test.n_features)
    return {"ndcg5": lambda p: metrics.mean_ndcg(ranker.score(p, test.features), test, 5)}


def train_fedips(algorithm: str = "fedips", *, data: str, out: str | Path | None = None, fold: int = 1, clients: int = 2000,
                 queries_per_client: int = 5, rounds: int = 100, gamma: float = 1.0, k: int = 5,
                 clicks_per_client: int = 10, lr_local: float = 0.001, lr_global: float = 1.0, propensity: str = "true",
                 defense: str = "none", seed: int = 0, logging_fraction: float = 0.01, em_rounds: int = 20,
                 queries: Optional[int] = None, eval_every: int = 1, record_rounds: Optional[str] = None,
                 population: Optional[int] = None, non_iid: str = "iid", poison: str = "none",
                 on_round: OnRound | None = None) -> dict:
    """Train FedIPS or its FedAvg baseline (``algorithm``); write ``curves.csv``, ``model.npy``,
    ``config.json`` (and a recording) into ``out``."""
    if algorithm == "fedavg" and propensity != "true":
        raise FltrError("--propensity: fedavg uses no propensities (all 1); drop the option")
    stack = DefenseSpec.parse(defense).build()
    poison_spec = check_robustness(poison, algorithm, stack, clients)
    out = None if out is None else Path(out)
    check_population(population, clients)
    users = parse_non_iid(non_iid)
    check_per_user_clicks(users, FedIPS)
    check_record_rounds(record_rounds, rounds, out)  # bad input fails before any data is loaded
    splits = load_fedips_splits(data, fold, queries, seed)
    if propensity not in PROPENSITY_CHOICES:
        raise FltrError(f"--propensity: unknown value {propensity!r} (choose true or estimated)")
    alg = build_fedips(splits.train, propensity="none" if algorithm == "fedavg" else propensity, gamma=gamma, k=k,
                       clicks_per_client=clicks_per_client, lr_local=lr_local, lr_global=lr_global, seed=seed,
                       logging_fraction=logging_fraction, em_rounds=em_rounds, clients=clients,
                       queries_per_client=queries_per_client)
    evaluators = ndcg_evaluators(splits.test)
    f0_ndcg5 = evaluators["ndcg5"](alg.policy.params)
    replace = clients * queries_per_client > splits.train.n_queries
    poisoning, stack = prepared(poison_spec, stack, alg, splits.train, queries_per_client, seed)
    with run_folder(out) as tmp:
        interceptors = [RecordingInterceptor(tmp / "recording", record_rounds, algorithm=algorithm,
                                                   defense=stack.name)] if record_rounds else []
        res = train(alg, splits.train,
                    TrainSettings(clients=clients, queries_per_client=queries_per_client, rounds=rounds, seed=seed,
                                  eval_every=eval_every, replace=replace, population=population, non_iid=users),
                    eval_data=splits.test, defenses=stack,
                    hooks=TrainHooks(evaluators=evaluators, interceptors=interceptors, on_round=on_round),
                    poisoning=poisoning)
        config = {**res.config, "data": data, "fold": fold, "normalization": "query-minmax",
                  "drop_single_label": True, "defense": stack.name, "queries": queries,
                  "n_features": splits.train.n_features, "n_levels": splits.train.n_levels,
                  "relevant_from": alg.click_model.relevant_from, "logging_policy_ndcg5": f0_ndcg5,
                  "record_rounds": record_rounds}
        write_run(tmp, res.curves, res.params, config)
    last = res.curves.iloc[-1]
    return {"out": None if out is None else str(out), "algorithm": algorithm, "propensity": alg.propensity, "gamma": gamma,
            "defense": stack.name, **({"poison": poison_spec.text} if poison_spec is not None else {}),
            "final_ndcg5": float(last["ndcg5"]),
            "final_offline_ndcg10": float(last["offline_ndcg10"]), "logging_policy_ndcg5": f0_ndcg5,
            "clicks_per_client": float(res.curves["clicks_per_client"].mean()),
            "n_interactions": res.n_interactions, "seconds": res.seconds,
            "privacy": privacy_spent(stack, ParticipationSchedule.of_run(seed, rounds, clients, population)).as_dict()}


def train_lambda_linear_baseline(*, data: str, out: str | Path | None = None, fold: int = 1, rounds: int = 20, lr: float = 0.1,
                                 batch_queries: int = 64, seed: int = 0, queries: Optional[int] = None,
                                 on_round: OnRound | None = None) -> dict:
    """Linear LambdaRank with full information on the labels (the lambda-Linear baseline of FedIPS)
    into ``out``."""
    out = None if out is None else Path(out)
    splits = load_fedips_splits(data, fold, queries, seed)
    test = splits.test
    ranker = LinearRanker(test.n_features)
    evaluators = {**ndcg_evaluators(test),
                  "offline_ndcg10": lambda p: metrics.mean_ndcg(ranker.score(p, test.features), test, 10)}
    with run_folder(out) as tmp:
        start = time.perf_counter()
        res = train_lambda_linear(splits.train, epochs=rounds, lr=lr, batch_queries=batch_queries, seed=seed,
                                  evaluators=evaluators, on_epoch=on_round)
        seconds = time.perf_counter() - start
        curves = pd.DataFrame(res.history).rename(columns={"epoch": "round"})
        config = {"algorithm": "lambda-linear", "data": data, "fold": fold, "epochs": rounds, "lr": lr,
                  "batch_queries": batch_queries, "seed": seed, "queries": queries, "normalization": "query-minmax",
                  "drop_single_label": True, "n_features": test.n_features}
        write_run(tmp, curves, res.params, config)
    result = {"out": None if out is None else str(out), "algorithm": "lambda-linear", "final_ndcg5": float(curves["ndcg5"].iloc[-1]),
              "final_offline_ndcg10": float(curves["offline_ndcg10"].iloc[-1]), "seconds": seconds}
    return result
