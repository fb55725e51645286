"""``fltr-audit train fedips|fedavg|lambda-linear`` and ``fltr-audit bench fedips`` (FedIPS paper).

Data are normalized as FedIPS §4: queries whose documents all share one label dropped,
features scaled to [0, 1] per query. Curves record NDCG@5 (the paper's metric, ``ndcg5``)
and nDCG@10 (``offline_ndcg10``) of the global model on the test split.
"""

from __future__ import annotations

import resource
import time
from functools import partial
from pathlib import Path
from typing import Any, Optional

import pandas as pd
import typer

from fltr_audit.engine import metrics
from fltr_audit.engine.algorithms.fedips import FedIPS, build_fedips
from fltr_audit.engine.algorithms.lambda_linear import train_lambda_linear
from fltr_audit.cli.app import bench_app, train_app
from fltr_audit.cli.common import atomic_out_dir, emit_json, print_figures, progress, round_reporter, warm_up, write_run
from fltr_audit.engine.data.dataset import Dataset, Splits
from fltr_audit.engine.data.load import load_splits
from fltr_audit.errors import FltrError
from fltr_audit.engine.federation import check_population, train
from fltr_audit.runs.robustness import POISON_HELP
from fltr_audit.engine.population import NON_IID_HELP, check_per_user_clicks, parse_non_iid
from fltr_audit.engine.rankers import LinearRanker

PROPENSITY_CHOICES = ("true", "estimated")


def load_fedips_splits(data: str, fold: int, queries: Optional[int] = None, seed: int = 0) -> Splits:
    """The splits of ``data`` prepared as FedIPS §4 (drop single-label queries, per-query min-max)."""
    return load_splits(data, fold, normalization="query-minmax", drop_single_label=True, queries=queries, seed=seed)


def ndcg_evaluators(test: Dataset) -> dict:
    """NDCG@5 (``ndcg5``) of a linear model on ``test``."""
    ranker = LinearRanker(test.n_features)
    return {"ndcg5": lambda p: metrics.mean_ndcg(ranker.score(p, test.features), test, 5)}


def run_fedips(algorithm: str, *, data: str, fold: int, clients: int, queries_per_client: int, rounds: int,
               gamma: float, k: int, clicks_per_client: int, lr_local: float, lr_global: float, propensity: str,
               defense: str, seed: int, out: Path, logging_fraction: float, em_rounds: int, queries: Optional[int],
               eval_every: int, record_rounds: Optional[str], quiet: bool, population: Optional[int] = None,
               non_iid: str = "iid", poison: str = "none") -> dict:
    """Train FedIPS or FedAvg; write ``curves.csv``, ``model.npy``, ``config.json`` (and a recording) into ``out``."""
    from defenses.accounting import ParticipationSchedule, privacy_spent
    from defenses.stack import parse_defense  # the CLI is the composition root
    from fltr_audit.engine.interceptors import RecordingInterceptor, parse_rounds
    from fltr_audit.runs.robustness import check_robustness, prepared

    stack = parse_defense(defense)
    poison_spec = check_robustness(poison, algorithm, stack, clients)
    check_population(population, clients)
    users = parse_non_iid(non_iid)
    check_per_user_clicks(users, FedIPS)
    if record_rounds is not None:
        parse_rounds(record_rounds, rounds)
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
    with atomic_out_dir(out) as tmp:
        interceptors = [RecordingInterceptor(tmp / "recording", record_rounds, algorithm=algorithm,
                                                   defense=stack.name)] if record_rounds else []
        with progress(rounds, f"{algorithm} round", quiet) as bar:
            on_round = round_reporter(bar, f"{algorithm} round", rounds, "ndcg5", "NDCG@5")
            res = train(alg, splits.train, clients=clients, queries_per_client=queries_per_client, rounds=rounds,
                        seed=seed, eval_data=splits.test, eval_every=eval_every, evaluators=evaluators,
                        client_defenses=stack.client, aggregator=stack.aggregator, interceptors=interceptors,
                        on_round=on_round, replace=replace, population=population, non_iid=users,
                        poisoning=poisoning)
        config = {**res.config, "data": data, "fold": fold, "normalization": "query-minmax",
                  "drop_single_label": True, "defense": stack.name, "queries": queries,
                  "n_features": splits.train.n_features, "n_levels": splits.train.n_levels,
                  "relevant_from": alg.click_model.relevant_from, "logging_policy_ndcg5": f0_ndcg5,
                  "record_rounds": record_rounds}
        write_run(tmp, res.curves, res.params, config)
    last = res.curves.iloc[-1]
    return {"out": str(out), "algorithm": algorithm, "propensity": alg.propensity, "gamma": gamma,
            "defense": stack.name, **({"poison": poison_spec.text} if poison_spec is not None else {}),
            "final_ndcg5": float(last["ndcg5"]),
            "final_offline_ndcg10": float(last["offline_ndcg10"]), "logging_policy_ndcg5": f0_ndcg5,
            "clicks_per_client": float(res.curves["clicks_per_client"].mean()),
            "n_interactions": res.n_interactions, "seconds": res.seconds,
            "privacy": privacy_spent(stack, ParticipationSchedule.of_run(seed, rounds, clients, population)).as_dict()}


