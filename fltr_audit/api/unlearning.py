"""``fltr_audit.audit_unlearning``: forgetting audited in one run with canaries (``fltr-audit
audit-unlearning``; ``docs/concepts/unlearning.md``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fltr_audit.api.keywords import check_keywords
from fltr_audit.api.run_tables import record_row
from fltr_audit.constraints import Options, ParameterError, check
from fltr_audit.engine.algorithms import registry as algorithms
from fltr_audit.engine.unlearning import METHODS
from fltr_audit.runs.executors import Executor
from fltr_audit.runs.unlearning import unlearning_audit, unlearning_config
from fltr_audit.spec.run import AlgorithmSettings, AuditSettings, DataSettings, ProbeSettings, RunSpec
from fltr_audit.spec.unlearning import DEFAULT_CANARIES, UnlearningOptions, check_unlearning
from fltr_audit.store.records import UnlearningAuditRecord

UNLEARNING_DEFAULTS: dict[str, Any] = {
    "method": "federaser", "forget": 0, "canaries": DEFAULT_CANARIES, "interval": 5, "calibration": 0.5,
    "unlearn_rounds": None, "scale": 10.0, "poison_check": False, "defense": "none", "data": "synthetic:mq2008",
    "fold": 1, "normalization": "none", "rounds": 100, "clients": 100, "population": 1000, "queries_per_client": 4,
    "click_model": None, "seed": 0, "ranker": "linear", "params": (), "non_iid": "iid", "confidence": 0.95,
    "workers": 1, "scheduler": None, "store": None,
}
"""Every keyword of :func:`audit_unlearning` with its default (``fltr-audit audit-unlearning``'s options)."""

KEYWORDS = {"data.spec": "data", "data.fold": "fold", "data.normalization": "normalization",
            "algorithm.name": "algorithm", "algorithm.rounds": "rounds", "algorithm.clients": "clients",
            "algorithm.queries_per_client": "queries_per_client", "algorithm.ranker": "ranker",
            "algorithm.train_click_model": "click_model", "algorithm.population": "population",
            "algorithm.non_iid": "non_iid", "defense": "defense", "audit.unlearning": "method",
            "audit.unlearning_forget": "forget", "audit.unlearning_canaries": "canaries"}
"""The engine's parameter names as :func:`audit_unlearning`'s keywords."""


def unlearning_spec(algorithm: str, options: dict[str, Any]) -> tuple[RunSpec, UnlearningOptions]:
    """The run spec and unlearning options of ``audit_unlearning``'s keywords (defaults filled in);
    ParameterError naming a setting that does not fit (the door renames it)."""
    o = {**UNLEARNING_DEFAULTS, **options}
    check("method", o["method"], (Options(METHODS),))
    click_model = o["click_model"] or algorithms.algorithm_spec(algorithm, auditable=True).train_click_model
    params = o["params"].items() if isinstance(o["params"], dict) else o["params"]
    unlearning = UnlearningOptions(method=o["method"], forget=o["forget"], canaries=o["canaries"],
                                   interval=o["interval"], calibration=o["calibration"],
                                   unlearn_rounds=o["unlearn_rounds"], scale=o["scale"],
                                   poison_check=o["poison_check"], confidence=o["confidence"])
    spec = RunSpec(
        data=DataSettings(spec=o["data"], fold=o["fold"], normalization=o["normalization"]),
        algorithm=AlgorithmSettings(name=algorithm, rounds=o["rounds"], clients=o["clients"],
                                    queries_per_client=o["queries_per_client"], ranker=o["ranker"],
                                    train_click_model=click_model, params=tuple(params),
                                    population=o["population"], non_iid=o["non_iid"]),
        probe=ProbeSettings(), defense=o["defense"], attacks=(),
        audit=AuditSettings(epsilon_audit=False, unlearning=o["method"], unlearning_forget=o["forget"],
                            unlearning_canaries=o["canaries"], unlearning_poison_check=o["poison_check"]),
        seed=o["seed"])
    return spec, unlearning


def checked_spec(algorithm: str, options: dict[str, Any]) -> tuple[RunSpec, UnlearningOptions]:
    """``unlearning_spec`` with every bad input found before anything is loaded (``check_unlearning``),
    named as the Python keyword."""
    try:
        spec, unlearning = unlearning_spec(algorithm, options)
        check_unlearning(spec, unlearning)
    except ParameterError as exc:  # named as the engine calls it: say the keyword typed
        raise (exc if exc.door else exc.renamed(KEYWORDS)) from None
    return spec, unlearning


def audit_unlearning(algorithm: str, **options: Any) -> UnlearningAuditRecord:
    """Forgetting audited in one run (``fltr-audit audit-unlearning``): train ``algorithm`` with
    canary clients of the population (each included with probability 1/2), forget ``forget`` users
    and every included canary by ``method`` (retrain | federaser | finetune | pga | none), and measure
    what the unlearned model (observer) and the before/after pair (the server) still tell.

    Keywords (``UNLEARNING_DEFAULTS`` lists them with their defaults): ``method``, ``forget``,
    ``canaries``, ``interval`` and ``calibration`` (FedEraser), ``unlearn_rounds`` (finetune, pga),
    ``scale`` (a canary's step), ``poison_check``, ``defense``, ``data``, ``fold``,
    ``normalization``, ``rounds``, ``clients``, ``population``, ``queries_per_client``,
    ``click_model`` (default: the algorithm's training one), ``seed``, ``ranker``, ``params``,
    ``non_iid``, ``confidence``, ``workers`` /
    ``scheduler`` (where the audit's trainings run: the same figures on every executor), ``store``
    (also record the row there). Returns the ``unlearning_audits`` row
    (``fltr_audit.store.records.UnlearningAuditRecord``): its ``verdict`` is the observer's."""
    check_keywords("audit_unlearning", options, UNLEARNING_DEFAULTS)
    spec, unlearning = checked_spec(algorithm, options)
    executor = Executor(workers=options.get("workers", 1), scheduler=options.get("scheduler"))
    out = unlearning_audit(spec, unlearning, executor)
    if options.get("store") is not None:
        record_unlearning(Path(options["store"]), spec, unlearning, out)
    return out


def record_unlearning(store: Path, spec: RunSpec, options: UnlearningOptions, out: UnlearningAuditRecord) -> str:
    """Write the row into the ``unlearning_audits`` table of a results store, as one run; its key."""
    return record_row(store, "audit-unlearning", unlearning_config(spec, options), spec.seed, out.seconds,
                      "unlearning_audits", out.as_dict())
