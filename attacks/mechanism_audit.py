"""The audit of a defense stack as a mechanism: its outputs on two neighbouring inputs
(``attacks.stack_outputs``), scored by the test of the mechanism it declares
(``attacks.mechanism_tests``) or the learned test, turned into an epsilon lower bound
(``attacks.epsilon_bounds.audit``).

The inputs are worst-case (``attacks.worst_case``) or natural (two real messages, handed in by
the caller); the result names which. What is audited follows the stack's declarations
(``fltr_audit.privacy.mechanisms``): a noisy aggregator's released mean, a shuffled cohort, or the client
transforms (one message, or the cohort mean behind secure aggregation). A part that claims an
epsilon but declares no mechanism is audited black-box with the learned test.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from attacks.epsilon_bounds import AuditResult, audit, audit_chosen
from attacks.mechanism_tests import (
    LEARN_TRIALS,
    learned_statistic,
    mechanism_statistic,
    noisy_aggregate_statistic,
    shuffle_statistic,
)
from attacks.robust_neighbours import worst_case_others
from attacks.stack_outputs import aggregate_mechanism, message_mechanism, noisy_aggregate_mechanism, shuffle_mechanism
from attacks.worst_case import claimed_mu, sensitivity_note, worst_case_pairs
from fltr_audit.privacy import mechanisms as mech
from fltr_audit.constraints import Interval, Options, check
from fltr_audit.errors import FltrError
from fltr_audit.engine.interfaces import PrivacyClaim

TESTS = ("auto", "llr", "learned")


def protected_by_aggregator(stack: Any) -> str | None:
    """How the stack's aggregator protects users, from its declaration: ``noise`` (a declared
    Gaussian or discrete Gaussian sum, or an aggregator that claims an epsilon and declares
    nothing), ``shuffle``, or None (the noise, if any, is in the client transforms)."""
    declared = mech.declared(stack.aggregator)
    if isinstance(declared, mech.Shuffle):
        return "shuffle"
    if isinstance(declared, mech.AGGREGATOR_NOISE):
        return "noise"
    if declared is None and math.isfinite(getattr(stack.aggregator, "claim", PrivacyClaim()).epsilon):
        return "noise"
    return None


def audit_stack(stack: Any, *, claim: PrivacyClaim, inputs: tuple[np.ndarray, np.ndarray], neighbours: str,
                scope: str = "message", trials: int = 100_000, rounds: int = 1, cohort: int = 1, seed: int = 0,
                test: str = "auto", confidence: float = 0.95, others: np.ndarray | None = None,
                g: np.ndarray | None = None, kind: str = "update", threat_model: str | None = None,
                min_trials: int = 100) -> AuditResult:
    """Audit ``stack`` on the neighbouring ``inputs`` (updates relative to the global model ``g``,
    sent as ``kind``) at ``scope`` (``message``: one client's defended message; ``aggregate``: the
    cohort mean, the other members drawn from ``others`` or zero) with the declared mechanism's
    test, or the learned one (``test='learned'``, or when no single noise is declared). ``claim``
    is what the result is judged against (the per-round claim composed over ``rounds``).
    Worst-case ``inputs`` are the declared-norm pair: the pairs that do not trust the declaration
    are audited beside it and the strongest on the held-out half is kept
    (``attacks.worst_case.worst_case_pairs``, ``attacks.epsilon_bounds.audit_chosen``)."""
    check("test", test, (Options(TESTS),))
    check("trials", trials, (Interval(int, min_trials, None),), "trials per input")
    pairs = {"": inputs}
    if neighbours == "worst-case":
        pairs = {"declared-norm": inputs, **{k: v for k, v in worst_case_pairs(stack, len(inputs[0])).items()
                                             if k != "declared-norm"}}
    built = {name: _setup(stack, pair, neighbours, scope, trials, rounds, cohort, seed, test, others, g, kind)
             for name, pair in pairs.items()}
    name, (output, statistic, attack_name, audited, threat) = next(iter(built.items()))
    labels = dict(mechanism_name=stack.name, neighbours=neighbours, attack_name=attack_name, audited_scope=audited,
                  threat_model=threat_model or threat)
    mu = claimed_mu(stack, rounds)
    if len(built) == 1:
        result = audit(output, statistic, claim=claim, n_trials=trials, seed=seed, confidence=confidence,
                       rounds=rounds, mu=mu, **labels)
        result = dataclasses.replace(result, pair=name)
    else:
        result = audit_chosen({k: v[:2] for k, v in built.items()}, claim=claim, n_trials=trials, seed=seed,
                              rounds=rounds, mu=mu, confidence=confidence, **labels)
    return dataclasses.replace(result, verdict_note=sensitivity_note(stack))


def _setup(stack: Any, inputs: tuple[np.ndarray, np.ndarray], neighbours: str, scope: str, trials: int, rounds: int,
           cohort: int, seed: int, test: str, others: np.ndarray | None, g: np.ndarray | None,
           kind: str) -> tuple[Any, Any, str, str, str]:
    """(mechanism, statistic, test name, audited scope, threat model) of one input pair: what is
    audited follows the stack's declarations (module docstring)."""
    protection = protected_by_aggregator(stack)
    if protection == "shuffle":
        return _shuffle_setup(stack, inputs, trials, rounds, cohort, seed, test, g, kind)
    if protection == "noise":
        return _noisy_aggregator_setup(stack, inputs, neighbours, trials, rounds, cohort, seed, test)
    if scope == "aggregate":
        output = aggregate_mechanism(stack, inputs, cohort, others, g, kind)
    else:
        output = message_mechanism(stack, inputs, cohort, g, kind)
    found = None if test == "learned" else mechanism_statistic(stack, inputs, scope, cohort, g, kind)
    statistic, name = _learned(output, seed, trials, rounds) if found is None else found
    return output, statistic, name, scope, "server (aggregate only)" if scope == "aggregate" else "server"


