"""``fltr-audit train foltr-es``, ``fltr-audit train baselines`` and ``fltr-audit bench foltr-es``."""

from __future__ import annotations

import resource
import time
from functools import partial
from pathlib import Path
from typing import Any, Optional

import numpy as np
import typer

from fltr_audit.engine import metrics
from fltr_audit.engine.algorithms.foltr_es import FOLtRES
from fltr_audit.engine.algorithms.supervised import fit_mse, fit_ranksvm
from fltr_audit.cli.app import bench_app, train_app
from fltr_audit.engine.randomness import check_seed
from fltr_audit.cli.common import (atomic_out_dir, emit_json, parse_list, print_figures, print_table, progress,
                                   round_reporter, warm_up, write_run)
from fltr_audit.engine.clicks import CCM_NAMES, cascade_model
from fltr_audit.engine.data.load import load_splits
from fltr_audit.constraints import POSITIVE_INT, check
from fltr_audit.engine.federation import check_population, check_threat_model, train
from fltr_audit.engine.interceptors import RecordingInterceptor, parse_rounds
from fltr_audit.engine.maxrr import mean_expected_maxrr
from fltr_audit.runs.robustness import POISON_HELP
from fltr_audit.engine.population import NON_IID_HELP, check_per_user_clicks, parse_non_iid
from fltr_audit.engine.rankers import LinearRanker, make_ranker


def run_foltr_es(*, data: str, fold: int, click_model: str, clients: int, queries_per_client: int, rounds: int,
                 sigma: float, lr: float, antithetic: bool, ranker: str, defense: str, seed: int, out: Path,
                 eval_every: int, eval_split: str, normalization: str, replace: bool, flawed_seeding: bool,
                 record_rounds: Optional[str], threat_model: str, quiet: bool,
                 population: Optional[int] = None, non_iid: str = "iid", poison: str = "none") -> dict:
    """Train FOLtR-ES; write ``curves.csv``, ``model.npy``, ``config.json`` (and a recording) into ``out``.

    The curves hold, per round, the mean batch MaxRR users experienced (non-privatized), and
    at evaluation rounds the expected MaxRR of the global model on the train and evaluation
    splits (§6.3) and its offline nDCG@10 on the evaluation split.
    """
    from defenses.accounting import ParticipationSchedule, privacy_spent
    from defenses.stack import parse_defense  # the CLI is the composition root

    from fltr_audit.runs.robustness import check_robustness, prepared

    stack = parse_defense(defense)
    poison_spec = check_robustness(poison, "foltr-es", stack, clients)
    check_threat_model(threat_model)
    check_seed(seed)
    parse_list(eval_split, "--eval-split", ("vali", "test"))
    check_population(population, clients)
    users = parse_non_iid(non_iid)
    check_per_user_clicks(users, FOLtRES)
    keep = record_rounds is not None and parse_rounds(record_rounds, rounds)
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
    with atomic_out_dir(out) as tmp:
        interceptors = [RecordingInterceptor(tmp / "recording", record_rounds, algorithm="foltr-es",
                                                   defense=stack.name)] if keep else []
        with progress(rounds, "foltr-es round", quiet) as bar:
            on_round = round_reporter(bar, "foltr-es round", rounds, "batch_maxrr", "batch MaxRR")
            res = train(alg, splits.train, clients=clients, queries_per_client=queries_per_client, rounds=rounds,
                        seed=seed, eval_data=eval_data, eval_every=eval_every, evaluators=evaluators,
                        client_defenses=stack.client, aggregator=stack.aggregator, interceptors=interceptors,
                        threat_model=threat_model, on_round=on_round, replace=replace, population=population,
                        non_iid=users, poisoning=poisoning)
        config = {**res.config, "data": data, "fold": fold, "normalization": normalization, "eval_split": eval_split,
                  "defense": stack.name, "record_rounds": record_rounds, "n_features": splits.train.n_features,
                  "n_levels": splits.train.n_levels}
        write_run(tmp, res.curves, res.params, config)
    last = res.curves.iloc[-1]
    return {"out": str(out), "algorithm": "foltr-es", "ranker": ranker, "click_model": click_model,
            "defense": stack.name, **({"poison": poison_spec.text} if poison_spec is not None else {}),
            "first_batch_maxrr": float(res.curves["batch_maxrr"].iloc[0]),
            "final_batch_maxrr": float(last["batch_maxrr"]),
            "expected_maxrr_train": float(last["expected_maxrr_train"]),
            f"expected_maxrr_{eval_split}": float(last[f"expected_maxrr_{eval_split}"]),
            "final_offline_ndcg10": float(last["offline_ndcg10"]), "n_interactions": res.n_interactions,
            "seconds": res.seconds,
            "interactions_per_second": res.n_interactions / res.seconds if res.seconds > 0 else float("nan"),
            "privacy": privacy_spent(stack, ParticipationSchedule.of_run(seed, rounds, clients, population)).as_dict()}


