"""``fltr-audit audit-defense STACK``: a defense stack audited as a mechanism on two neighbouring inputs.

Worst-case neighbours are crafted beyond the declared clip (``attacks.worst_case``); natural ones
are two real probe messages of an FPDGD model pre-trained on the synthetic profile with D
features (D = 46: MQ2008, D = 136: MSLR-WEB10K) -- the pair ``audit`` uses -- or, for
randomized response, FOLtR-ES's query-distinguishing pair (FOLtR-ES §4). Each row says what
was audited (one client's message, or the cohort aggregate), the test, the error counts, the
bound and the trial ceiling, the claim per round composed over ``--rounds`` (dp-accounting),
and the claim verdict.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from attacks.epsilon_bounds import NEIGHBOURS
from attacks.trial_sizing import auto_trials
from attacks.foltr_decode import audit_query_distinguishing
from attacks.mechanism_audit import audit_stack, protected_by_aggregator
from attacks.stack_outputs import metric_randomizer, noise_declarations, undeclared_client
from attacks.worst_case import worst_case_inputs
from defenses.accounting import ParticipationSchedule, privacy_spent
from fltr_audit.constraints import OPEN_UNIT, POSITIVE_INT, check
from fltr_audit.engine.clicks import cascade_model
from fltr_audit.engine.interfaces import PrivacyClaim
from fltr_audit.errors import FltrError
from fltr_audit.privacy import mechanisms as mech
from fltr_audit.runs.epsilon_audits import hides_messages, randomized_response
from fltr_audit.runs.executors import environment
from fltr_audit.runs.models import splits_of, trained
from fltr_audit.runs.natural_neighbours import natural_messages
from fltr_audit.spec.defense import DefenseSpec
from fltr_audit.spec.run import RunSpec, run_key
from fltr_audit.store.results import ResultsStore

AGGREGATE_TRIALS = 20_000
# Caps checked before anything is drawn: two float64 score arrays of --trials, one cohort of
# --cohort x --dim float64 messages per defense call.
MAX_TRIALS = 10_000_000
MAX_DIM = 100_000
MAX_ROUNDS = 1_000_000
MAX_COHORT_VALUES = 10_000_000
NATURAL_DATA = {46: "synthetic:mq2008", 136: "synthetic:mslr10k"}
COLUMNS = ("mechanism", "neighbours", "audited_scope", "threat_model", "test", "claimed_epsilon", "claimed_delta",
           "claimed_scope", "epsilon_point", "epsilon_lb", "ceiling", "trial_limited", "tightness", "mu", "mu_lb",
           "fpr", "fnr", "fp", "fn", "n0", "n1", "n_trials", "rounds", "confidence", "claim_verdict", "verdict_by",
           "gof_pvalue", "power", "trials_needed", "pair", "pairs", "verdict_note")


def composed_claim(stack: Any, rounds: int) -> PrivacyClaim:
    """The stack's per-round claim composed over ``rounds`` rounds of full participation."""
    claim = stack.claim
    if rounds == 1 or claim.epsilon == float("inf"):
        return claim
    epsilon = privacy_spent(stack, ParticipationSchedule.full(rounds)).epsilon_server
    return PrivacyClaim(epsilon=epsilon, delta=claim.delta, scope=claim.scope)


def natural_config(dim: int, cohort: int, seed: int) -> RunSpec:
    """The run configuration whose probe messages serve as natural neighbours (20 pre-training
    rounds of 100 clients x 4 queries, as ``audit`` does with fewer clients)."""
    if dim not in NATURAL_DATA:
        raise FltrError(f"--dim: natural neighbours are real messages of a synthetic profile; choose --dim "
                        f"{' or '.join(map(str, NATURAL_DATA))} (or --neighbours worst-case for any D)")
    return RunSpec.from_json({
        "data": NATURAL_DATA[dim], "fold": 1, "normalization": "zscore", "queries": None, "algo": "fpdgd",
        "rounds": 20, "clients": 100, "queries_per_client": 4, "ranker": "linear",
        "train_click_model": "perfect", "params": {}, "seed": seed, "defense": "none", "attacks": [],
        "probe": {"split": "vali", "queries_per_client": 1, "cohort": cohort}})


