"""``fltr_audit.audit_whole_run``: the privacy a user spends over a whole run, audited with canaries
(``fltr-audit audit-run``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fltr_audit.api.keywords import check_keywords
from fltr_audit.api.run_tables import record_row
from fltr_audit.constraints import ParameterError
from fltr_audit.engine.algorithms import registry as algorithms
from fltr_audit.runs.executors import Executor
from fltr_audit.runs.whole_run import CanaryOptions, audit_run_config, whole_run_audit
from fltr_audit.spec.run import AlgorithmSettings, AuditSettings, DataSettings, ProbeSettings, RunSpec
from fltr_audit.store.records import RunAuditRecord

WHOLE_RUN_DEFAULTS: dict[str, Any] = {
    "defense": "none", "canaries": 200, "runs": 1, "data": "synthetic:mq2008", "fold": 1, "rounds": 100,
    "clients": 1000, "population": None, "queries_per_client": 4, "click_model": None, "seed": 0,
    "ranker": "linear", "params": (), "non_iid": "iid", "poison": "none", "confidence": 0.95,
    "claim_verdict": False, "workers": 1, "scheduler": None, "store": None,
}
"""Every keyword of :func:`audit_whole_run` with its default (``fltr-audit audit-run``'s options)."""


KEYWORDS = {"data.spec": "data", "data.fold": "fold", "algorithm.name": "algorithm", "algorithm.rounds": "rounds",
            "algorithm.clients": "clients", "algorithm.queries_per_client": "queries_per_client",
            "algorithm.ranker": "ranker", "algorithm.train_click_model": "click_model",
            "algorithm.population": "population", "algorithm.non_iid": "non_iid", "algorithm.poison": "poison",
            "defense": "defense",
            "audit.run_canaries": "canaries", "audit.run_runs": "runs"}
"""The engine's parameter names as :func:`audit_whole_run`'s keywords."""


def whole_run_spec(algorithm: str, options: dict[str, Any]) -> tuple[RunSpec, CanaryOptions]:
    """The run spec and canary options of ``audit_whole_run``'s keywords (defaults filled in);
    ParameterError naming a setting that does not fit (the door renames it)."""
    o = {**WHOLE_RUN_DEFAULTS, **options}
    click_model = o["click_model"] or algorithms.algorithm_spec(algorithm, auditable=True).train_click_model
    params = o["params"].items() if isinstance(o["params"], dict) else o["params"]
    spec = RunSpec(
        data=DataSettings(spec=o["data"], fold=o["fold"], normalization="none"),
        algorithm=AlgorithmSettings(name=algorithm, rounds=o["rounds"], clients=o["clients"],
                                    queries_per_client=o["queries_per_client"], ranker=o["ranker"],
                                    train_click_model=click_model, params=tuple(params),
                                    population=o["population"], non_iid=o["non_iid"], poison=o["poison"]),
        probe=ProbeSettings(), defense=o["defense"], attacks=(),
        audit=AuditSettings(run_canaries=o["canaries"], run_runs=o["runs"]), seed=o["seed"])
    canaries = CanaryOptions(canaries=o["canaries"], runs=o["runs"], confidence=o["confidence"],
                             require_claim=o["claim_verdict"])
    return spec, canaries


def audit_whole_run(algorithm: str, **options: Any) -> RunAuditRecord:
    """The privacy a user spends over a whole run, audited with canaries (``fltr-audit audit-run``).

    Keywords (``WHOLE_RUN_DEFAULTS`` lists them with their defaults): ``defense``, ``canaries``,
    ``runs``, ``data``, ``fold``, ``rounds``, ``clients``, ``population``, ``queries_per_client``,
    ``click_model`` (default: the algorithm's training one), ``seed``, ``ranker``, ``params``,
    ``non_iid``, ``poison`` (malicious clients of every cohort: the canaries' privacy in a
    federation under attack), ``confidence``,
    ``claim_verdict`` (require a claim), ``workers`` / ``scheduler`` (where the ``runs`` trainings
    run: the same figures on every executor), ``store`` (also record the row there). Returns the
    ``run_audits`` row (``fltr_audit.store.records.RunAuditRecord``)."""
    check_keywords("audit_whole_run", options, WHOLE_RUN_DEFAULTS)
    try:
        spec, canaries = whole_run_spec(algorithm, options)
    except ParameterError as exc:  # named as the engine calls it: say the keyword typed
        raise (exc if exc.door else exc.renamed(KEYWORDS)) from None
    executor = Executor(workers=options.get("workers", 1), scheduler=options.get("scheduler"))
    out = whole_run_audit(spec, canaries, executor)
    if options.get("store") is not None:
        record_whole_run(Path(options["store"]), spec, canaries, out)
    return out


def record_whole_run(store: Path, spec: RunSpec, options: CanaryOptions, out: RunAuditRecord) -> str:
    """Write the row into the ``run_audits`` table of a results store, as one run; return its key."""
    return record_row(store, "audit-run", audit_run_config(spec, options), spec.seed, out.seconds, "run_audits",
                      out.as_dict())
