"""``fltr_audit.train_foltr_es`` and ``fltr_audit.train_baselines``: FOLtR-ES (Kharitonov 2019) into an
output folder, and its MSE and RankingSVM baselines (FOLtR-ES §5) -- ``fltr-audit train foltr-es`` and
``train baselines``."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import numpy as np

from defenses.accounting import ParticipationSchedule, privacy_spent
from fltr_audit.constraints import POSITIVE_INT, Options, check
from fltr_audit.engine import metrics
from fltr_audit.engine.algorithms.foltr_es import FOLtRES
from fltr_audit.engine.algorithms.supervised import fit_mse, fit_ranksvm
from fltr_audit.engine.clicks import CCM_NAMES, cascade_model
from fltr_audit.engine.data.load import load_splits
from fltr_audit.engine.federation import train
from fltr_audit.engine.maxrr import mean_expected_maxrr
from fltr_audit.engine.population import check_per_user_clicks, parse_non_iid
from fltr_audit.engine.randomness import check_seed
from fltr_audit.engine.rankers import LinearRanker, make_ranker
from fltr_audit.engine.training import TrainHooks, TrainSettings, check_population, check_threat_model
from fltr_audit.runs.robustness import check_robustness, prepared
from fltr_audit.runs.progress import NO_PROGRESS, Progress
from fltr_audit.spec.defense import DefenseSpec
from fltr_audit.store.interceptors import RecordingInterceptor, check_record_rounds
from fltr_audit.store.run_folder import run_folder, write_run

OnRound = Callable[[int, dict], None]


def train_foltr_es(*, data: str, out: str | Path | None = None, fold: int = 1, click_model: str = "perfect", clients: int = 2000,
                   queries_per_client: int = 4, rounds: int = 100, sigma: float = 0.01, lr: float = 0.001,
                   antithetic: bool = True, ranker: str = "linear", defense: str = "none", seed: int = 0,
                   eval_every: int = 1, eval_split: str = "test", normalization: str = "none", replace: bool = True,
                   flawed_seeding: bool = False, record_rounds: Optional[str] = None, threat_model: str = "server",
                   population: Optional[int] = None, non_iid: str = "iid", poison: str = "none",
                   on_round: OnRound | None = None) -> dict:
    """Train FOLtR-ES; write ``curves.csv``, ``model.npy``, ``config.json`` (and a recording) into ``out``.

    The curves hold, per round, the mean batch MaxRR users experienced (non-privatized), and
    at evaluation rounds the expected MaxRR of the global model on the train and evaluation
    splits (§6.3) and its offline nDCG@10 on the evaluation split.
    """
    stack = DefenseSpec.parse(defense).build()
    poison_spec = check_robustness(poison, "foltr-es", stack, clients)
    out = None if out is None else Path(out)
    check_threat_model(threat_model)
    check_seed(seed)
    check("eval_split", eval_split, (Options(("vali", "test")),))
    check_population(population, clients)
    users = parse_non_iid(non_iid)
    check_per_user_clicks(users, FOLtRES)
    check_record_rounds(record_rounds, rounds, out)
    keep = record_rounds is not None
    splits = load_splits(data, fold, normalization=normalization)
    eval_data = splits.get(eval_split)
    clicks = cascade_model(click_model, splits.train.n_levels)
    model = make_ranker(ranker, splits.train.n_features)
    alg = FOLtRES(model, clicks, sigma=sigma, lr=lr, antithetic=antithetic, flawed_seeding=flawed_seeding)
    evaluators = {
        "expected_maxrr_train": lambda p: mean_expected_maxrr(model, p, splits.train, clicks),
        f"expected_maxrr_{eval_split}": lambda p: mean_expected_maxrr(model, p, eval_data, clicks),
    }
    poisoning, stack = prepared(poison_spec, stack, alg, splits.train, queries_per_client, seed)
    with run_folder(out) as tmp:
        interceptors = [RecordingInterceptor(tmp / "recording", record_rounds, algorithm="foltr-es",
                                                   defense=stack.name)] if keep else []
        res = train(alg, splits.train,
                    TrainSettings(clients=clients, queries_per_client=queries_per_client, rounds=rounds, seed=seed,
                                  eval_every=eval_every, threat_model=threat_model, replace=replace,
                                  population=population, non_iid=users),
                    eval_data=eval_data, defenses=stack,
                    hooks=TrainHooks(evaluators=evaluators, interceptors=interceptors, on_round=on_round),
                    poisoning=poisoning)
        config = {**res.config, "data": data, "fold": fold, "normalization": normalization, "eval_split": eval_split,
                  "defense": stack.name, "record_rounds": record_rounds, "n_features": splits.train.n_features,
                  "n_levels": splits.train.n_levels}
        write_run(tmp, res.curves, res.params, config)
    last = res.curves.iloc[-1]
    return {"out": None if out is None else str(out), "algorithm": "foltr-es", "ranker": ranker, "click_model": click_model,
            "defense": stack.name, **({"poison": poison_spec.text} if poison_spec is not None else {}),
            "first_batch_maxrr": float(res.curves["batch_maxrr"].iloc[0]),
            "final_batch_maxrr": float(last["batch_maxrr"]),
            "expected_maxrr_train": float(last["expected_maxrr_train"]),
            f"expected_maxrr_{eval_split}": float(last[f"expected_maxrr_{eval_split}"]),
            "final_offline_ndcg10": float(last["offline_ndcg10"]), "n_interactions": res.n_interactions,
            "seconds": res.seconds,
            "interactions_per_second": res.n_interactions / res.seconds if res.seconds > 0 else float("nan"),
            "privacy": privacy_spent(stack, ParticipationSchedule.of_run(seed, rounds, clients, population),
                                    queries_per_client=queries_per_client).as_dict()}


def train_baselines(*, data: str, fold: int = 1, click_models: Sequence[str] = CCM_NAMES, svm_c: float = 1000.0,
                    max_pairs: int = 200_000, normalization: str = "none", seed: int = 0,
                    progress: Progress = NO_PROGRESS) -> list[dict]:
    """MSE and RankingSVM (FOLtR-ES §5): one row per baseline and split (train, test) with nDCG@10
    and the expected MaxRR under each click model."""
    for name in click_models:
        check("click_model", name, (Options(CCM_NAMES),))
    names = list(click_models)
    check("max_pairs", max_pairs, POSITIVE_INT)
    splits = load_splits(data, fold, normalization=normalization)
    models = {name: cascade_model(name, splits.train.n_levels) for name in names}
    ranker = LinearRanker(splits.train.n_features)
    rows: list[dict[str, Any]] = []
    for baseline, fit in (("mse", lambda: fit_mse(splits.train)),
                          ("ranksvm", lambda: fit_ranksvm(splits.train, C=svm_c, max_pairs=max_pairs,
                                                          rng=np.random.default_rng(seed)))):
        w = fit()
        for split in ("train", "test"):
            ds = splits.get(split)
            row: dict[str, Any] = {"baseline": baseline, "split": split,
                                   "ndcg10": metrics.mean_ndcg(ds.features @ w, ds, 10)}
            row.update({f"expected_maxrr_{n}": mean_expected_maxrr(ranker, w, ds, m) for n, m in models.items()})
            rows.append(row)
        progress.advance()
    return rows
