"""``defenses list``: every defense of the catalog with its role, parameters, summary, claimed
guarantee, and the claim and view of its defaults -- read from the catalog's declarations, so
that no built-in defense is imported; a plug-in (declaring neither) is built with its defaults."""

from __future__ import annotations

from typing import Any

from defenses.catalog import SPECS, Spec, format_value
from defenses.parameter_domains import MAXRR_VALUES


def list_defenses() -> list[dict]:
    """One row per defense of the catalog (plug-ins registered in this process included)."""
    return [_row(spec) for spec in SPECS.values()]


def _row(spec: Spec) -> dict[str, Any]:
    claim, sees = spec.default_claim, spec.sees
    if claim is None or (spec.role == "aggregator" and sees is None):
        from defenses.robust.compose import aggregator_sees  # start-up: only a plug-in is built to list it

        built = spec.build(**{p.name: p.default for p in spec.params}, name=spec.name)
        claim = built.claim
        sees = aggregator_sees(built) if spec.role == "aggregator" else None
    return {
        "name": spec.name, "role": spec.role, "summary": spec.summary, "guarantee": spec.guarantee,
        "parameters": [{"name": p.name, "default": "maxrr" if p.default is MAXRR_VALUES else format_value(p.default),
                        "help": p.help,
                        **({"choices": list(p.choices)} if p.choices else {}),
                        **({"inherits": "from a preceding clip"} if p.inherit else {}),
                        **({"deprecated_alias": p.alias} if p.alias else {})} for p in spec.params],
        "default_claim": {"epsilon": claim.epsilon, "delta": claim.delta, "scope": claim.scope},
        "sees": sees or "",
    }
