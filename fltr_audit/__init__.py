"""fltr-audit: privacy audit and attack testbed for federated online learning to rank.

The engine: data, click models, rankers, metrics, the federated algorithms, the
federation loop with its message interception, and the interfaces that the
``attacks``, ``defenses`` and ``reports`` packages implement.

The Python API (``fltr_audit.api``, loaded on first use so that ``import fltr_audit`` stays
light): ``audit(...)``, ``audit_campaign(path_or_dict)``, ``register_attack``,
``register_defense``, ``register_algorithm``, ``AuditResult``, ``AlgorithmSpec``.
``fltr_audit.campaign`` is the module of campaign files.
"""

import importlib

from fltr_audit._version import __version__

_API = ("audit", "audit_campaign", "audit_defaults", "register_attack", "register_defense", "register_algorithm",
        "AuditResult", "AlgorithmSpec")
__all__ = ["__version__", *_API]


def __getattr__(name: str):
    if name in _API:
        return getattr(importlib.import_module("fltr_audit.api"), name)
    raise AttributeError(f"module 'fltr_audit' has no attribute {name!r}")
