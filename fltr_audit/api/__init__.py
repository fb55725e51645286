"""The Python API: a call for everything the command line does, and plug-ins.

It builds the same typed specs the command line builds (``fltr_audit.spec``) and runs them through
``fltr_audit.runs``; the command line is a thin adapter over it, and nothing here imports typer
or click. Part of the composition root: it may import ``attacks``, ``defenses`` and ``reports``.

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
| `audit-defense` | `audit_defense(stack, ...)` |
| `attack` | `attack_recording(folder, ...)` -> `RecordingAttack` |
| `train NAME` | `train(name, ...)`, `train_foltr_es`, `train_fedips`, ... |
| `compare`, `report` | `compare(store, ...)`, `report(store, out)` |
| `epsilon` | `epsilon_table(...)` |
| `demo` | `demo(...)` |
| `explain` | `explain(term)` |
| `defenses list`, `attacks list`, `algorithms list` | `defense_rows()`, `attack_rows()`, `algorithm_rows()` |
"""

from fltr_audit.api.accounting import accountant
from fltr_audit.api.attack_recording import attack_recording
from fltr_audit.api.audit import audit, audit_defaults
from fltr_audit.api.audit_defense import audit_defense
from fltr_audit.api.campaign import audit_campaign
from fltr_audit.api.compare import compare, report
from fltr_audit.api.demo import run_demo as demo
from fltr_audit.api.epsilon import epsilon_table
from fltr_audit.api.glossary import explain
from fltr_audit.api.listing import algorithm_rows, attack_rows, defense_rows
from fltr_audit.api.registration import AlgorithmSpec, register_algorithm, register_attack, register_defense
from fltr_audit.api.results import AuditResult
from fltr_audit.api.train import train
from fltr_audit.api.train_fedips import train_fedips, train_lambda_linear_baseline
from fltr_audit.api.train_foltr_es import train_baselines, train_foltr_es
from fltr_audit.api.whole_run import audit_whole_run
from fltr_audit.spec.audit_options import AuditOptions

__all__ = ["AlgorithmSpec", "AuditOptions", "AuditResult", "accountant", "algorithm_rows", "attack_recording",
           "attack_rows", "audit", "audit_campaign", "audit_defaults", "audit_defense", "audit_whole_run", "compare",
           "defense_rows", "demo", "epsilon_table", "explain", "register_algorithm", "register_attack", "register_defense",
           "report", "train", "train_baselines", "train_fedips", "train_foltr_es", "train_lambda_linear_baseline"]