@train_app.command("foltr-es", help="FOLtR-ES: evolution strategies with seed + MaxRR messages (Kharitonov 2019).")
def train_foltr_es(
    data: str = typer.Option(..., "--data", help="Folder with Fold1..5, a LETOR file, or synthetic:PROFILE."),
    fold: int = typer.Option(1, "--fold", help="Fold 1..5."),
    click_model: str = typer.Option("perfect", "--click-model", help="perfect | navigational | informational."),
    clients: int = typer.Option(2000, "--clients", help="Clients per round."),
    queries_per_client: int = typer.Option(4, "--queries-per-client", help="B, interactions per message."),
    rounds: int = typer.Option(100, "--rounds", help="Global rounds (Adam steps)."),
    sigma: float = typer.Option(0.01, "--sigma", help="Perturbation scale."),
    lr: float = typer.Option(0.001, "--lr", help="Adam learning rate."),
    antithetic: bool = typer.Option(True, "--antithetic/--no-antithetic", help="Antithetic variates (B/2 each way)."),
    ranker: str = typer.Option("linear", "--ranker", help="linear | mlp."),
    defense: str = typer.Option("none", "--defense", help='Client defense stack, e.g. "rr(p=0.9)".'),
    seed: int = typer.Option(0, "--seed", help="Run seed."),
    out: Path = typer.Option(..., "--out", help="Output directory (created; must not hold files)."),
    eval_every: int = typer.Option(1, "--eval-every", help="Evaluate the global model every K rounds (and the last)."),
    eval_split: str = typer.Option("test", "--eval-split", help="Held-out split: vali | test."),
    normalization: str = typer.Option("none", "--normalization", help="none | query-minmax | zscore."),
    replace: bool = typer.Option(True, "--replace/--no-replace",
                                 help="Users sample queries uniformly with replacement (the paper's setup)."),
    flawed_seeding: bool = typer.Option(False, "--flawed-seeding",
                                        help="Reproduce the published client's reseeding with its public seed."),
    record_rounds: Optional[str] = typer.Option(None, "--record-rounds", help="Rounds to record: 1,50,100 or every:10."),
    threat_model: str = typer.Option("server", "--threat-model", help="What recorded views keep: server | server-blind."),
    population: Optional[int] = typer.Option(
        None, "--population", help="N persistent users; each round's cohort of --clients is drawn from them "
                                   "(default: the same --clients users every round)."),
    non_iid: str = typer.Option("iid", "--non-iid", help=NON_IID_HELP),
    poison: str = typer.Option("none", "--poison", help=POISON_HELP),
    json_out: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bar."),
) -> None:
    result = run_foltr_es(data=data, fold=fold, click_model=click_model, clients=clients,
                          queries_per_client=queries_per_client, rounds=rounds, sigma=sigma, lr=lr,
                          antithetic=antithetic, ranker=ranker, defense=defense, seed=seed, out=out,
                          eval_every=eval_every, eval_split=eval_split, normalization=normalization, replace=replace,
                          flawed_seeding=flawed_seeding, record_rounds=record_rounds, threat_model=threat_model,
                          quiet=quiet, population=population, non_iid=non_iid, poison=poison)
    if json_out:
        emit_json(result)
        return
    typer.echo(f"foltr-es {ranker} [{result['defense']}, {click_model}]: batch MaxRR "
               f"{result['first_batch_maxrr']:.4f} -> {result['final_batch_maxrr']:.4f}; expected MaxRR train "
               f"{result['expected_maxrr_train']:.4f}, {eval_split} {result[f'expected_maxrr_{eval_split}']:.4f}; "
               f"offline nDCG@10 {result['final_offline_ndcg10']:.4f}; {result['n_interactions']:,} interactions in "
               f"{result['seconds']:.1f} s ({result['interactions_per_second']:,.0f}/s) -> {result['out']}")


