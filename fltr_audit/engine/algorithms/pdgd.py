"""Centralized PDGD with batch-accumulated updates (FPDGD paper, Section 4, Baselines).

The baseline sees the same interactions as FPDGD -- ``clients x B`` queries per round --
but every query is ranked by the current global model and no update happens until the
round ends. Reading of "updated in batch by accumulating gradient updates": each
simulated user's B gradients are summed, and the global model moves by ``eta`` times the
mean over users of these sums, i.e. the n_c-weighted FedAvg mean of
``theta + eta * sum_b grad_b``. This keeps the step size of one FPDGD client so the two
are comparable at equal budgets; with one client and B = 1 it is the original PDGD
(one update per interaction).
"""

from __future__ import annotations

from fltr_audit.engine.algorithms.fpdgd import FPDGD


class PDGD(FPDGD):
    """PDGD (Algorithm 1) whose gradients over a round are accumulated at the global model."""

    name = "pdgd"
    local_updates = False
