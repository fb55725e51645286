"""Typed records: one frozen dataclass per stored row kind, the single schema of the store.

Rows are produced as dicts / DataFrames; these classes declare their columns (rows that share
columns share a base class: ``Cell``, ``AuditedRun``, ``AuditMeasurement``, ``RunPrivacy``). A
field's SQL type follows its annotation (``str`` TEXT, ``int`` INTEGER, ``float`` REAL,
``bool`` BOOLEAN); :func:`columns` gives the ``{column: sql type}`` mapping the store's
``TABLES`` is derived from (see ``docs/store.md``).
"""

from __future__ import annotations

import dataclasses
import math
import typing

SQL_TYPES: dict[type, str] = {str: "TEXT", int: "INTEGER", float: "REAL", bool: "BOOLEAN"}


@dataclasses.dataclass(frozen=True)
class CurveRecord:
    """One round of a defense's learning curve (table ``curves``)."""

    defense: str
    round: int
    offline_ndcg10: float
    online_ndcg: float
    shown_ndcg: float


@dataclasses.dataclass(frozen=True)
class Cell:
    """The (algorithm, data, fold, seed, click model, defense) cell a row belongs to: the
    leading columns of ``attacks`` and ``utility``."""

    algo: str
    data: str
    fold: int
    seed: int
    click_model: str
    defense: str


@dataclasses.dataclass(frozen=True)
class AttackRecord(Cell):
    """One attack's score against one (click model, defense) cell (table ``attacks``)."""

    threat_model: str
    attack: str
    averaging: str
    accuracy: float
    precision: float
    recall: float
    f1: float
    auc: float
    n_queries: int
    probe_cohort: int
    reference: bool
    auc_counterfactual: float
    leakage: float
    leakage_normalized: float
    advantage: float
    advantage_counterfactual: float
    tpr_at_fpr_0_01: float
    tpr_at_fpr_0_001: float
    n_counterfactual: int


@dataclasses.dataclass(frozen=True)
class PerQueryRecord:
    """One attack's score on one (client, query) list (table ``per_query``)."""

    click_model: str
    defense: str
    attack: str
    client: int
    query: int
    n_shown: int
    n_clicked: int
    tp: int
    fp: int
    tn: int
    fn: int
    precision: float
    recall: float
    auc: float
    auc_counterfactual: float
    advantage: float
    advantage_counterfactual: float


@dataclasses.dataclass(frozen=True)
class AuditMeasurement:
    """What one empirical epsilon audit of a mechanism measures (``attacks.epsilon_bounds.audit``
    returns it, with its decision threshold and direction): the middle columns of ``audits``."""

    mechanism: str
    attack: str
    threat_model: str
    claimed_epsilon: float
    claimed_delta: float
    claimed_scope: str
    epsilon_point: float
    epsilon_lb: float
    confidence: float
    n_trials: int
    fpr: float
    fnr: float
    neighbours: str
    audited_scope: str
    test: str
    fp: int
    fn: int
    n0: int
    n1: int
    ceiling: float
    trial_limited: bool
    mu: float
    mu_lb: float
    rounds: int
    claim_verdict: str
    tightness: float
    small_error: str
    """``fp`` or ``fn``: the error rate the test chosen on the held-out half keeps small
    (``reports.claims`` orients runs by it before pooling their counts)."""
    verdict_by: str
    """The test the claim verdict rests on (``fltr_audit.privacy.claim_decision``): ``mu-GDP`` for a declared
    Gaussian law whose noise passed the normality test (``gof_pvalue``), else ``epsilon``."""
    gof_pvalue: float
    power: float
    """P(``violated``) for a mechanism at twice the claim at these trials (``consistent`` needs 0.9)."""
    trials_needed: float
    """Trials per input that would give the power 0.9 (an ``untestable`` verdict), else NaN."""
    mu_fp: int
    mu_fn: int
    """The mu test's error counts (its own held-out threshold), pooled like ``fp`` and ``fn``."""
    pair: str
    """The worst-case input pair chosen on the held-out half (``attacks.worst_case.worst_case_pairs``)."""
    pairs: int
    verdict_note: str
    """A cause the verdict names (e.g. a noise calibrated on a sensitivity below twice the clip)."""


@dataclasses.dataclass(frozen=True)
class AuditedRun:
    """The run an audit belongs to: the leading columns of ``audits``."""

    algo: str
    defense: str


@dataclasses.dataclass(frozen=True)
class RunPrivacy:
    """The defense's claim composed over the run (``defenses.accounting.privacy_spent``): the
    trailing columns of ``audits``. Against the server (no amplification by sampling) the worst
    user's realized participations and the 99th percentile user's; against an observer of the
    released models, the Poisson-sampled figure."""

    epsilon_server: float
    epsilon_server_q99: float
    epsilon_observer: float
    delta_total: float
    participations_max: int
    participations_q99: int


