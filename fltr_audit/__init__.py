"""fltr-audit: privacy audit and attack testbed for federated online learning to rank.

The engine: data, click models, rankers, metrics, the federated algorithms, the
federation loop with its message interception, and the interfaces that the
``attacks``, ``defenses`` and ``reports`` packages implement.

The Python API (``fltr_audit.api``, loaded on first use so that ``import fltr_audit`` stays
light): ``audit(...)``, ``campaign(path_or_dict)``, ``register_attack``, ``register_defense``,
``register_algorithm``, ``AuditResult``, ``AlgorithmSpec``. ``fltr_audit.campaign`` is also
the module of campaign files; calling it runs one (``fltr_audit.api.campaign``).
"""

import importlib
import sys
import types

__version__ = "0.1.0"

_API = ("audit", "audit_defaults", "audit_whole_run", "accountant", "register_attack", "register_defense",
        "register_algorithm", "AuditResult", "AlgorithmSpec")
__all__ = ["__version__", "campaign", *_API]


class _CampaignModule(types.ModuleType):
    """The ``fltr_audit.campaign`` module, callable as the API's ``campaign``."""

    def __call__(self, path_or_dict, store=None):
        from fltr_audit.api import campaign

        return campaign(path_or_dict, store=store)


class _Package(types.ModuleType):
    def __setattr__(self, name: str, value) -> None:
        if name == "campaign" and isinstance(value, types.ModuleType):
            value.__class__ = _CampaignModule  # the import system binds the submodule here
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def __getattr__(name: str):
    if name == "campaign":
        return importlib.import_module("fltr_audit.campaign")
    if name in _API:
        return getattr(importlib.import_module("fltr_audit.api"), name)
    raise AttributeError(f"module 'fltr_audit' has no attribute {name!r}")
