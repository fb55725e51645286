"""The settings of an audit and their defaults, declared once (``AuditOptions``): the Python API's
``fltr_audit.audit`` keywords and the ``fltr-audit audit`` command's options read them from here.
A light module (no numpy): the command line reads the defaults when it starts."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

DEFAULT_MIN_EFFECT = 0.05
"""The smallest leak (AUC) a default audit must be able to find or rule out (``reports.leakage.MIN_EFFECT``)."""
DEFAULT_POWER = 0.9
"""The probability with which a default audit's list count decides at ``DEFAULT_MIN_EFFECT``
(``fltr_audit.spec.plan``): about 450-700 lists per click model for four or five informed attacks."""

LISTS = {"folds": int, "seeds": int, "defenses": str, "attacks": str, "click_models": str, "poison": str}
"""The list settings and their item type (a list, a tuple, one item, or comma-separated text)."""


@dataclass(frozen=True)
class AuditOptions:
    """Every setting of an audit with its default (``fltr-audit audit``'s options, named as the
    Python keywords). ``attacks`` / ``click_models`` None: the algorithm's own set; ``min_shown``
    None: a full list of the algorithm's; ``trials``: a number per input or ``"auto"``. The list
    count is planned from ``min_effect`` and ``power`` (``fltr_audit.spec.plan``) unless
    ``probe_lists`` fixes it; ``power`` None and no ``probe_lists``: one pass over the probe split."""

    algorithm: str = "fpdgd"
    data: str = "synthetic:mq2008"
    folds: tuple[int, ...] = (1,)
    rounds: int = 20
    clients: int = 1000
    queries_per_client: int = 4
    attacks: tuple[str, ...] | None = None
    defenses: tuple[str, ...] = ("none",)
    click_models: tuple[str, ...] | None = None
    split: str = "vali"
    seeds: tuple[int, ...] = (0,)
    probe_cohort: int = 100
    probe_queries: int = 1
    normalization: str = "auto"
    ranker: str = "linear"
    min_shown: int | None = None
    require_click: bool = True
    epsilon_audit: bool = True
    trials: int | str = 10000
    counterfactual: int = 20
    population: int | None = None
    non_iid: str = "iid"
    poison: tuple[str, ...] = ()
    """Poisonings: every defense also trains under each of them (integrity), beside its clean run."""
    min_effect: float = DEFAULT_MIN_EFFECT
    probe_lists: int | None = None
    power: float | None = DEFAULT_POWER
    threat_model: str = "server"
    manipulation: str = "isolate"
    store: str | None = None

    def resolved(self) -> dict[str, Any]:
        """Every setting with its value (what a result's ``inputs`` show)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


DEFAULTS = AuditOptions()

DEMO_MIN_EFFECT = DEFAULT_MIN_EFFECT
"""The demo's minimum effect (AUC): the default's, with ``DEMO_POWER``."""
DEMO_POWER = DEFAULT_POWER


def audit_defaults() -> dict[str, Any]:
    """Every keyword of ``fltr_audit.audit`` with its default (lists as lists)."""
    return {f.name: list(f.default) if isinstance(f.default, tuple) else f.default
            for f in dataclasses.fields(AuditOptions)}
