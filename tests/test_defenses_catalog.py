"""The catalog's declarations are what the built defenses say: the claim and view of each
built-in's defaults (``defenses list`` shows the declaration, without importing the defense), and
the parameter domains; listing imports no defense and no numpy."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest

from defenses.catalog import SPECS
from defenses.parameter_domains import MAXRR_VALUES
from defenses.robust.compose import aggregator_sees
from fltr_audit.engine.maxrr import maxrr_values

BUILT_IN = [name for name, spec in SPECS.items() if spec.default_claim is not None]


def test_every_built_in_declares_its_default_claim():
    assert len(BUILT_IN) >= 16 and {"dp-gaussian", "dp-fedavg", "ddgauss", "rr", "shuffle"} <= set(BUILT_IN)


@pytest.mark.parametrize("name", BUILT_IN)
def test_declared_default_claim_and_view_are_the_built_defenses(name):
    spec = SPECS[name]
    built = spec.build(**{p.name: p.default for p in spec.params}, name=spec.name)
    claim = built.claim
    assert (claim.scope, claim.delta) == (spec.default_claim.scope, spec.default_claim.delta)
    assert math.isclose(claim.epsilon, spec.default_claim.epsilon, rel_tol=1e-12) or claim.epsilon == spec.default_claim.epsilon
    assert spec.sees == (aggregator_sees(built) if spec.role == "aggregator" else None)


def test_maxrr_domain_is_the_engines():
    assert MAXRR_VALUES == tuple(float(v) for v in maxrr_values(10))


def test_listing_imports_no_defense_and_no_numpy():
    code = ("import sys; from defenses.listing import list_defenses; rows = list_defenses(); "
            "heavy = [m for m in sys.modules if m == 'numpy' or m.startswith('defenses.') and m not in "
            "('defenses.catalog', 'defenses.listing', 'defenses.parameter_domains')]; "
            "print(len(rows), heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    count, heavy = out.stdout.split(" ", 1)
    assert int(count) >= 16 and heavy.strip() == "[]", out.stdout
