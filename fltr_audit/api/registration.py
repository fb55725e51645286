"""Plug-ins registered in this process: attacks, defenses and algorithms usable by name everywhere
(``audit``, campaigns computed here). Installed plug-ins are found by entry point instead
(``docs/reference/plugins.md``)."""

from __future__ import annotations

from typing import Any, Callable

from attacks import registry as attack_registry
from defenses import registration as defense_registry
from fltr_audit.engine.algorithms import registry as algorithm_registry
from fltr_audit.engine.algorithms.registry import AlgorithmSpec


def register_attack(name: str, factory: Callable[..., Any], reference: bool = False,
                    needs: tuple[str, ...] = ()) -> None:
    """Add an attack: ``factory(**params)`` returns an object with ``name`` and
    ``guess(view: ServerView) -> Guess`` (a score per shown slot, higher = more likely clicked).

    ``needs`` names what the audit passes the factory, from ``seed``, ``algorithm``, ``k`` and
    ``noise``; ``reference=True`` marks a baseline that does not read the message. The
    attack is then usable by name everywhere in this process (``audit``, campaigns run here).
    Give every keyword of the factory a default: a campaign builds each attack once without
    arguments to check the names before any run.
    """
    attack_registry.register_attack(name, factory, reference=reference, needs=tuple(needs))


def register_defense(name: str, factory: Callable[..., Any], role: str = "client", *, guarantee: str = "",
                     summary: str = "") -> None:
    """Add a defense usable in defense strings (``name(key=value)+...``).

    ``factory(**params)`` returns a client defense (``apply(messages, global_params, rng) ->
    Messages``) or, with ``role="aggregator"``, an aggregator (``aggregate(messages,
    participants, rng) -> Aggregate``), carrying the ``claim`` (``PrivacyClaim``) it makes;
    ``guarantee`` states it in words for ``defenses list``. A client defense that transforms
    FOLtR-ES metric values declares ``privatizes = "metric"``. A defense declares what it does in
    its ``mechanism`` attribute (``fltr_audit.privacy.mechanisms``: ``Laplace``, ``Gaussian``,
    ``RandomizedResponse``, ...): the worst-case audit, the mechanism-aware test and the Bayes
    likelihood read it; one that declares nothing is audited with the learned test.
    """
    defense_registry.register_defense(name, factory, role, guarantee=guarantee, summary=summary)


def register_algorithm(spec: AlgorithmSpec) -> None:
    """Add an algorithm (``fltr_audit.engine.algorithms.registry.AlgorithmSpec``)."""
    algorithm_registry.register_algorithm(spec)
