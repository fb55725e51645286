"""``fltr-audit train NAME`` for every registered algorithm without a command of its own (fpdgd, pdgd,
plug-ins) and ``fltr-audit bench fpdgd``."""

from __future__ import annotations

import resource
import time
from functools import partial
from pathlib import Path
from typing import Any, List, Optional

import typer

from fltr_audit.engine.algorithms import registry as algorithms
from fltr_audit.engine.algorithms.fpdgd import FPDGD
from fltr_audit.cli.app import bench_app, train_app
from fltr_audit.cli.common import (atomic_out_dir, emit_json, parse_list, print_figures, progress, round_reporter,
                                   warm_up, write_run)
from fltr_audit.engine.clicks import cascade_model
from fltr_audit.engine.data.load import load_splits
from fltr_audit.errors import FltrError
from fltr_audit.engine.federation import check_budget, check_population, check_threat_model, train
from fltr_audit.engine.interceptors import RecordingInterceptor, parse_rounds
from fltr_audit.engine.population import NON_IID_HELP, check_buildable, parse_non_iid
from fltr_audit.engine.randomness import check_seed
from fltr_audit.engine.rankers import make_ranker
from fltr_audit.runs.robustness import POISON_HELP



def resolve_normalization(algorithm: str, normalization: str) -> str:
    """``auto`` becomes the algorithm's declared default (as in ``audit``)."""
    return algorithms.algorithm_spec(algorithm).default_normalization if normalization == "auto" else normalization


def resolve_replace(replace: Optional[bool], clients: int, queries_per_client: int, n_queries: int,
                    quiet: bool = False) -> bool:
    """Sample a round's queries with replacement when asked, or -- left unset -- when a round
    needs more queries than the split has (saying so once on stderr)."""
    if replace is not None:
        return replace
    needed = clients * queries_per_client
    if needed > n_queries and not quiet:
        typer.echo(f"note: a round needs {needed:,} queries (--clients x --queries-per-client) and the training "
                   f"split has {n_queries:,}: sampling them with replacement", err=True)
    return needed > n_queries


def parse_params(items: list[str], algorithm: str, lr: float | None = None) -> dict[str, Any]:
    """``--param KEY=VALUE`` items (and ``--lr``) as the algorithm's keywords: each value read as
    an int, a float, true / false or else text, then checked against the algorithm's declared
    parameters; an error names what the user typed (``--lr``, ``--param KEY``)."""
    from fltr_audit.constraints import ParameterError

    params: dict[str, Any] = {}
    typed = {"lr": "--lr"} if lr is not None else {}
    for item in items:
        key, eq, raw = item.partition("=")
        if not eq or not key.strip():
            raise FltrError(f"--param: expected KEY=VALUE, got {item!r}")
        params[key.strip()] = _literal(raw.strip())
        typed[key.strip()] = f"--param {key.strip()}"
    if lr is not None:
        params["lr"] = lr
    try:
        algorithms.algorithm_spec(algorithm).check_params(params)
    except ParameterError as exc:
        raise exc.renamed(typed, where=f"train {algorithm}: ") from None
    return params


def _literal(raw: str) -> Any:
    if raw.lower() in ("true", "false"):
        return raw.lower() == "true"
    for kind in (int, float):
        try:
            return kind(raw)
        except ValueError:
            pass
    return raw