def run_audit_defense(defense: str | DefenseSpec, *, dim: int, trials: int, neighbours: str, rounds: int, cohort: int,
                      seed: int, test: str = "auto", confidence: float = 0.95,
                      aggregate_trials: int = AGGREGATE_TRIALS) -> list[dict]:
    """Audit rows of the stack ``defense`` (a spec, or its text; see the module docstring), each with its ``seconds``; rows of
    the cohort aggregate use at most ``aggregate_trials`` trials (each runs the defense on a whole
    cohort: dp-distributed draws its shares for the cohort it is applied to)."""
    if neighbours not in NEIGHBOURS:
        raise FltrError(f"--neighbours: unknown neighbour kind {neighbours!r} (choose {' or '.join(NEIGHBOURS)})")
    if not 100 <= trials <= MAX_TRIALS:
        raise FltrError(f"--trials: need 100..{MAX_TRIALS:,} trials per input, got {trials:,}")
    if not 1 <= dim <= MAX_DIM:
        raise FltrError(f"--dim: the message dimension must be 1..{MAX_DIM:,}, got {dim:,}")
    if not 1 <= rounds <= MAX_ROUNDS:
        raise FltrError(f"--rounds: must be 1..{MAX_ROUNDS:,}, got {rounds:,}")
    check("probe_cohort", cohort, POSITIVE_INT)
    if cohort * dim > MAX_COHORT_VALUES:
        raise FltrError(f"--probe-cohort {cohort:,} x --dim {dim:,}: one cohort's messages exceed "
                        f"{MAX_COHORT_VALUES:,} values")
    if not 100 <= aggregate_trials <= MAX_TRIALS:
        raise FltrError(f"--aggregate-trials: need 100..{MAX_TRIALS:,} trials per input, got {aggregate_trials:,}")
    stack = (defense if isinstance(defense, DefenseSpec) else DefenseSpec.parse(defense)).build()
    if not noise_declarations(stack) and not undeclared_client(stack) and protected_by_aggregator(stack) is None:
        raise FltrError(f"STACK: {stack.name!r} has nothing to audit (it claims no epsilon and declares no noise "
                        "mechanism; audit a stack with dp-local-laplace, dp-gaussian, dp-distributed or rr)")
    rr = metric_randomizer(stack) is not None
    shares = any(isinstance(m, mech.GammaShares) for m in noise_declarations(stack))
    claim = composed_claim(stack, rounds)
    common = dict(claim=claim, neighbours=neighbours, rounds=rounds, cohort=cohort, seed=seed, test=test,
                  confidence=confidence)
    in_aggregator = protected_by_aggregator(stack) is not None  # the aggregator's noise or shuffle is audited
    hides = not rr and hides_messages(stack, dim)
    scopes = ["aggregate"] if hides or in_aggregator else \
        ["message"] + (["aggregate"] if shares and cohort > 1 else [])
    jobs: list[tuple[str, dict]] = []
    if rr and neighbours == "natural":
        return [_rr_natural(stack, claim, trials, seed, confidence, rounds)]
    if neighbours == "worst-case":
        inputs = worst_case_inputs(stack, dim)
        jobs = [(scope, dict(inputs=inputs)) for scope in scopes]
    else:
        config = natural_config(dim, cohort, seed)
        pool, g, vector_kind, pair = natural_messages(config, splits_of(config), trained(config))
        jobs = [(scope, dict(inputs=pair, others=pool, g=g, kind=vector_kind)) for scope in scopes]
    rows = []
    for scope, extra in jobs:
        if scope == "aggregate" and cohort < 2 and not in_aggregator:
            continue
        start = time.perf_counter()
        n = min(trials, aggregate_trials) if scope == "aggregate" else trials
        result = audit_stack(stack, scope=scope, trials=n, **common, **extra)
        rows.append({**{k: v for k, v in result.as_dict().items() if k in COLUMNS},
                     "dim": dim, "cohort": cohort, "seconds": time.perf_counter() - start})
    return rows


