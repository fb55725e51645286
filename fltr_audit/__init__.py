"""fltr-audit: privacy audit and attack testbed for federated online learning to rank.

The layers, top down (imports point down only; ``tests/test_layers.py`` holds the rule):

* ``cli/`` -- the command line, a thin adapter over the Python API;
* ``api`` -- the Python API: builds typed specs and runs them;
* ``runs/`` -- one audit run, whole-run audits, the campaign runner, the executors;
* ``spec/`` -- specs as values (run, campaign, grid);
* ``store/`` -- the results store, its records, the recording format;
* ``privacy/`` -- declared mechanisms and claim trials;
* ``engine/`` -- data, click models, rankers, algorithms, the federation loop, kernels;
* ``errors``, ``constraints``, ``plugins``, ``base/`` (atomic writes, memory budgets, untrusted files)
  -- the vocabulary every layer uses.

The Python API (``fltr_audit.api``, loaded on first use so that ``import fltr_audit`` stays
light): a call for every command -- ``audit(...)``, ``audit_campaign(path_or_mapping)``,
``audit_whole_run``, ``audit_unlearning``, ``audit_defense``, ``train``, ``compare``, ``report``, ... -- and
``register_attack``, ``register_defense``, ``register_algorithm``.
"""

import importlib
import importlib.machinery
import sys

from fltr_audit._version import __version__

_API = ("AlgorithmSpec", "AuditOptions", "AuditResult", "accountant", "algorithm_rows", "attack_recording",
        "attack_rows", "audit", "audit_campaign", "audit_defaults", "audit_defense", "audit_unlearning",
        "audit_whole_run", "compare", "defense_rows", "demo", "epsilon_table", "explain", "register_algorithm",
        "register_attack", "register_defense",
        "report", "train", "train_baselines", "train_fedips", "train_foltr_es", "train_lambda_linear_baseline")
__all__ = ["__version__", *_API]


def __getattr__(name: str):
    if name in _API:
        module, attribute = importlib.import_module("fltr_audit.api").NAMES[name]
        return getattr(importlib.import_module(module), attribute)
    raise AttributeError(f"module 'fltr_audit' has no attribute {name!r}")


MOVED = {
    "fltr_audit.federation": "fltr_audit.engine.federation",
    "fltr_audit.messages": "fltr_audit.engine.messages",
    "fltr_audit.interfaces": "fltr_audit.engine.interfaces",
    "fltr_audit.interceptors": "fltr_audit.store.interceptors",
    "fltr_audit.aggregation": "fltr_audit.engine.aggregation",
    "fltr_audit.round_parts": "fltr_audit.engine.round_parts",
    "fltr_audit.clicks": "fltr_audit.engine.clicks",
    "fltr_audit.rankers": "fltr_audit.engine.rankers",
    "fltr_audit.metrics": "fltr_audit.engine.metrics",
    "fltr_audit.maxrr": "fltr_audit.engine.maxrr",
    "fltr_audit.plackett_luce": "fltr_audit.engine.plackett_luce",
    "fltr_audit.probe": "fltr_audit.engine.probe",
    "fltr_audit.population": "fltr_audit.engine.population",
    "fltr_audit.cohorts": "fltr_audit.engine.cohorts",
    "fltr_audit.randomness": "fltr_audit.engine.randomness",
    "fltr_audit.threads": "fltr_audit.engine.threads",
    "fltr_audit.malicious": "fltr_audit.engine.malicious",
    "fltr_audit.algorithms": "fltr_audit.engine.algorithms",
    "fltr_audit.data": "fltr_audit.engine.data",
    "fltr_audit.kernels": "fltr_audit.engine.kernels",
    "fltr_audit.mechanisms": "fltr_audit.privacy.mechanisms",
    "fltr_audit.claim_trials": "fltr_audit.privacy.claim_trials",
    "fltr_audit.run_spec": "fltr_audit.spec.run",
    "fltr_audit.campaign_spec": "fltr_audit.spec.campaign",
    "fltr_audit.campaign_grid": "fltr_audit.spec.grid",
    "fltr_audit.defense_spelling": "fltr_audit.store.defense_spelling",
    "fltr_audit.audit_pipeline": "fltr_audit.runs.audit",
    "fltr_audit.whole_run": "fltr_audit.runs.whole_run",
    "fltr_audit.campaign": "fltr_audit.spec.campaign",
    "fltr_audit.executors": "fltr_audit.runs.executors",
    "fltr_audit.interrupts": "fltr_audit.runs.interrupts",
    "fltr_audit.records": "fltr_audit.store.records",
    "fltr_audit.atomic": "fltr_audit.base.atomic",
    "fltr_audit.recording": "fltr_audit.store.recording",
}
"""Import paths of modules before they moved into the layer folders -> where they are now. Plug-ins
written against the documented paths (``fltr_audit.mechanisms``, ``fltr_audit.messages``, ...) import
them unedited: the old name is the same module object, submodules included."""


class _MovedModules:
    """Resolves an old import path (``MOVED``, or a submodule of a moved package) to its module: a
    meta path finder and its loader (``importlib.abc.MetaPathFinder`` and ``Loader``'s methods)."""

    @staticmethod
    def _target(name: str) -> str | None:
        for old, new in MOVED.items():
            if name == old or name.startswith(old + "."):
                return new + name[len(old):]
        return None

    def find_spec(self, name, path=None, target=None):
        new = self._target(name)
        return None if new is None else importlib.machinery.ModuleSpec(name, self)

    def __init__(self) -> None:
        self.own_specs: dict = {}

    def create_module(self, spec):
        module = importlib.import_module(self._target(spec.name))  # the module itself, not a copy
        self.own_specs[module.__name__] = module.__spec__
        return module

    def exec_module(self, module) -> None:
        """Nothing to run: the module already ran; give it back its own spec, which the import
        system replaced with the old name's."""
        module.__spec__ = self.own_specs[module.__name__]


sys.meta_path.insert(0, _MovedModules())
