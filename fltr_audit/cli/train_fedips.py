"""``fltr-audit train fedips|fedavg|lambda-linear`` (``fltr_audit.api.train_fedips``)."""

from __future__ import annotations

from typing import Optional

import typer

from fltr_audit.cli import options as o
from fltr_audit.cli.app import train_app
from fltr_audit.cli.common import emit_json, round_reporter, written
from fltr_audit.cli.progress import progress


def _fedips_command(algorithm: str):
    def command(
        data: o.Data = ...,
        fold: o.Fold = 1,
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
        out: o.Out = None,
        logging_fraction: float = typer.Option(0.01, "--logging-fraction", help="Share of training queries f_0 learns from."),
        em_rounds: int = typer.Option(20, "--em-rounds", help="Rounds of federated EM training of F (estimated)."),
        queries: Optional[int] = typer.Option(None, "--queries", help="Synthetic: queries generated; files: keep the first N."),
        eval_every: int = typer.Option(1, "--eval-every", help="Evaluate on test every K rounds (and the last)."),
        record_rounds: Optional[str] = typer.Option(None, "--record-rounds", help="Rounds to record: 1,50,100 or every:10."),
        population: Optional[int] = typer.Option(
            None, "--population", help="N persistent users; each round's cohort of --clients is drawn from them "
                                       "(default: the same --clients users every round)."),
        non_iid: o.NonIID = "iid",
        poison: o.Poison = "none",
        json_out: o.Json = False,
        quiet: o.Quiet = False,
    ) -> None:
        from fltr_audit.api.train_fedips import train_fedips  # start-up: the engine loads here

        with progress(rounds, f"{algorithm} round", quiet or json_out, per_tenth=True) as bar:
            result = train_fedips(algorithm, data=data, fold=fold, clients=clients,
                                  queries_per_client=queries_per_client, rounds=rounds, gamma=gamma, k=k,
                                  clicks_per_client=clicks_per_client, lr_local=lr_local, lr_global=lr_global,
                                  propensity=propensity, defense=defense, seed=seed, out=out,
                                  logging_fraction=logging_fraction, em_rounds=em_rounds, queries=queries,
                                  eval_every=eval_every, record_rounds=record_rounds, population=population,
                                  non_iid=non_iid, poison=poison,
                                  on_round=round_reporter(bar, f"{algorithm} round", rounds, "ndcg5", "NDCG@5"))
        if json_out:
            emit_json(result)
        else:
            typer.echo(f"{algorithm} [{result['defense']}, gamma {gamma}]: NDCG@5 {result['final_ndcg5']:.4f} "
                       f"(f_0 {result['logging_policy_ndcg5']:.4f}), nDCG@10 {result['final_offline_ndcg10']:.4f}, "
                       f"{result['seconds']:.1f} s {written(result['out'])}")

    return command


train_app.command("fedips", help="FedIPS: IPS-weighted federated counterfactual LTR (Li & Ouyang, Algorithm 1).")(
    _fedips_command("fedips"))
train_app.command("fedavg", help="FedAvg baseline of FedIPS: the same with all propensities 1.")(
    _fedips_command("fedavg"))


@train_app.command("lambda-linear")
def train_lambda(
    data: o.Data = ...,
    fold: o.Fold = 1,
    rounds: int = typer.Option(20, "--rounds", help="Epochs over the training queries."),
    lr: float = typer.Option(0.1, "--lr", help="SGD step."),
    batch_queries: int = typer.Option(64, "--batch-queries", help="Queries per minibatch."),
    seed: int = typer.Option(0, "--seed", help="Seed of the query shuffling (and of synthetic data)."),
    out: o.Out = None,
    queries: Optional[int] = typer.Option(None, "--queries", help="Synthetic: queries generated; files: keep the first N."),
    json_out: o.Json = False,
    quiet: o.Quiet = False,
) -> None:
    """Linear LambdaRank with full information on the labels (the lambda-Linear baseline of FedIPS)."""
    from fltr_audit.api.train_fedips import train_lambda_linear_baseline  # start-up: the engine loads here

    with progress(rounds, "lambda-linear epoch", quiet or json_out, per_tenth=True) as bar:
        result = train_lambda_linear_baseline(data=data, out=out, fold=fold, rounds=rounds, lr=lr,
                                              batch_queries=batch_queries, seed=seed, queries=queries,
                                              on_round=round_reporter(bar, "lambda-linear epoch", rounds, "ndcg5",
                                                                      "NDCG@5"))
    if json_out:
        emit_json(result)
    else:
        typer.echo(f"lambda-linear: NDCG@5 {result['final_ndcg5']:.4f}, nDCG@10 {result['final_offline_ndcg10']:.4f}, "
                   f"{result['seconds']:.1f} s {written(result['out'])}")