@train_app.command("baselines", help="MSE and RankingSVM (FOLtR-ES §5): expected MaxRR and nDCG@10 on train and test.")
def train_baselines(
    data: str = typer.Option(..., "--data", help="Folder with Fold1..5, a LETOR file, or synthetic:PROFILE."),
    fold: int = typer.Option(1, "--fold", help="Fold 1..5."),
    click_models: str = typer.Option("perfect,navigational,informational", "--click-model",
                                     help="Comma-separated click models for expected MaxRR (--click-models: "
                                          "deprecated spelling)."),
    C: float = typer.Option(1000.0, "--svm-c", help="RankingSVM C (--C: deprecated spelling)."),
    max_pairs: int = typer.Option(200_000, "--max-pairs", help="Subsample preference pairs above this many."),
    normalization: str = typer.Option("none", "--normalization", help="none | query-minmax | zscore."),
    seed: int = typer.Option(0, "--seed", help="Seed of pair subsampling and label flips."),
    json_out: bool = typer.Option(False, "--json", help="Print the rows as JSON."),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bar."),
) -> None:
    names = parse_list(click_models, "--click-model", CCM_NAMES)
    check("--max-pairs", max_pairs, POSITIVE_INT)
    splits = load_splits(data, fold, normalization=normalization)
    models = {name: cascade_model(name, splits.train.n_levels) for name in names}
    ranker = LinearRanker(splits.train.n_features)
    rows: list[dict[str, Any]] = []
    with progress(2, "fitting baselines", quiet) as bar:
        for baseline, fit in (("mse", lambda: fit_mse(splits.train)),
                              ("ranksvm", lambda: fit_ranksvm(splits.train, C=C, max_pairs=max_pairs,
                                                              rng=np.random.default_rng(seed)))):
            w = fit()
            for split in ("train", "test"):
                ds = splits.get(split)
                row: dict[str, Any] = {"baseline": baseline, "split": split,
                                       "ndcg10": metrics.mean_ndcg(ds.features @ w, ds, 10)}
                row.update({f"expected_maxrr_{n}": mean_expected_maxrr(ranker, w, ds, m) for n, m in models.items()})
                rows.append(row)
            bar.advance()
    if json_out:
        emit_json({"data": data, "fold": fold, "ndcg_convention": "gain 2^rel-1, queries without relevant "
                   "documents left out", "maxrr_convention": "mean over all queries", "rows": rows})
        return
    shown = [{**{k: r[k] for k in ("baseline", "split", "ndcg10")},
              **{n: r[f"expected_maxrr_{n}"] for n in names}} for r in rows]
    print_table(f"{data} fold {fold}: nDCG@10 and expected MaxRR per click model", shown)


@bench_app.command("foltr-es")
def bench_foltr_es(
    data: str = typer.Option("synthetic:mq2007", "--data", help="Data spec (default: the MQ2007 profile)."),
    fold: int = typer.Option(1, "--fold"),
    clients: int = typer.Option(2000, "--clients"),
    queries_per_client: int = typer.Option(4, "--queries-per-client"),
    rounds: int = typer.Option(100, "--rounds"),
    ranker: str = typer.Option("linear", "--ranker", help="linear | mlp."),
    click_model: str = typer.Option("perfect", "--click-model"),
    seed: int = typer.Option(0, "--seed"),
    json_out: bool = typer.Option(False, "--json", help="Print the figures as JSON."),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bar."),
) -> None:
    """FOLtR-ES speed through the whole federation path (no per-round evaluation)."""
    t0 = time.perf_counter()
    splits = load_splits(data, fold)
    load_seconds = time.perf_counter() - t0
    alg = FOLtRES(make_ranker(ranker, splits.train.n_features), cascade_model(click_model, splits.train.n_levels))
    run = partial(train, alg, splits.train, clients=clients, queries_per_client=queries_per_client, seed=seed,
                  replace=True)
    warm_up_seconds = warm_up(lambda: run(rounds=1))
    with progress(rounds, "bench foltr-es", quiet) as bar:
        res = run(rounds=rounds, on_round=lambda r, row: bar.advance())
    figures: dict[str, Any] = {
        "data": data, "ranker": ranker, "train_queries": splits.train.n_queries, "train_docs": splits.train.n_docs,
        "clients": clients, "queries_per_client": queries_per_client, "rounds": rounds,
        "load_seconds": load_seconds, "warm_up_seconds": warm_up_seconds, "train_seconds": res.seconds,
        "interactions": res.n_interactions,
        "interactions_per_second": res.n_interactions / res.seconds, "seconds_per_round": res.seconds / rounds,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        "final_batch_maxrr": float(res.curves["batch_maxrr"].iloc[-1]), "target_interactions_per_second": 100_000,
    }
    print_figures("bench foltr-es", figures, json_out)
