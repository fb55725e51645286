"""The demo (``fltr-audit demo``): an algorithm audited under five defenses -- one a pure-noise control,
one deliberately miscalibrated -- on the embedded synthetic default, the FOLtR-ES epsilon table,
and the report, in one folder (a results store, so a second demo reuses the finished runs)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from attacks.epsilon import epsilon_rows
from fltr_audit.api.audits import audit_campaign_of
from fltr_audit.base.atomic import write_files
from fltr_audit.engine.algorithms.registry import algorithm_spec
from fltr_audit.errors import FltrError
from fltr_audit.runs.campaign import run_campaign
from fltr_audit.runs.executors import Executor
from fltr_audit.runs.progress import NO_PROGRESS, Progress
from fltr_audit.spec.audit_options import DEMO_MIN_EFFECT, DEMO_POWER, AuditOptions
from fltr_audit.spec.grid import expand
from fltr_audit.spec.run import run_key
from fltr_audit.store.results import ResultsStore, load
from reports.compare import as_references, compare, verdicts
from reports.leakage import roc_rows
from reports.render import render_report

VECTOR_DEFENSES = ("none", "clip(sensitivity=5)+dp-distributed(eps=4.5)", "dp-local-laplace(eps=4.5)", "secagg",
                   "dp-local-laplace(eps=0.01)")
"""The demo's defenses of vector messages (FPDGD, FedIPS): the second is deliberately miscalibrated
(clipping to its sensitivity instead of half of it, so its claim must read violated); the last is
the pure-noise control (its messages carry almost nothing of the clicks, so its leakage verdict
must read 'no measurable leakage')."""
METRIC_DEFENSES = ("none", "rr(p=0.9)", "rr(p=0.99)", "rr(p=0.55)")
"""The demo's defenses of FOLtR-ES metric messages (randomized response; p close to 1/2 as the control)."""
DEMO_ATTACKS = ("olsr", "olsr-l1", "score", "prob", "random3")
EPSILON_P = [0.25, 0.5, 0.75, 0.9, 0.95, 0.99]
EPSILON_MODELS = ["perfect", "navigational", "informational"]


@dataclass(frozen=True)
class DemoResult:
    """The demo's verdicts, attack table and ROC rows, its counts, report path and time."""

    verdicts: pd.DataFrame
    attacks: pd.DataFrame
    roc: pd.DataFrame
    counts: dict[str, int]
    report: Path
    seconds: float
    min_effect: float

    def as_json(self) -> dict[str, Any]:
        """What ``fltr-audit demo --json`` prints as its result."""
        return {"attacks": as_references(self.attacks).to_dict(orient="records"),
                "verdicts": self.verdicts.to_dict(orient="records"), "roc": self.roc.to_dict(orient="records"),
                "report": str(self.report), "seconds": self.seconds, "runs": self.counts}


def demo_options(algorithm: str, data: str, rounds: int, clients: int, seed: int, min_effect: float,
                 probe_lists: int | None, power: float | None) -> AuditOptions:
    """The demo's audit: the algorithm's defenses, attacks and probe click models, lists planned by power."""
    spec = algorithm_spec(algorithm, auditable=True)
    metric = spec.message_kind == "seed+metric"
    attacks = None if metric else tuple(a for a in DEMO_ATTACKS if a in spec.default_attacks or a == "olsr-l1")
    return AuditOptions(algorithm=algorithm, data=data, rounds=rounds, clients=clients, seeds=(seed,),
                        defenses=METRIC_DEFENSES if metric else VECTOR_DEFENSES, attacks=attacks,
                        click_models=None if spec.click_models == "pbm" else tuple(EPSILON_MODELS),
                        min_effect=min_effect, probe_lists=probe_lists, power=power)


def demo_steps(store: Path, **options: Any) -> int:
    """The steps ``run_demo`` reports to its progress: each audit run still to compute into ``store``
    (``<out>/results.sqlite``), the FOLtR-ES epsilon table and the report."""
    spec = audit_campaign_of(demo_options(**options), name="demo")
    done = ResultsStore(store, readonly=True).completed_keys() if Path(store).is_file() else set()
    return len({run.key for run in expand(spec)} - done) + 2


def run_demo(*, algorithm: str = "fpdgd", data: str = "synthetic:mq2008", out: Path = Path("fltr-audit-demo"),
             rounds: int = 20, clients: int = 1000, seed: int = 0, executor: Executor = Executor(workers=None),
             min_effect: float = DEMO_MIN_EFFECT, probe_lists: int | None = None, power: float | None = DEMO_POWER,
             progress: Progress = NO_PROGRESS) -> DemoResult:
    """Run the demo into ``out`` (``results.sqlite`` and ``report/``; finished runs are reused)."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise FltrError(f"--out {out}: exists and is not a directory")
    start = time.perf_counter()
    options = demo_options(algorithm, data, rounds, clients, seed, min_effect, probe_lists, power)
    spec = audit_campaign_of(options, name="demo")
    out.mkdir(parents=True, exist_ok=True)
    store = ResultsStore(out / "results.sqlite")
    failures: list[str] = []

    def on_done(run, error):
        if error:
            failures.append(error)
        progress.advance(description="demo: audit runs")

    counts = run_campaign(spec, store, executor=executor, on_done=on_done)
    if failures:
        raise FltrError(f"demo: {len(failures)} run(s) failed: {failures[0]}")
    counts = _with_epsilon_table(store, counts)
    progress.advance(description="demo: FOLtR-ES epsilon table")
    tables = load(out / "results.sqlite")
    command = (f"fltr-audit demo {algorithm} --data {data} --rounds {rounds} --clients {clients} --seed {seed} "
               f"--min-effect {min_effect:g} --probe-lists {spec.probe.lists}")
    write_files(out / "report", render_report(tables, title=f"fltr-audit demo: {algorithm} under five defenses",
                                              methods={"demo": command}, min_effect=min_effect))
    progress.advance(description="demo: report")
    return DemoResult(verdicts=verdicts(tables, min_effect=min_effect),
                      attacks=compare(tables, by=("defense",), min_effect=min_effect),
                      roc=roc_rows(tables.get("attacks")), counts=counts, report=out / "report" / "report.html",
                      seconds=time.perf_counter() - start, min_effect=min_effect)


def _with_epsilon_table(store: ResultsStore, counts: dict[str, int]) -> dict[str, int]:
    """The FOLtR-ES epsilon table recorded as a run of the store (the report counts it)."""
    config = {"campaign": "demo", "kind": "foltr-es epsilon table", "p": EPSILON_P, "models": EPSILON_MODELS}
    key = run_key(config)
    if key in store.completed_keys():
        return {**counts, "skipped": counts["skipped"] + 1}
    start = time.perf_counter()
    table = pd.DataFrame(epsilon_rows(EPSILON_MODELS, EPSILON_P))
    store.record_run(key, "demo", config, {}, None, time.perf_counter() - start, {"epsilon": table})
    return {**counts, "done": counts["done"] + 1}
