"""``fltr-audit audit-run``: the privacy a user spends over a whole training run, audited in one run
with canaries (``attacks.canaries``, ``attacks.one_run_audit``) beside the accounted epsilon
(``defenses.accounting``), and over R independent runs.

Per run (seed s, s + 1, ...): the canaries' design for the stack (aggregate scope when the
aggregator hides the messages, message scope otherwise), training with the canary observer (the
trained model is the one a run without canaries gives), then the scores. The figures: the one-run
lower bound and the one-run estimate of the first run; the multi-run lower bound from one canary
of each run (``--runs`` >= 2); the epsilon accounted over the run for the canaries' own
participations (against the server, no amplification -- the figure the verdict compares the bound
with) and the population's (server: worst user; observer of the released models: amplified).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import numpy as np
import typer

from fltr_audit.cli.app import app
from fltr_audit.cli.common import emit_json, print_table
from fltr_audit.errors import FltrError
from fltr_audit.records import RunAuditRecord as RunAudit

RUNS_CAP = 1000
CANARIES_CAP = 100_000


@dataclass(frozen=True)
class RunAuditOptions:
    """What ``audit-run`` runs (CLI options, a campaign row or Python keywords alike)."""

    algorithm: str
    defense: str = "none"
    canaries: int = 200
    runs: int = 1
    data: str = "synthetic:mq2008"
    fold: int = 1
    rounds: int = 100
    clients: int = 1000
    population: Optional[int] = None
    queries_per_client: int = 4
    click_model: str = "perfect"
    seed: int = 0
    confidence: float = 0.95
    claim_verdict: bool = False

    def check(self) -> None:
        """Bad input, before anything is loaded or trained: one ``FltrError`` naming the option."""
        from defenses.stack import parse_defense
        from fltr_audit.federation import check_budget

        check_budget(self.clients, self.queries_per_client, self.rounds, 1)
        if int(self.canaries) != self.canaries or self.canaries < 1:
            raise FltrError(f"--canaries: must be a positive integer (the canaries of the audit), got {self.canaries}")
        users = self.population or self.clients
        if self.canaries > users:
            raise FltrError(f"--canaries: {self.canaries:,} canaries exceed the population of {users:,} users "
                            f"(--population, or --clients without it)")
        if self.canaries > CANARIES_CAP:
            raise FltrError(f"--canaries: at most {CANARIES_CAP:,}, got {self.canaries:,}")
        if int(self.runs) != self.runs or not 1 <= self.runs <= RUNS_CAP:
            raise FltrError(f"--runs: must be an integer from 1 to {RUNS_CAP:,} (independent trainings), got {self.runs}")
        if self.population is not None and self.population < self.clients:
            raise FltrError(f"--population: must be at least --clients ({self.clients}), got {self.population}")
        if not 0.0 < self.confidence < 1.0:
            raise FltrError(f"--confidence: must lie in (0, 1), got {self.confidence}")
        stack = parse_defense(self.defense)
        if self.claim_verdict and stack.claim.epsilon == float("inf"):
            raise FltrError(f"--claim-verdict: defense {stack.name!r} claims no epsilon, so there is no claim "
                            "to give a verdict on (drop --claim-verdict for the bounds alone)")


def canary_design(stack: Any, options: RunAuditOptions, dim: int, seed: int, metric: bool = False) -> Any:
    """The canaries that fit ``stack`` (``attacks.canaries.design``): canary clients at the
    aggregator's clip when it hides the messages, canary users at the noise mechanism's clip radius
    otherwise, tested by its likelihood ratio; canary users of one query's click for ``metric``
    messages (FOLtR-ES)."""
    from attacks.canaries import design
    from defenses.dp_fedavg import DPFedAvg
    from fltr_audit import mechanisms as mech
    from fltr_audit.audit_run import hides_messages, noise_model

    aggregation = mech.declared(stack.aggregator)
    if isinstance(aggregation, mech.Shuffle):
        raise FltrError(f"--defense: {stack.name!r} shuffles the messages; audit-run's canary users need "
                        "messages linked to their senders")
    if isinstance(stack.aggregator, DPFedAvg) and stack.aggregator.adaptive:
        raise FltrError(f"--defense: {stack.name!r} adapts its clip norm (quantile > 0); audit-run scales canary "
                        "clients to a fixed clip (quantile=0)")
    rate = options.clients / (options.population or options.clients)
    common = dict(m=options.canaries, dim=dim, rounds=options.rounds, rate=rate, seed=seed,
                  population=options.population or options.clients)
    if metric:
        from defenses.randomized_response import MAXRR_VALUES

        model = noise_model(stack)
        return design("message", radius=None, test="metric", values=model.values or MAXRR_VALUES, **common)
    if hides_messages(stack, dim):
        if isinstance(aggregation, (mech.AggregatorGaussian, mech.DiscreteGaussianSum)):
            return design("aggregate", radius=aggregation.clip, weighting="count", **common)
        clips = noise_model(stack).clips
        last = clips[-1] if clips else None
        return design("aggregate", radius=last.bound if last else None,
                      relative_to=last.of if last else "update", **common)
    model = noise_model(stack)
    last = model.clips[-1] if model.clips else None
    return design("message", radius=last.bound if last else None, relative_to=last.of if last else "update",
                  test="laplace" if model.kind == "laplace" else "projection", noise_scale=model.scale or 1.0,
                  axes=bool(last and last.norm == "l1"), **common)


@dataclass(frozen=True)
class _Run:
    scores: np.ndarray
    present: np.ndarray
    participations: np.ndarray
    scope: str
    ndcg10: float
    seconds: float


def _one_run(options: RunAuditOptions, splits: Any, seed: int) -> _Run:
    from attacks.canaries import CanaryObserver
    from defenses.stack import parse_defense
    from fltr_audit import metrics
    from fltr_audit.algorithms import registry as algorithms
    from fltr_audit.federation import train

    stack = parse_defense(options.defense)  # fresh: aggregators may keep state across rounds
    settings = {"ranker": "linear", "seed": seed, "clients": options.clients,
                "queries_per_client": options.queries_per_client, "params": {}}
    algorithm = algorithms.build(options.algorithm, splits, options.click_model, settings)
    kind = algorithms.algorithm_spec(options.algorithm).message_kind
    if kind not in ("weights", "update", "seed+metric"):
        raise FltrError(f"audit-run: {options.algorithm} sends no messages to audit (message kind {kind!r})")
    dim = algorithm.init_params(np.random.default_rng(0)).shape[0]
    plan = canary_design(stack, options, dim, seed, metric=kind == "seed+metric")
    observer = CanaryObserver(plan)
    start = time.perf_counter()
    need = options.clients * options.queries_per_client
    result = train(algorithm, splits.train, clients=options.clients, queries_per_client=options.queries_per_client,
                   rounds=options.rounds, seed=seed, client_defenses=stack.client, aggregator=stack.aggregator,
                   replace=options.population is None and need > splits.train.n_queries,
                   population=options.population, observer=observer)
    seconds = time.perf_counter() - start
    ndcg = float(metrics.mean_ndcg(algorithm.ranker.score(result.params, splits.test.features), splits.test, 10))
    return _Run(observer.scores(), plan.present, plan.participations, plan.scope, ndcg, seconds)


def run_audit_run(options: RunAuditOptions) -> RunAudit:
    """Train ``options.runs`` runs with canaries and compute every figure (module docstring)."""
    from attacks.one_run_audit import multi_run_lower_bound, one_run_estimate, one_run_lower_bound, run_claim_verdict
    from defenses.accounting import ParticipationSchedule, RunAccountant, privacy_spent
    from defenses.stack import parse_defense
    from fltr_audit.data.load import load_splits

    options.check()
    stack = parse_defense(options.defense)
    splits = load_splits(options.data, options.fold, normalization="none", queries=None, seed=options.seed)
    runs = [_one_run(options, splits, options.seed + i) for i in range(options.runs)]
    first = runs[0]
    rate = options.clients / (options.population or options.clients)
    canary_schedule = ParticipationSchedule(options.rounds, rate, first.participations)
    accountant = RunAccountant(stack, canary_schedule)
    delta = accountant.default_delta()
    spent = privacy_spent(stack, ParticipationSchedule.of_run(options.seed, options.rounds, options.clients,
                                                              options.population), delta)
    bound = one_run_lower_bound(first.scores, first.present, delta, options.confidence,
                                eligible=first.participations > 0)
    estimate = one_run_estimate(first.scores, first.present, delta, seed=options.seed)
    if options.runs > 1:
        picks = [int(np.flatnonzero(r.participations > 0)[0]) if (r.participations > 0).any() else 0 for r in runs]
        multi = multi_run_lower_bound(np.array([r.scores[i] for r, i in zip(runs, picks)]),
                                      np.array([r.present[i] for r, i in zip(runs, picks)]), delta, options.confidence)
        multi_figures = (multi.epsilon_lb, multi.fp, multi.fn, multi.n0 + multi.n1)
    else:
        multi_figures = (float("nan"), 0, 0, 0)
    accounted = accountant.get_epsilon(delta)
    claim = stack.claim
    if claim.epsilon == float("inf"):
        verdict = "no claim"
    elif claim.scope == "aggregate" and first.scope == "message":
        verdict = "outside scope"  # the server reads the messages, the claim covers only their aggregate
    else:
        verdict = run_claim_verdict(bound.epsilon_lb, accounted, bound.limit)
    tightness = bound.epsilon_lb / accounted if 0 < accounted < float("inf") else float("nan")
    return RunAudit(
        algorithm=options.algorithm, defense=stack.name, scope=first.scope, canaries=options.canaries,
        rounds=options.rounds, runs=options.runs, sampling_rate=rate, delta=delta, epsilon_lb=bound.epsilon_lb,
        guesses=bound.guesses, correct=bound.correct, canary_limit=bound.limit,
        limited_by_canaries=bound.limited_by_canaries, epsilon_estimate=estimate.epsilon,
        estimate_low=estimate.low, estimate_high=estimate.high, epsilon_lb_multi=multi_figures[0],
        multi_fp=multi_figures[1], multi_fn=multi_figures[2], multi_n=multi_figures[3],
        epsilon_accounted_canaries=accounted, canary_participations_max=canary_schedule.worst,
        epsilon_server=spent.epsilon_server, epsilon_server_q99=spent.epsilon_server_q99,
        epsilon_observer=spent.epsilon_observer, claimed_epsilon=claim.epsilon, claimed_scope=claim.scope,
        claim_verdict=verdict, tightness=tightness, ndcg10=first.ndcg10,
        seconds=float(sum(r.seconds for r in runs)))


def record_run_audit(store: Path, options: RunAuditOptions, out: RunAudit) -> str:
    """Write the row into the ``run_audits`` table of a results store, as one run."""
    import pandas as pd

    from fltr_audit.campaign import environment, run_key
    from fltr_audit.store import ResultsStore

    config = {"command": "audit-run", **dataclasses.asdict(options)}
    key = run_key(config)
    ResultsStore(store).record_run(key, "audit-run", config, environment(), options.seed, out.seconds,
                                   {"run_audits": pd.DataFrame([out.as_dict()])})
    return key


def _fmt(x: float) -> str:
    return "inf" if x == float("inf") else "n/a" if x != x else f"{x:.3g}"


@app.command("audit-run")
def audit_run_command(
    algorithm: str = typer.Argument(..., help="fpdgd | fedips | foltr-es (any algorithm that sends messages)."),
    defense: str = typer.Option("none", "--defense", help="Defense stack, e.g. 'dp-fedavg(noise_multiplier=1,clip=1)'."),
    canaries: int = typer.Option(200, "--canaries", help="Canaries (each present with probability 1/2)."),
    runs: int = typer.Option(1, "--runs", help=f"Independent runs for the multi-run bound (at most {RUNS_CAP})."),
    data: str = typer.Option("synthetic:mq2008", "--data", help="Folder with Fold1..5, a LETOR file, or synthetic:PROFILE."),
    fold: int = typer.Option(1, "--fold", help="Fold 1..5."),
    rounds: int = typer.Option(100, "--rounds", help="Training rounds."),
    clients: int = typer.Option(1000, "--clients", help="Cohort size per round."),
    population: Optional[int] = typer.Option(None, "--population", help="Persistent users the cohorts are drawn from."),
    queries_per_client: int = typer.Option(4, "--queries-per-client"),
    click_model: str = typer.Option("perfect", "--click-model"),
    seed: int = typer.Option(0, "--seed", help="Seed of the first run (run i uses seed + i)."),
    claim_verdict: bool = typer.Option(False, "--claim-verdict", help="Require a claim (exit 2 for a defense without one)."),
    store: Optional[Path] = typer.Option(None, "--store", help="Record the row in this results store (run_audits)."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON to stdout."),
) -> None:
    """Audit the privacy a user spends over a whole run with canaries: one-run lower bound (Steinke et
    al. 2023), one-run estimate (Andrew et al. 2024), multi-run lower bound (--runs), beside the
    epsilon accounted over the run against the server and against an observer of the models."""
    options = RunAuditOptions(algorithm=algorithm, defense=defense, canaries=canaries, runs=runs, data=data, fold=fold,
                              rounds=rounds, clients=clients, population=population,
                              queries_per_client=queries_per_client, click_model=click_model, seed=seed,
                              claim_verdict=claim_verdict)
    out = run_audit_run(options)
    key = record_run_audit(store, options, out) if store is not None else None
    if json_out:
        emit_json({**out.as_dict(), "run_key": key})
        return
    limit = " (the canary-count limit)" if out.limited_by_canaries else ""
    print_table(f"privacy over the whole run: {out.algorithm}, {out.defense}, {out.rounds} rounds, {out.canaries} "
                f"canaries ({out.scope} scope), δ = {out.delta:g}", [
        {"figure": "one-run lower bound (Steinke et al., 95 %)", "ε": _fmt(out.epsilon_lb) + limit},
        {"figure": "one-run estimate (Andrew et al.; an estimate, 95 % bootstrap)",
         "ε": f"{_fmt(out.epsilon_estimate)} [{_fmt(out.estimate_low)}, {_fmt(out.estimate_high)}]"},
        {"figure": f"multi-run lower bound ({out.runs} runs)",
         "ε": _fmt(out.epsilon_lb_multi) if out.runs > 1 else "n/a (--runs 1)"},
        {"figure": f"accounted, the canaries' participations (≤ {out.canary_participations_max}), vs the server",
         "ε": _fmt(out.epsilon_accounted_canaries)},
        {"figure": "accounted vs the server: worst user / 99th percentile",
         "ε": f"{_fmt(out.epsilon_server)} / {_fmt(out.epsilon_server_q99)}"},
        {"figure": "accounted vs an observer of the released models only (sampling-amplified)",
         "ε": _fmt(out.epsilon_observer)},
    ])
    typer.echo(f"claim over the run: {out.claim_verdict.upper()} (claimed ε per round {_fmt(out.claimed_epsilon)}, "
               f"{out.claimed_scope} scope; canary-count limit {_fmt(out.canary_limit)}); "
               f"nDCG@10 {out.ndcg10:.4f}; {out.seconds:.1f} s")
    if out.limited_by_canaries:
        typer.echo(f"the one-run bound {_fmt(out.epsilon_lb)} is set by the number of canaries, not the mechanism: "
                   "more canaries could show more")
