"""The finite domains of defense parameters, without numpy (the catalog lists them unimported)."""

from __future__ import annotations

NORMS = ("l1", "l2")
"""Norms a local Laplace defense clips in (``dp-local-laplace(norm=...)``)."""
TARGETS = ("weights", "update")
"""What ``clip(of=...)`` clips: the local weights (FPDGD Alg. 3) or the update."""
MAXRR_VALUES = tuple(1.0 / r for r in range(1, 11)) + (0.0,)
"""The values MaxRR takes on a top-10 list: 1/r, r = 1..10, and 0 (no click) (n = 11;
``fltr_audit.engine.maxrr.maxrr_values(10)``)."""