def _fedips_command(algorithm: str):
    def command(
        data: str = typer.Option(..., "--data", help="Folder with Fold1..5, a LETOR file, or synthetic:PROFILE."),
        fold: int = typer.Option(1, "--fold", help="Fold 1..5."),
        clients: int = typer.Option(2000, "--clients", help="Clients per round (|U|)."),
        queries_per_client: int = typer.Option(5, "--queries-per-client", help="B, distinct queries per client and round."),
        rounds: int = typer.Option(100, "--rounds", help="Global rounds."),
        gamma: float = typer.Option(1.0, "--gamma", help="Mean position bias; gamma_u ~ N(gamma, 0.1) truncated at 0."),
        k: int = typer.Option(5, "--k", help="K, documents shown per query (top K of f_0)."),
        clicks_per_client: int = typer.Option(10, "--clicks-per-client", help="m, clicks in a client's log per round."),
        lr_local: float = typer.Option(0.001, "--lr-local", help="eta_l, client SGD step."),
        lr_global: float = typer.Option(1.0, "--lr-global", help="eta_g, server step on the mean update."),
        propensity: str = typer.Option("true", "--propensity", help="true | estimated (EM, FedIPS §5); fedips only."),
        defense: str = typer.Option("none", "--defense", help="Defense stack, e.g. clip(sensitivity=5)+secagg."),
        seed: int = typer.Option(0, "--seed", help="Run seed (also the user population and f_0's sample)."),
        out: Path = typer.Option(..., "--out", help="Output directory (created; must not hold files)."),
        logging_fraction: float = typer.Option(0.01, "--logging-fraction", help="Share of training queries f_0 learns from."),
        em_rounds: int = typer.Option(20, "--em-rounds", help="Rounds of federated EM training of F (estimated)."),
        queries: Optional[int] = typer.Option(None, "--queries", help="Synthetic: queries generated; files: keep the first N."),
        eval_every: int = typer.Option(1, "--eval-every", help="Evaluate on test every K rounds (and the last)."),
        record_rounds: Optional[str] = typer.Option(None, "--record-rounds", help="Rounds to record: 1,50,100 or every:10."),
        population: Optional[int] = typer.Option(
            None, "--population", help="N persistent users; each round's cohort of --clients is drawn from them "
                                       "(default: the same --clients users every round)."),
        non_iid: str = typer.Option("iid", "--non-iid", help=NON_IID_HELP),
        poison: str = typer.Option("none", "--poison", help=POISON_HELP),
    json_out: bool = typer.Option(False, "--json", help="Print the result as JSON."),
        quiet: bool = typer.Option(False, "--quiet", help="No progress bar."),
    ) -> None:
        if algorithm == "fedavg" and propensity != "true":
            raise FltrError("--propensity: fedavg uses no propensities (all 1); drop the option")
        result = run_fedips(algorithm, data=data, fold=fold, clients=clients, queries_per_client=queries_per_client,
                            rounds=rounds, gamma=gamma, k=k, clicks_per_client=clicks_per_client, lr_local=lr_local,
                            lr_global=lr_global, propensity=propensity, defense=defense, seed=seed, out=out,
                            logging_fraction=logging_fraction, em_rounds=em_rounds, queries=queries,
                            eval_every=eval_every, record_rounds=record_rounds, quiet=quiet, population=population,
                            non_iid=non_iid, poison=poison)
        if json_out:
            emit_json(result)
        else:
            typer.echo(f"{algorithm} [{result['defense']}, gamma {gamma}]: NDCG@5 {result['final_ndcg5']:.4f} "
                       f"(f_0 {result['logging_policy_ndcg5']:.4f}), nDCG@10 {result['final_offline_ndcg10']:.4f}, "
                       f"{result['seconds']:.1f} s -> {result['out']}")

    return command


train_app.command("fedips", help="FedIPS: IPS-weighted federated counterfactual LTR (Li & Ouyang, Algorithm 1).")(
    _fedips_command("fedips"))
train_app.command("fedavg", help="FedAvg baseline of FedIPS: the same with all propensities 1.")(
    _fedips_command("fedavg"))