def _rr_natural(stack: Any, claim: PrivacyClaim, trials: int, seed: int, confidence: float, rounds: int) -> dict:
    """Natural neighbours of randomized response: two queries' MaxRR under perfect clicks
    (``attacks.foltr_decode.audit_query_distinguishing``, one round)."""
    if rounds != 1:
        raise FltrError("--rounds: natural neighbours of randomized response are audited over one round")
    start = time.perf_counter()
    row = audit_query_distinguishing(randomized_response(stack), cascade_model("perfect", 3), n_trials=trials,
                                     seed=seed, confidence=confidence)
    row["mechanism"] = stack.name
    return {**{k: row[k] for k in COLUMNS}, "dim": 1, "cohort": 1, "seconds": time.perf_counter() - start}


def parse_trials(text: str, spec: DefenseSpec, confidence: float = 0.95) -> tuple[int, bool]:
    """``--trials``: a positive integer, or ``auto`` (``attacks.epsilon_bounds.auto_trials``: sized to the
    stack's claim, capped; exit 2 for a stack that claims no epsilon); and whether the cap cut it."""
    if str(text).strip() == "auto":
        try:
            return auto_trials(spec.claim.epsilon, spec.claim.delta, confidence)
        except FltrError:
            raise FltrError(f"--trials auto: defense {spec.name!r} claims no epsilon, so there "
                            "is nothing to size the trials by; give a number of trials") from None
    try:
        return int(str(text).replace("_", "").replace(",", "")), False
    except ValueError:
        raise FltrError(f"--trials: must be a positive integer or 'auto', got {text!r}") from None


def record_rows(store_path: Path, rows: list[dict], config: dict) -> str:
    """Write the audit rows into the ``audits`` table of a results store, as one run."""
    key = run_key(config)
    frame = pd.DataFrame([{**{k: v for k, v in r.items() if k not in ("dim", "cohort", "seconds")},
                           "defense": r["mechanism"], "attack": r["test"]} for r in rows])
    ResultsStore(store_path).record_run(key, "audit-defense", config, environment(), config["seed"],
                                        float(sum(r["seconds"] for r in rows)), {"audits": frame})
    return key


@dataclass(frozen=True)
class DefenseAudit:
    """The audit rows of a defense stack (each with its ``seconds``), its claim composed over the
    rounds against the server and an observer (``privacy``), the store's run key (None without a
    store) and whether ``trials="auto"`` was capped."""

    rows: list[dict]
    privacy: dict
    run_key: str | None
    capped: bool


def audit_defense(stack: str, *, dim: int = 46, trials: int | str = 100_000, neighbours: str = "worst-case",
                  rounds: int = 1, probe_cohort: int = 10, seed: int = 0, test: str = "auto",
                  confidence: float = 0.95, aggregate_trials: int = AGGREGATE_TRIALS,
                  store: str | Path | None = None) -> DefenseAudit:
    """Audit a defense stack as a mechanism (module docstring): an empirical lower bound on
    epsilon (and on Gaussian-DP mu) beside the claim per round composed over ``rounds``; with
    ``store``, the rows are also recorded there (``audits``)."""
    check("confidence", confidence, OPEN_UNIT)
    spec = DefenseSpec.parse(stack)
    n_trials, capped = parse_trials(trials, spec, confidence)
    rows = run_audit_defense(spec, dim=dim, trials=n_trials, neighbours=neighbours, rounds=rounds,
                             cohort=probe_cohort, seed=seed, test=test, confidence=confidence,
                             aggregate_trials=aggregate_trials)
    privacy = privacy_spent(spec.build(), ParticipationSchedule.full(rounds)).as_dict()
    config = {"command": "audit-defense", "defense": spec.name, "dim": dim, "trials": n_trials,
              "neighbours": neighbours, "rounds": rounds, "cohort": probe_cohort, "seed": seed, "test": test,
              "confidence": confidence, "aggregate_trials": aggregate_trials}
    key = record_rows(Path(store), rows, config) if store is not None else None
    return DefenseAudit(rows=rows, privacy=privacy, run_key=key, capped=capped)