def run_train(algorithm: str, *, data: str, fold: int, click_model: str | None, clients: int,
              queries_per_client: int, rounds: int, params: dict[str, Any], ranker: str, seed: int, out: Path, defense: str, record_rounds: Optional[str],
              eval_every: int, eval_split: str, normalization: str, threat_model: str, replace: Optional[bool],
              quiet: bool, population: Optional[int] = None, non_iid: str = "iid", poison: str = "none") -> dict:
    """Load, train, write ``curves.csv``, ``model.npy``, ``config.json`` (and a recording) into ``out``."""
    from defenses.accounting import ParticipationSchedule, privacy_spent
    from defenses.stack import parse_defense  # the CLI is the composition root
    from fltr_audit.runs.robustness import check_robustness, prepared

    stack = parse_defense(defense)
    poison_spec = check_robustness(poison, algorithm, stack, clients)
    spec = algorithms.algorithm_spec(algorithm)
    click_model = click_model or spec.train_click_model
    check_budget(clients, queries_per_client, rounds, eval_every)
    check_seed(seed)
    parse_list(eval_split, "--eval-split", ("vali", "test"))
    check_population(population, clients)
    users = parse_non_iid(non_iid)
    check_threat_model(threat_model)
    if record_rounds is not None:
        parse_rounds(record_rounds, rounds)  # bad input fails before any data is loaded
    normalization = resolve_normalization(algorithm, normalization)
    splits = load_splits(data, fold, normalization=normalization)
    eval_data = splits.get(eval_split)
    check_buildable(users, splits.train.n_queries)
    replace = resolve_replace(replace, clients, queries_per_client, splits.train.n_queries, quiet)
    alg = algorithms.build(algorithm, splits, click_model, {"ranker": ranker, "seed": seed, "clients": clients,
                                                             "queries_per_client": queries_per_client,
                                                             "params": params})
    poisoning, stack = prepared(poison_spec, stack, alg, splits.train, queries_per_client, seed)
    with atomic_out_dir(out) as tmp:
        interceptors = [] if record_rounds is None else [
            RecordingInterceptor(tmp / "recording", record_rounds, algorithm=algorithm, defense=stack.name)]
        with progress(rounds, f"{algorithm} round", quiet) as bar:
            on_round = round_reporter(bar, f"{algorithm} round", rounds, "offline_ndcg10", "offline nDCG@10")
            res = train(alg, splits.train, clients=clients, queries_per_client=queries_per_client, rounds=rounds,
                        seed=seed, eval_data=eval_data, eval_every=eval_every, client_defenses=stack.client,
                        aggregator=stack.aggregator, interceptors=interceptors, threat_model=threat_model,
                        on_round=on_round, replace=replace, population=population, non_iid=users,
                        poisoning=poisoning)
        config = {**res.config, "data": data, "fold": fold, "normalization": normalization, "eval_split": eval_split,
                  "defense": stack.name, "record_rounds": record_rounds, "n_features": splits.train.n_features,
                  "n_levels": splits.train.n_levels}
        write_run(tmp, res.curves, res.params, config)
    last = res.curves.iloc[-1]
    return {"out": str(out), "algorithm": algorithm, "defense": stack.name,
            **({"poison": poison_spec.text} if poison_spec is not None else {}),
            "final_offline_ndcg10": float(last["offline_ndcg10"]), "online_ndcg": float(last["online_ndcg"]),
            "n_interactions": res.n_interactions, "seconds": res.seconds,
            "interactions_per_second": res.n_interactions / res.seconds if res.seconds > 0 else float("nan"),
            "privacy": privacy_spent(stack, ParticipationSchedule.of_run(seed, rounds, clients, population)).as_dict()}


def _train_command(algorithm: str):
    def command(
        data: str = typer.Option(..., "--data", help="Folder with Fold1..5, a LETOR file, or synthetic:PROFILE."),
        fold: int = typer.Option(1, "--fold", help="Fold 1..5."),
        click_model: Optional[str] = typer.Option(
            None, "--click-model", help="The users' click model (default: the algorithm's training one; "
                                        "perfect | navigational | informational, or pbm for the PBM family)."),
        clients: int = typer.Option(1000, "--clients", help="Clients per round."),
        queries_per_client: int = typer.Option(4, "--queries-per-client",
                                               help="B, queries (local updates) per client."),
        rounds: int = typer.Option(100, "--rounds", help="Global rounds."),
        lr: Optional[float] = typer.Option(None, "--lr", help="Learning rate (the algorithm's parameter lr, "
                                                             "where it declares one; PDGD: eta, default 0.1)."),
        param: List[str] = typer.Option([], "--param", help="An algorithm parameter KEY=VALUE; repeat for "
                                                           "several (`fltr-audit algorithms list` names them)."),
        ranker: str = typer.Option("linear", "--ranker", help="linear | mlp."),
        seed: int = typer.Option(0, "--seed", help="Run seed."),
        out: Path = typer.Option(..., "--out", help="Output directory (created; must not hold files)."),
        defense: str = typer.Option("none", "--defense",
                                    help="Defense stack, e.g. clip(sensitivity=5)+dp-distributed(eps=4.5)."),
        record_rounds: Optional[str] = typer.Option(None, "--record-rounds",
                                                    help="Rounds to record for attacks: 1,50,100 or every:10."),
        eval_every: int = typer.Option(1, "--eval-every", help="Offline evaluation every K rounds (and the last)."),
        eval_split: str = typer.Option("test", "--eval-split", help="Split for offline nDCG@10: vali | test."),
        normalization: str = typer.Option("auto", "--normalization",
                                          help="auto (the algorithm's: zscore) | none | query-minmax | zscore."),
        threat_model: str = typer.Option("server", "--threat-model",
                                         help="What recorded views keep: server | server-blind."),
        replace: Optional[bool] = typer.Option(None, "--replace/--no-replace",
                                               help="Sample a round's queries with replacement (default: when a "
                                                    "round needs more queries than the split has)."),
        population: Optional[int] = typer.Option(
            None, "--population", help="N persistent users; each round's cohort of --clients is drawn from them "
                                       "(default: the same --clients users every round)."),
        non_iid: str = typer.Option("iid", "--non-iid", help=NON_IID_HELP),
        poison: str = typer.Option("none", "--poison", help=POISON_HELP),
        json_out: bool = typer.Option(False, "--json", help="Print the result as JSON."),
        quiet: bool = typer.Option(False, "--quiet", help="No progress bar."),
    ) -> None:
        params = parse_params(list(param), algorithm, lr)
        result = run_train(algorithm, data=data, fold=fold, click_model=click_model, clients=clients,
                           queries_per_client=queries_per_client, rounds=rounds, params=params, ranker=ranker, seed=seed,
                           out=out, defense=defense, record_rounds=record_rounds, eval_every=eval_every,
                           eval_split=eval_split, normalization=normalization, threat_model=threat_model,
                           replace=replace, quiet=quiet, population=population, non_iid=non_iid, poison=poison)
        if json_out:
            emit_json(result)
        else:
            attacked = f" under {result['poison']}" if "poison" in result else ""
            typer.echo(f"{algorithm} [{result['defense']}]{attacked}: offline nDCG@10 {result['final_offline_ndcg10']:.4f}, "
                       f"online {result['online_ndcg']:.2f}, {result['n_interactions']:,} interactions in "
                       f"{result['seconds']:.1f} s ({result['interactions_per_second']:,.0f}/s) -> {result['out']}")

    return command