@train_app.command("lambda-linear")
def train_lambda(
    data: str = typer.Option(..., "--data", help="Folder with Fold1..5, a LETOR file, or synthetic:PROFILE."),
    fold: int = typer.Option(1, "--fold", help="Fold 1..5."),
    rounds: int = typer.Option(20, "--rounds", help="Epochs over the training queries."),
    lr: float = typer.Option(0.1, "--lr", help="SGD step."),
    batch_queries: int = typer.Option(64, "--batch-queries", help="Queries per minibatch."),
    seed: int = typer.Option(0, "--seed", help="Seed of the query shuffling (and of synthetic data)."),
    out: Path = typer.Option(..., "--out", help="Output directory (created; must not hold files)."),
    queries: Optional[int] = typer.Option(None, "--queries", help="Synthetic: queries generated; files: keep the first N."),
    json_out: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bar."),
) -> None:
    """Linear LambdaRank with full information on the labels (the lambda-Linear baseline of FedIPS)."""
    splits = load_fedips_splits(data, fold, queries, seed)
    test = splits.test
    ranker = LinearRanker(test.n_features)
    evaluators = {**ndcg_evaluators(test),
                  "offline_ndcg10": lambda p: metrics.mean_ndcg(ranker.score(p, test.features), test, 10)}
    with atomic_out_dir(out) as tmp:
        start = time.perf_counter()
        with progress(rounds, "lambda-linear epoch", quiet) as bar:
            res = train_lambda_linear(splits.train, epochs=rounds, lr=lr, batch_queries=batch_queries, seed=seed,
                                      evaluators=evaluators,
                                      on_epoch=round_reporter(bar, "lambda-linear epoch", rounds, "ndcg5", "NDCG@5"))
        seconds = time.perf_counter() - start
        curves = pd.DataFrame(res.history).rename(columns={"epoch": "round"})
        config = {"algorithm": "lambda-linear", "data": data, "fold": fold, "epochs": rounds, "lr": lr,
                  "batch_queries": batch_queries, "seed": seed, "queries": queries, "normalization": "query-minmax",
                  "drop_single_label": True, "n_features": test.n_features}
        write_run(tmp, curves, res.params, config)
    result = {"out": str(out), "algorithm": "lambda-linear", "final_ndcg5": float(curves["ndcg5"].iloc[-1]),
              "final_offline_ndcg10": float(curves["offline_ndcg10"].iloc[-1]), "seconds": seconds}
    if json_out:
        emit_json(result)
    else:
        typer.echo(f"lambda-linear: NDCG@5 {result['final_ndcg5']:.4f}, nDCG@10 {result['final_offline_ndcg10']:.4f}, "
                   f"{seconds:.1f} s -> {out}")


@bench_app.command("fedips")
def bench_fedips(
    data: str = typer.Option("synthetic:yahoo", "--data", help="Data spec (default: the yahoo profile, 700 features)."),
    fold: int = typer.Option(1, "--fold"),
    clients: int = typer.Option(2000, "--clients"),
    queries_per_client: int = typer.Option(5, "--queries-per-client"),
    rounds: int = typer.Option(100, "--rounds"),
    k: int = typer.Option(5, "--k"),
    clicks_per_client: int = typer.Option(10, "--clicks-per-client"),
    gamma: float = typer.Option(1.0, "--gamma"),
    seed: int = typer.Option(0, "--seed"),
    json_out: bool = typer.Option(False, "--json", help="Print the figures as JSON."),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bar."),
) -> None:
    """FedIPS speed: wall time of the training rounds (NDCG@5 on test evaluated only at the end)."""
    t0 = time.perf_counter()
    splits = load_fedips_splits(data, fold, seed=seed)
    load_seconds = time.perf_counter() - t0
    alg = build_fedips(splits.train, gamma=gamma, k=k, clicks_per_client=clicks_per_client, seed=seed,
                       clients=clients, queries_per_client=queries_per_client)
    replace = clients * queries_per_client > splits.train.n_queries
    run = partial(train, alg, splits.train, clients=clients, queries_per_client=queries_per_client, seed=seed,
                  evaluators=ndcg_evaluators(splits.test), replace=replace)
    warm_up_seconds = warm_up(lambda: run(rounds=1, eval_every=1))
    with progress(rounds, "bench fedips", quiet) as bar:
        res = run(rounds=rounds, eval_every=rounds, on_round=lambda r, row: bar.advance())
    clicks = float(res.curves["clicks_per_client"].sum()) * clients
    figures: dict[str, Any] = {
        "data": data, "n_features": splits.train.n_features, "train_queries": splits.train.n_queries,
        "clients": clients, "queries_per_client": queries_per_client, "k": k, "clicks_per_client": clicks_per_client,
        "rounds": rounds, "load_seconds": load_seconds, "logging_policy_seconds": alg.setup["logging_seconds"],
        "warm_up_seconds": warm_up_seconds, "train_seconds": res.seconds, "seconds_per_round": res.seconds / rounds,
        "clicks_per_second": clicks / res.seconds, "target_train_seconds": 30.0,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        "final_ndcg5": float(res.curves["ndcg5"].iloc[-1]),
    }
    print_figures("bench fedips", figures, json_out)
