"""``fltr-audit train foltr-es`` and ``fltr-audit train baselines`` (``fltr_audit.api.train_foltr_es``)."""

from __future__ import annotations

from typing import List, Optional

import typer

from fltr_audit.cli import options as o
from fltr_audit.cli.app import train_app
from fltr_audit.cli.common import emit_json, print_table, round_reporter, written
from fltr_audit.cli.progress import progress


@train_app.command("foltr-es", help="FOLtR-ES: evolution strategies with seed + MaxRR messages (Kharitonov 2019).")
def train_foltr_es(
    data: o.Data = ...,
    fold: o.Fold = 1,
    click_model: str = typer.Option("perfect", "--click-model", help="perfect | navigational | informational."),
    clients: int = typer.Option(2000, "--clients", help="Clients per round."),
    queries_per_client: int = typer.Option(4, "--queries-per-client", help="B, interactions per message."),
    rounds: int = typer.Option(100, "--rounds", help="Global rounds (Adam steps)."),
    sigma: float = typer.Option(0.01, "--sigma", help="Perturbation scale."),
    lr: float = typer.Option(0.001, "--lr", help="Adam learning rate."),
    antithetic: bool = typer.Option(True, "--antithetic/--no-antithetic", help="Antithetic variates (B/2 each way)."),
    ranker: o.Ranker = "linear",
    defense: str = typer.Option("none", "--defense", help='Client defense stack, e.g. "rr(p=0.9)".'),
    seed: o.Seed = 0,
    out: o.Out = None,
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
    non_iid: o.NonIID = "iid",
    poison: o.Poison = "none",
    json_out: o.Json = False,
    quiet: o.Quiet = False,
) -> None:
    from fltr_audit.api.train_foltr_es import train_foltr_es as run  # start-up: the engine loads here

    with progress(rounds, "foltr-es round", quiet or json_out, per_tenth=True) as bar:
        result = run(data=data, fold=fold, click_model=click_model, clients=clients,
                     queries_per_client=queries_per_client, rounds=rounds, sigma=sigma, lr=lr, antithetic=antithetic,
                     ranker=ranker, defense=defense, seed=seed, out=out, eval_every=eval_every, eval_split=eval_split,
                     normalization=normalization, replace=replace, flawed_seeding=flawed_seeding,
                     record_rounds=record_rounds, threat_model=threat_model, population=population, non_iid=non_iid,
                     poison=poison, on_round=round_reporter(bar, "foltr-es round", rounds, "batch_maxrr", "batch MaxRR"))
    if json_out:
        emit_json(result)
        return
    typer.echo(f"foltr-es {ranker} [{result['defense']}, {click_model}]: batch MaxRR "
               f"{result['first_batch_maxrr']:.4f} -> {result['final_batch_maxrr']:.4f}; expected MaxRR train "
               f"{result['expected_maxrr_train']:.4f}, {eval_split} {result[f'expected_maxrr_{eval_split}']:.4f}; "
               f"offline nDCG@10 {result['final_offline_ndcg10']:.4f}; {result['n_interactions']:,} interactions in "
               f"{result['seconds']:.1f} s ({result['interactions_per_second']:,.0f}/s) {written(result['out'])}")


@train_app.command("baselines", help="MSE and RankingSVM (FOLtR-ES §5): expected MaxRR and nDCG@10 on train and test.")
def train_baselines(
    data: o.Data = ...,
    fold: o.Fold = 1,
    click_model: List[str] = typer.Option(["perfect", "navigational", "informational"], "--click-model",
                                          help="Click model(s) for expected MaxRR: repeat or comma-separate."),
    C: float = typer.Option(1000.0, "--svm-c", help="RankingSVM C (--C: deprecated spelling)."),
    max_pairs: int = typer.Option(200_000, "--max-pairs", help="Subsample preference pairs above this many."),
    normalization: str = typer.Option("none", "--normalization", help="none | query-minmax | zscore."),
    seed: int = typer.Option(0, "--seed", help="Seed of pair subsampling and label flips."),
    json_out: o.Json = False,
    quiet: o.Quiet = False,
) -> None:
    from fltr_audit.api.train_foltr_es import train_baselines  # start-up: the engine loads here

    names = list(click_model)
    with progress(2, "fitting baselines", quiet or json_out) as bar:
        rows = train_baselines(data=data, fold=fold, click_models=names, svm_c=C, max_pairs=max_pairs,
                               normalization=normalization, seed=seed, progress=bar)
    if json_out:
        emit_json({"data": data, "fold": fold, "ndcg_convention": "gain 2^rel-1, queries without relevant "
                   "documents left out", "maxrr_convention": "mean over all queries", "rows": rows})
        return
    shown = [{**{k: r[k] for k in ("baseline", "split", "ndcg10")},
              **{n: r[f"expected_maxrr_{n}"] for n in names}} for r in rows]
    print_table(f"{data} fold {fold}: nDCG@10 and expected MaxRR per click model", shown)