def register_train_commands() -> None:
    """``train NAME`` for every registered algorithm with a builder and every installed algorithm
    plug-in (named by its entry point; loaded when the command runs) that has no command of its
    own; called once every command module has registered its commands."""
    from fltr_audit import plugins

    taken = {c.name for c in train_app.registered_commands}
    for spec in algorithms.algorithm_specs():
        if spec.build is not None and spec.name not in taken:
            train_app.command(spec.name, help=spec.summary + ".")(_train_command(spec.name))
            taken.add(spec.name)
    for name, distribution in plugins.installed(plugins.ALGORITHMS).items():
        if name not in taken:
            train_app.command(name, help=f"Plug-in algorithm (from {distribution or 'an installed package'}).")(
                _train_command(name))


@bench_app.command("fpdgd")
def bench_fpdgd(
    data: str = typer.Option("synthetic:mslr10k?queries=10000", "--data", help="Data spec (default: MSLR-sized)."),
    fold: int = typer.Option(1, "--fold"),
    clients: int = typer.Option(1000, "--clients"),
    queries_per_client: int = typer.Option(2, "--queries-per-client"),
    rounds: int = typer.Option(200, "--rounds"),
    click_model: str = typer.Option("perfect", "--click-model"),
    seed: int = typer.Option(0, "--seed"),
    json_out: bool = typer.Option(False, "--json", help="Print the figures as JSON."),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bar."),
) -> None:
    """FPDGD speed: interactions per second, wall time and peak RSS, offline eval on test every round.

    ``train_cpu_seconds`` (process CPU time) is less sensitive than the wall time to other
    work on a shared machine.
    """
    check_budget(clients, queries_per_client, rounds, 1)
    t0 = time.perf_counter()
    splits = load_splits(data, fold)
    load_seconds = time.perf_counter() - t0
    alg = FPDGD(make_ranker("linear", splits.train.n_features), cascade_model(click_model, splits.train.n_levels))
    run = partial(train, alg, splits.train, clients=clients, queries_per_client=queries_per_client, seed=seed,
                  eval_data=splits.test, eval_every=1)
    warm_up_seconds = warm_up(lambda: run(rounds=1))
    cpu = time.process_time()
    with progress(rounds, "bench fpdgd", quiet) as bar:
        res = run(rounds=rounds, on_round=lambda r, row: bar.advance())
    cpu = time.process_time() - cpu
    figures: dict[str, Any] = {
        "data": data, "train_queries": splits.train.n_queries, "train_docs": splits.train.n_docs,
        "test_queries": splits.test.n_queries, "clients": clients, "queries_per_client": queries_per_client,
        "rounds": rounds, "load_seconds": load_seconds, "warm_up_seconds": warm_up_seconds,
        "train_seconds": res.seconds, "train_cpu_seconds": cpu,
        "interactions": res.n_interactions, "interactions_per_second": res.n_interactions / res.seconds,
        "seconds_per_round": res.seconds / rounds,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        "final_offline_ndcg10": float(res.curves["offline_ndcg10"].iloc[-1]), "target_seconds_200_rounds": 8.0,
    }
    print_figures("bench fpdgd", figures, json_out)