def _learned(output: Any, seed: int, trials: int, rounds: int) -> tuple[Any, str]:
    """The learned test, trained on a stream of its own (``[seed, 1]``)."""
    return learned_statistic(output, np.random.default_rng([seed, 1]), min(LEARN_TRIALS, trials), rounds), \
        "learned-logistic"


def _shuffle_setup(stack: Any, inputs: tuple[np.ndarray, np.ndarray], trials: int, rounds: int, cohort: int,
                   seed: int, test: str, g: np.ndarray | None, kind: str) -> tuple[Any, Any, str, str, str]:
    """A shuffled cohort (test ``shuffle-llr``: the exact likelihood ratio of the multiset), at a
    cohort of at least the shuffler's n when its claim is the amplified one; replace-one
    neighbours (the target's input 0 or 1, the others all holding input 0)."""
    declared = mech.declared(stack.aggregator)
    if declared.amplified:  # the amplified claim is for cohorts of at least n
        cohort = max(cohort, int(declared.n))
    check("cohort", cohort, (Interval(int, 2, None),), "the messages a shuffler mixes")
    found = mechanism_statistic(stack, inputs, "message", cohort, g, kind)
    if found is None:
        raise FltrError(f"STACK: {stack.name!r}: the shuffle audit needs a single declared local randomizer")
    output = shuffle_mechanism(stack, inputs, cohort, found[0], g, kind)
    statistic, name = (shuffle_statistic, "shuffle-llr") if test != "learned" else _learned(output, seed, trials,
                                                                                               rounds)
    return output, statistic, name, "aggregate", "server (shuffled)"


def _noisy_aggregator_setup(stack: Any, inputs: tuple[np.ndarray, np.ndarray], neighbours: str, trials: int,
                            rounds: int, cohort: int, seed: int, test: str) -> tuple[Any, Any, str, str, str]:
    """The released mean of a noisy aggregator (test ``projection`` on the declared Gaussian sum;
    the learned test for an aggregator that declares nothing). Add/remove-one-user neighbours:
    natural ones are the larger of the two real updates against no update (two real updates
    would be a replace-one pair, twice the sensitivity the claim covers). Worst-case neighbours of
    an aggregator that combines by a robust rule put the others in two clusters
    (``attacks.robust_neighbours``): the rule's worst case, not the mean's."""
    if neighbours == "natural":
        u = max(inputs, key=lambda v: float(np.linalg.norm(v)))
        inputs = (np.zeros(len(u)), np.asarray(u, dtype=np.float64))
    others = worst_case_others(stack, inputs, cohort) if neighbours == "worst-case" else None
    output = noisy_aggregate_mechanism(stack, inputs, cohort, others)
    declared = mech.declared(stack.aggregator)
    if test == "learned" or declared is None:
        statistic, name = _learned(output, seed, trials, rounds)
    else:
        statistic, name = noisy_aggregate_statistic(declared, inputs, cohort), "projection"
    return output, statistic, name, "aggregate", "server (aggregate only)"
