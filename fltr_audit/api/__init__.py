"""The Python API: a call for everything the command line does, and plug-ins.

It builds the same typed specs the command line builds (``fltr_audit.spec``) and runs them through
``fltr_audit.runs``; the command line is a thin adapter over it, and nothing here imports typer
or click. Part of the composition root: it may import ``attacks``, ``defenses`` and ``reports``.

``fltr-audit``                      Python
=================================  ===================================
``audit``                           ``audit(...)`` -> ``AuditResult``
``campaign run``                    ``audit_campaign(path_or_mapping)``
``audit-run``                       ``audit_whole_run(algorithm, ...)``
``audit-unlearning``                ``audit_unlearning(algorithm, ...)``
``audit-defense``                   ``audit_defense(stack, ...)``
``attack``                          ``attack_recording(folder, ...)``
``train NAME``                      ``train(name, ...)``, ``train_foltr_es``, ``train_fedips``, ...
``compare``, ``report``             ``compare(store, ...)``, ``report(store, out)``
``epsilon``                         ``epsilon_table(...)``
``demo``                            ``demo(...)``
``defenses|attacks|algorithms list``  ``defense_rows()``, ``attack_rows()``, ``algorithm_rows()``
``bench NAME``                      ``bench_NAME(...)`` in ``fltr_audit.api.bench``, ``bench_core``, ...
=================================  ===================================
=======
Examples
--------
```python
import fltr_audit

result = fltr_audit.audit(data="synthetic:mq2008", rounds=5, attacks=["olsr"],
                          defenses=["none"], click_models=["perfect"], seeds=[0])
result.summary()                 # the two verdict tables the audit command prints
result.verdicts                  # the same as a DataFrame
result.report("audit-report")    # report.html, report.md, plots, CSVs
fltr_audit.explain("±detect")    # what a printed word means
```

| `fltr-audit` | Python |
|---|---|
| `audit` | `audit(...)` -> `AuditResult` |
| `campaign run` | `audit_campaign(path_or_mapping)` |
| `audit-run` | `audit_whole_run(algorithm, ...)` |
| `audit-unlearning` | `audit_unlearning(algorithm, ...)` |
| `audit-defense` | `audit_defense(stack, ...)` |
| `attack` | `attack_recording(folder, ...)` -> `RecordingAttack` |
| `train NAME` | `train(name, ...)`, `train_foltr_es`, `train_fedips`, ... |
| `compare`, `report` | `compare(store, ...)`, `report(store, out)` |
| `epsilon` | `epsilon_table(...)` |
| `demo` | `demo(...)` |
| `explain` | `explain(term)` |
| `defenses list`, `attacks list`, `algorithms list` | `defense_rows()`, `attack_rows()`, `algorithm_rows()` |
| `bench NAME` | `bench_NAME(...)` in `fltr_audit.api.bench` (`fpdgd`, `foltr_es`, `fedips`, `data`), `bench_core` (`core`, `scaling`, `bandwidth`), `bench_attacks`, `bench_defenses` (not re-exported: measurement tools) |
"""

import importlib

NAMES = {
    "AlgorithmSpec": ("fltr_audit.api.registration", "AlgorithmSpec"),
    "AuditOptions": ("fltr_audit.spec.audit_options", "AuditOptions"),
    "AuditResult": ("fltr_audit.api.results", "AuditResult"),
    "accountant": ("fltr_audit.api.accounting", "accountant"),
    "algorithm_rows": ("fltr_audit.api.listing", "algorithm_rows"),
    "attack_recording": ("fltr_audit.api.recording_attacks", "attack_recording"),
    "attack_rows": ("fltr_audit.api.listing", "attack_rows"),
    "audit": ("fltr_audit.api.audits", "audit"),
    "audit_campaign": ("fltr_audit.api.campaign", "audit_campaign"),
    "audit_defaults": ("fltr_audit.api.audits", "audit_defaults"),
    "audit_defense": ("fltr_audit.api.defense_audit", "audit_defense"),
    "audit_unlearning": ("fltr_audit.api.unlearning", "audit_unlearning"),
    "audit_whole_run": ("fltr_audit.api.whole_run", "audit_whole_run"),
    "compare": ("fltr_audit.api.comparison", "compare"),
    "defense_rows": ("fltr_audit.api.listing", "defense_rows"),
    "demo": ("fltr_audit.api.demo_run", "run_demo"),
    "epsilon_table": ("fltr_audit.api.epsilon", "epsilon_table"),
    "explain": ("fltr_audit.api.glossary", "explain"),
    "register_algorithm": ("fltr_audit.api.registration", "register_algorithm"),
    "register_attack": ("fltr_audit.api.registration", "register_attack"),
    "register_defense": ("fltr_audit.api.registration", "register_defense"),
    "report": ("fltr_audit.api.comparison", "report"),
    "train": ("fltr_audit.api.training", "train"),
    "train_baselines": ("fltr_audit.api.train_foltr_es", "train_baselines"),
    "train_fedips": ("fltr_audit.api.train_fedips", "train_fedips"),
    "train_foltr_es": ("fltr_audit.api.train_foltr_es", "train_foltr_es"),
    "train_lambda_linear_baseline": ("fltr_audit.api.train_fedips", "train_lambda_linear_baseline"),
}
"""Every public name -> (its module, its name there), imported on first use: the command line
loads only the module of the command it runs (start-up time), a notebook the ones it calls."""

__all__ = sorted(NAMES)


def __getattr__(name: str):
    if name in NAMES:
        module, attribute = NAMES[name]
        return getattr(importlib.import_module(module), attribute)
    raise AttributeError(f"module 'fltr_audit.api' has no attribute {name!r}")
