"""What a whole-run canary audit is asked to do (``CanaryOptions``), checked before anything is
loaded or trained (``check_canaries``), and whether canaries can ride on an algorithm under a
defense stack at all (``canary_problem``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from defenses.robust.compose import check_cohort
from fltr_audit.constraints import OPEN_UNIT, Interval, ParameterError, check
from fltr_audit.engine.algorithms import registry as algorithms
from fltr_audit.errors import FltrError
from fltr_audit.privacy import mechanisms as mech
from fltr_audit.spec.run import MAX_CANARIES, MAX_CANARY_RUNS, RunSpec

RUNS_CAP = MAX_CANARY_RUNS
CANARIES_CAP = MAX_CANARIES
MESSAGE_KINDS = ("weights", "update", "seed+metric")
"""The message kinds canaries ride on (vector messages, FOLtR-ES metrics)."""


@dataclass(frozen=True)
class CanaryOptions:
    """How a run is audited with canaries: ``canaries`` (each present with probability 1/2),
    ``runs`` independent trainings (seeds ``seed``, ``seed + 1``, ...; the multi-run bound from 2
    on), the bounds' ``confidence``, and ``require_claim`` (refuse a defense that claims nothing)."""

    canaries: int = 200
    runs: int = 1
    confidence: float = 0.95
    require_claim: bool = False

    @classmethod
    def of_run(cls, spec: RunSpec) -> "CanaryOptions":
        """The options of a campaign run's ``[audit_run]`` section."""
        return cls(canaries=spec.audit.run_canaries, runs=spec.audit.run_runs)


def check_canaries(spec: RunSpec, options: CanaryOptions) -> None:
    """Bad input, before anything is loaded or trained: one ParameterError or FltrError naming the option."""
    users = spec.algorithm.population or spec.algorithm.clients
    check("canaries", options.canaries, (Interval(int, 1, min(users, CANARIES_CAP)),),
          f"the canaries of the audit, at most one per user of the population of {users:,}" if users < CANARIES_CAP
          else "the canaries of the audit")
    check("runs", options.runs, (Interval(int, 1, RUNS_CAP),), "independent trainings")
    check("confidence", options.confidence, OPEN_UNIT)
    stack = spec.defense.build()
    problem = canary_problem(spec.algorithm.name, stack)
    if problem:
        raise FltrError(problem)
    if spec.algorithm.poison is not None:  # a federation under poisoning: the attack must fit the messages
        declared = algorithms.algorithm_spec(spec.algorithm.name)
        spec.algorithm.poison.check_applies(spec.algorithm.name, declared.message_kind, declared.user_clicks)
    check_cohort(stack, spec.algorithm.clients)
    if options.require_claim and spec.defense.claim.epsilon == float("inf"):
        raise ParameterError("claim_verdict", f"defense {spec.defense.name!r} claims no epsilon, so there is no claim "
                             "to give a verdict on (leave it off for the bounds alone)")


def canary_problem(algorithm: str, stack: Any) -> str | None:
    """Why canaries cannot ride on ``algorithm`` under ``stack`` (None when they can), naming the
    option: an algorithm that sends no messages, a shuffler (the canary users' messages lose their
    senders), an aggregator that declares an adaptive clip (canary clients are scaled to a fixed
    one) -- read from the algorithm's spec and the declared mechanisms, never guessed."""
    kind = algorithms.algorithm_spec(algorithm).message_kind
    if kind not in MESSAGE_KINDS:
        return f"audit-run: {algorithm} sends no messages to audit (message kind {kind!r})"
    aggregation = mech.declared(stack.aggregator)
    if isinstance(aggregation, mech.Shuffle):
        return (f"defense {stack.name!r} shuffles the messages; audit-run's canary users need "
                "messages linked to their senders")
    if isinstance(aggregation, mech.AggregatorGaussian) and aggregation.adaptive:
        return (f"defense {stack.name!r} adapts its clip norm (quantile > 0); audit-run scales canary "
                "clients to a fixed clip (quantile=0)")
    return None