@dataclasses.dataclass(frozen=True)
class AuditRecord(RunPrivacy, AuditMeasurement, AuditedRun):
    """One empirical epsilon audit of a mechanism against its claim (table ``audits``); the
    columns are ``AuditedRun``'s, ``AuditMeasurement``'s, then ``RunPrivacy``'s (dataclass
    fields follow the bases from last to first), then ``audit_key``: the key of the audit's random
    stream (``RunSpec.audit_key``), equal only for bit-identical audits, so that pooling counts
    distinct audits."""

    audit_key: str


@dataclasses.dataclass(frozen=True)
class UtilityRecord(Cell):
    """Final nDCG@10 of one (click model, defense) training (table ``utility``)."""

    ndcg10: float
    ndcg10_delta: float


@dataclasses.dataclass(frozen=True)
class EpsilonRecord:
    """Click-model epsilon of one (model, levels, list length, p) (table ``epsilon``)."""

    click_model: str
    levels: int
    length: int
    p: float
    epsilon: float
    theoretical: float


@dataclasses.dataclass(frozen=True)
class RunAuditRecord:
    """The privacy over a whole run audited with canaries (``fltr-audit audit-run``; table
    ``run_audits``): the one-run lower bound (Steinke et al. 2023) with its guesses, the canary-count
    limit, the one-run estimate (Andrew et al. 2024) with its bootstrap interval, the multi-run bound
    from ``runs`` runs, the epsilon accounted for the canaries' participations against the server
    (what the verdict compares with), the population's (server: worst and 99th percentile user;
    observer of the released models), the claim and its verdict over the run.

    The f-DP one-run bound (Mahloujifar, Melis, Chaudhuri 2025; ``attacks.fdp_one_run``) over the
    ``fdp_pool`` canaries that took part ``fdp_participations`` times: ``mu_lb`` (mu-GDP curve,
    95 %) with its guesses, ``mu_limit`` (perfect guesses), ``epsilon_lb_fdp`` (the (eps, delta)
    curve); ``mu_claimed``: the claim as mu-GDP over those participations (nan unless the declared
    mechanism is Gaussian). ``verdict_by``: "f-DP mu" (mu_lb against mu_claimed; tightness
    mu_lb / mu_claimed) for a Gaussian claim, else "Steinke eps" (epsilon_lb against the accounted
    epsilon). The bounds rank scores rounded, ties broken at random; ``float_channel`` reports what
    the rounding hides."""

    algorithm: str
    defense: str
    scope: str
    canaries: int
    rounds: int
    runs: int
    sampling_rate: float
    delta: float
    epsilon_lb: float
    guesses: int
    correct: int
    canary_limit: float
    limited_by_canaries: bool
    epsilon_estimate: float
    estimate_low: float
    estimate_high: float
    epsilon_lb_multi: float
    multi_fp: int
    multi_fn: int
    multi_n: int
    epsilon_accounted_canaries: float
    canary_participations_max: int
    epsilon_server: float
    epsilon_server_q99: float
    epsilon_observer: float
    claimed_epsilon: float
    claimed_scope: str
    claim_verdict: str
    tightness: float
    mu_lb: float
    mu_limit: float
    mu_claimed: float
    epsilon_lb_fdp: float
    fdp_guesses: int
    fdp_correct: int
    fdp_pool: int
    fdp_participations: int
    verdict_by: str
    ndcg10: float
    seconds: float
    epsilon_estimate_reason: str = ""
    """Why ``epsilon_estimate`` is NaN (null in ``--json``): Andrew et al.'s Gaussian fit holds only
    for aggregate-scope cosines; empty when it was fitted."""
    canaries_needed: float = math.nan
    """For an ``untestable`` verdict: the canaries whose count limit would exceed the claim (same
    participation rate), else NaN."""
    float_channel: str = ""
    """``flagged`` or ``cleared``: the floating-point side channel below the scores' rounding
    (``attacks.float_channel``), a finding of its own beside the claim verdict."""
    float_channel_pvalue: float = math.nan
    audit_key: str = ""
    """The key of the whole-run audit (the spec parts it depends on), equal only for bit-identical
    audits, so that pooling counts distinct audits."""

    def as_dict(self) -> dict:
        """The record as a plain dict (a stored row, ``--json``)."""
        return dataclasses.asdict(self)



RECORDS: dict[str, type] = {
    "curves": CurveRecord, "attacks": AttackRecord, "per_query": PerQueryRecord,
    "audits": AuditRecord, "utility": UtilityRecord, "epsilon": EpsilonRecord, "run_audits": RunAuditRecord,
}


def columns(record: type) -> dict[str, str]:
    """``{column: SQL type}`` of a record class, in field order."""
    hints = typing.get_type_hints(record)
    return {field.name: SQL_TYPES[hints[field.name]] for field in dataclasses.fields(record)}
