"""``fltr-audit train NAME`` for every registered algorithm without a command of its own (fpdgd, pdgd,
plug-ins) (``fltr_audit.api.training``)."""

from __future__ import annotations

from typing import List, Optional

import typer

from fltr_audit import plugins
from fltr_audit.cli import options as o
from fltr_audit.cli.app import train_app
from fltr_audit.cli.common import emit_json, round_reporter, written
from fltr_audit.cli.progress import progress
from fltr_audit.engine.algorithms import registry as algorithms


def _train_command(algorithm: str):
    def command(
        data: o.Data = ...,
        fold: o.Fold = 1,
        click_model: Optional[str] = typer.Option(
            None, "--click-model", help="The users' click model (default: the algorithm's training one; "
                                        "perfect | navigational | informational, or pbm for the PBM family)."),
        clients: o.Clients = 1000,
        queries_per_client: int = typer.Option(4, "--queries-per-client",
                                               help="B, queries (local updates) per client."),
        rounds: o.Rounds = 100,
        lr: Optional[float] = typer.Option(None, "--lr", help="Learning rate (the algorithm's parameter lr, "
                                                             "where it declares one; PDGD: eta, default 0.1)."),
        param: List[str] = typer.Option([], "--param", help="An algorithm parameter KEY=VALUE; repeat for "
                                                           "several (`fltr-audit algorithms list` names them)."),
        ranker: o.Ranker = "linear",
        seed: o.Seed = 0,
        out: o.Out = None,
        defense: str = typer.Option("none", "--defense",
                                    help="Defense stack, e.g. clip(sensitivity=5)+dp-distributed(eps=4.5)."),
        record_rounds: Optional[str] = typer.Option(None, "--record-rounds",
                                                    help="Rounds to record for attacks: 1,50,100 or every:10."),
        eval_every: o.EvalEvery = 1,
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
        non_iid: o.NonIID = "iid",
        poison: o.Poison = "none",
        json_out: o.Json = False,
        quiet: o.Quiet = False,
    ) -> None:
        from fltr_audit.api.training import parse_params, train  # start-up: the engine loads when the command runs

        params = parse_params(list(param), algorithm, lr)
        with progress(rounds, f"{algorithm} round", quiet or json_out, per_tenth=True) as bar:
            result = train(algorithm, data=data, fold=fold, click_model=click_model, clients=clients,
                           queries_per_client=queries_per_client, rounds=rounds, params=params, ranker=ranker,
                           seed=seed, out=out, defense=defense, record_rounds=record_rounds, eval_every=eval_every,
                           eval_split=eval_split, normalization=normalization, threat_model=threat_model,
                           replace=replace, population=population, non_iid=non_iid, poison=poison,
                           on_round=round_reporter(bar, f"{algorithm} round", rounds, "offline_ndcg10",
                                                   "offline nDCG@10"),
                           note=(lambda text: None) if quiet or json_out else (lambda text: typer.echo(text, err=True)))
        if json_out:
            emit_json(result)
        else:
            attacked = f" under {result['poison']}" if "poison" in result else ""
            typer.echo(f"{algorithm} [{result['defense']}]{attacked}: offline nDCG@10 {result['final_offline_ndcg10']:.4f}, "
                       f"online {result['online_ndcg']:.2f}, {result['n_interactions']:,} interactions in "
                       f"{result['seconds']:.1f} s ({result['interactions_per_second']:,.0f}/s) {written(result['out'])}")

    return command


def register_train_commands() -> None:
    """``train NAME`` for every registered algorithm with a builder and every installed algorithm
    plug-in (named by its entry point; loaded when the command runs) that has no command of its
    own; called once every command module has registered its commands."""

    taken = {c.name for c in train_app.registered_commands}
    for spec in algorithms.algorithm_specs():
        if spec.build is not None and spec.name not in taken:
            train_app.command(spec.name, help=spec.summary + ".")(_train_command(spec.name))
            taken.add(spec.name)
    for name, distribution in plugins.installed(plugins.ALGORITHMS).items():
        if name not in taken:
            train_app.command(name, help=f"Plug-in algorithm (from {distribution or 'an installed package'}).")(
                _train_command(name))
