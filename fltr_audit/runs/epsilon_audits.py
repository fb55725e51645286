"""The epsilon audits of one run, each an ``audits`` row named by its ``neighbours``: the
*worst-case* audit (crafted inputs beyond the declared clip, ``attacks.worst_case``, scored by the
declared mechanism's test, or the learned test for a defense that declares nothing), on which the
claim verdict rests, and the *natural* audit beside it. Natural neighbours: for FOLtR-ES the
query-distinguishing test on the privatized metric beside the exact epsilon by enumeration; for
vector messages, the defense's client transforms (and its aggregation) as a mechanism on one probe
client's message with and without one click (``runs.natural_neighbours``). When the aggregator
hides messages the audited output is the cohort mean, the other members drawn from the probe
clients' messages. Every audit draws from the stream of its ``audit_key`` (the run's settings, its
data named by content, and the audit's kind: ``RunSpec.audit_seed``), written in its row, so that
no two runs share an audit and a report pooling runs counts each audit once. ``audit_trials`` is a number of trials per
input or ``auto`` (sized to the claim, ``attacks.epsilon_bounds.auto_trials``)."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from attacks.trial_sizing import auto_trials
from attacks.foltr_decode import audit_query_distinguishing
from attacks.mechanism_audit import audit_stack, protected_by_aggregator
from attacks.stack_outputs import separable_coordinates
from attacks.worst_case import worst_case_inputs, worst_case_pairs
from defenses.accounting import ParticipationSchedule, privacy_spent
from defenses.stack import DefenseStack
from fltr_audit.engine.algorithms import registry as algorithms
from fltr_audit.engine.federation import TrainResult
from fltr_audit.engine.messages import Messages
from fltr_audit.privacy import mechanisms as mech
from fltr_audit.runs.models import build_algorithm
from fltr_audit.runs.natural_neighbours import natural_messages
from fltr_audit.spec.run import RunSpec
from fltr_audit.store.records import AuditMeasurement, RunPrivacy

AGGREGATE_TRIALS = 4_000
"""At most this many trials per input for a run's worst-case audit of a cohort aggregate (one
defense call on a whole cohort per trial; ceiling 6.3, above every built-in aggregate claim)."""


BATCHED_AGGREGATE_TRIALS = 10_000
"""The same cap for an aggregator that simulates all the trials at once (``zero_cohort_means``:
``ddgauss``, about a second per 10^4 trials; ceiling 7.2)."""


SHUFFLE_VALUES = 200_000_000
"""At most this many simulated message coordinates per input and input pair for an audit of a
shuffled cohort (each trial shuffles a whole cohort, of at least the shuffler's n for an amplified
claim, the messages simulated on the coordinates the audit reads, ``separable_coordinates``): the
pair of the most such coordinates sets the trials of all, 10,000 trials when every pair differs in
one coordinate at n = 1000; 1,470 when one (the evenly spread pair) differs in all 136."""


DEFAULT_AUDIT_TRIALS = 10_000


AUDIT_COLUMNS = tuple(f.name for f in dataclasses.fields(AuditMeasurement))
"""The measured columns of an ``audits`` row (the run's algorithm and defense lead, its privacy trails)."""


AUDIT_KINDS = ("worst-case", "natural")


def randomized_response(stack: DefenseStack) -> Any:
    """The stack's transform of FOLtR-ES metric values, if any: the client defense that declares
    randomized response (``fltr_audit.privacy.mechanisms.RandomizedResponse``)."""
    found = [d for d in stack.client if isinstance(mech.declared(d), mech.RandomizedResponse)]
    return found[0] if found else None


def audit_trials(config: RunSpec, stack: DefenseStack) -> int:
    """The run's trials per input for its epsilon audits: ``audit_trials`` (default 10,000), or
    ``auto``: sized to the stack's claim (``attacks.epsilon_bounds.auto_trials``); a stack without a claim
    (only audited on natural neighbours, for what its messages reveal) keeps the default -- the
    doors refuse ``auto`` for a defense list where one claims nothing (``campaign_spec``)."""
    trials = config.audit.trials
    if trials != "auto":
        return int(trials)
    if not np.isfinite(stack.claim.epsilon):
        return DEFAULT_AUDIT_TRIALS
    return auto_trials(stack.claim.epsilon, stack.claim.delta)[0]


def shuffle_trials(stack: DefenseStack, trials: int, cohort: int, pairs: list[tuple[np.ndarray, np.ndarray]]) -> int:
    """``trials``, at most ``SHUFFLE_VALUES`` simulated message coordinates' worth (at least 100
    trials) when the stack shuffles: each trial shuffles a cohort of at least the shuffler's n for
    an amplified claim, its messages simulated on the coordinates the audit reads of each input
    pair it audits (``pairs``)."""
    shuffled = mech.declared(stack.aggregator)
    if not isinstance(shuffled, mech.Shuffle):
        return trials
    members = max(cohort, shuffled.n) if shuffled.amplified else cohort
    values = max(_simulated_values(stack, pair) for pair in pairs)
    return min(trials, max(100, SHUFFLE_VALUES // (members * max(values, 1))))


def _simulated_values(stack: DefenseStack, pair: tuple[np.ndarray, np.ndarray]) -> int:
    """The message coordinates a shuffle audit simulates for ``pair`` (``separable_coordinates``)."""
    kept = separable_coordinates(stack, pair)
    return len(kept) if kept is not None else len(pair[0])


def epsilon_audits(config: RunSpec, splits: Any, stack: DefenseStack, base: TrainResult) -> list[dict]:
    """The run's ``audits`` rows: the worst-case audit (when the stack claims an epsilon), then the
    natural one, each with its ``audit_key`` (module docstring)."""
    metric = algorithms.algorithm_spec(config.algorithm.name).message_kind == "seed+metric"
    natural = _audit_metric(config, splits, stack, base) if metric else _audit_defense(config, splits, stack, base)
    worst = _audit_worst_case(config, stack, metric, natural, len(np.asarray(base.params)))
    return [{**row, "audit_key": config.audit_key(kind)}
            for row, kind in ((worst, "worst-case"), (natural, "natural")) if row is not None]


def _audit_metric(config: RunSpec, splits: Any, stack: DefenseStack, base: TrainResult) -> dict | None:
    """Empirical epsilon of a FOLtR-ES metric message on natural neighbours: the
    query-distinguishing attack on the worst-case pair of relevance placements of the exact
    enumeration (FOLtR-ES §4, Eq. 9)."""
    algorithm = build_algorithm(config, splits, config.algorithm.train_click_model)
    row = audit_query_distinguishing(randomized_response(stack), algorithm.click_model, n_trials=audit_trials(config, stack),
                                     seed=config.audit_seed("natural"), k=algorithm.k)
    row["mechanism"] = stack.name
    return {**{key: row[key] for key in AUDIT_COLUMNS}, **_run_privacy(config, stack)}


def _audit_worst_case(config: RunSpec, stack: DefenseStack, metric: bool, natural: dict | None,
                      dim: int) -> dict | None:
    """The worst-case audit the claim verdict rests on (None when the stack claims no epsilon, or
    its messages carry neither a vector nor a randomized metric): crafted inputs beyond the
    declared clip (``attacks.worst_case``) at the claim's scope -- one client's message, or the
    cohort aggregate when the aggregator hides messages, protects them, or the claim covers only
    the aggregate -- with the other members' inputs zero (fixed and known: the worst case)."""
    claim = stack.claim
    if not np.isfinite(claim.epsilon):
        return None
    cohort = int(config.probe.cohort)
    trials = audit_trials(config, stack)
    if metric:
        if randomized_response(stack) is None:
            return None
        dim, scope = 1, "message"
    else:
        if natural is None:
            return None
        hides = hides_messages(stack, dim)
        aggregate = hides or protected_by_aggregator(stack) is not None or \
            (claim.scope == "aggregate" and cohort >= 2)
        scope = "aggregate" if aggregate else "message"
        if scope == "aggregate":
            batched = protected_by_aggregator(stack) == "noise" and stack.aggregator.zero_cohort_means is not None
            trials = min(trials, BATCHED_AGGREGATE_TRIALS if batched else AGGREGATE_TRIALS)
    inputs = worst_case_inputs(stack, dim)
    if not metric:
        trials = shuffle_trials(stack, trials, cohort, list(worst_case_pairs(stack, dim).values()))
    result = audit_stack(stack, claim=claim, inputs=inputs, neighbours="worst-case",
                         scope=scope, trials=trials, cohort=cohort, seed=config.audit_seed("worst-case"),
                         min_trials=4)
    return {**{key: value for key, value in result.as_dict().items() if key in AUDIT_COLUMNS},
            **_run_privacy(config, stack)}


def hides_messages(stack: DefenseStack, dim: int) -> bool:
    """Whether the stack's aggregator shows the server only the aggregate."""
    msgs = Messages(n_interactions=np.ones(2, dtype=np.int64), vector=np.zeros((2, dim)))
    return stack.aggregator.aggregate(msgs, np.arange(2), np.random.default_rng(0)).messages is None


def _audit_defense(config: RunSpec, splits: Any, stack: DefenseStack, base: TrainResult) -> dict | None:
    """Empirical epsilon of the stack on natural neighbours (None for seed+metric messages): a
    probe client's real undefended message with and without one click (``natural_messages``),
    through the stack's client transforms -- one client's message, or, when the
    aggregator hides messages, the cohort mean with the other members drawn from the probe
    clients' messages -- scored by the stack's mechanism-aware test (``attacks.mechanism_audit``)."""
    found = natural_messages(config, splits, base)
    if found is None:
        return None
    pool, g, kind, (u0, u1) = found
    hides = hides_messages(stack, pool.shape[1])
    result = audit_stack(stack, claim=stack.claim, inputs=(u0, u1), neighbours="natural",
                         scope="aggregate" if hides else "message",
                         trials=shuffle_trials(stack, audit_trials(config, stack), config.probe.cohort, [(u0, u1)]),
                         cohort=config.probe.cohort, seed=config.audit_seed("natural"), others=pool,
                         g=g, kind=kind, min_trials=4)
    return {**{key: value for key, value in result.as_dict().items() if key in AUDIT_COLUMNS},
            **_run_privacy(config, stack)}


def _run_privacy(config: RunSpec, stack: DefenseStack) -> dict:
    """The stack's claim composed over the run's training rounds (``defenses.accounting.privacy_spent``)
    for the participation schedule of the run's seed and population: the ``RunPrivacy`` columns
    (against the server: worst and 99th percentile user; against an observer: Poisson-sampled)."""
    algo = config.algorithm
    schedule = ParticipationSchedule.of_run(config.seed, algo.rounds, algo.clients, algo.population)
    spent = privacy_spent(stack, schedule, queries_per_client=algo.queries_per_client)
    return {f.name: getattr(spent, f.name) for f in dataclasses.fields(RunPrivacy)}
