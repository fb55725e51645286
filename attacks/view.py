"""What the click-guessing attacks read off a ``ServerView``: shown features and updates.

Two cases (DESIGN.md, Threat models):

* individual messages (``view.messages`` set): one update per client, ``(n, P)``;
* secure aggregation (``view.messages`` is None): only the cohort's n_c-weighted mean
  ``view.aggregate`` is visible; its update relative to the global model is ``(P,)`` and
  the attacks run it against every document the cohort was shown.
"""

from __future__ import annotations

import numpy as np

from fltr_audit.errors import FltrError
from fltr_audit.messages import ServerView


def require_shown(view: ServerView, attack: str) -> None:
    """FltrError unless the view shows which documents each client saw."""
    if view.interactions is None or view.documents is None:
        raise FltrError(
            f"--attack {attack}: needs the shown documents, which the {view.threat_model!r} threat model hides"
        )


def shown_features(view: ServerView) -> tuple[np.ndarray, np.ndarray]:
    """Feature rows of every shown slot and the slot mask.

    Returns
    -------
    X : ndarray of float32, shape (n, B, k, F)
        Zeros on empty slots.
    mask : ndarray of bool, shape (n, B, k)
    """
    shown = view.interactions.shown
    mask = shown >= 0
    X = view.documents.features[np.where(mask, shown, 0)]
    X[~mask] = 0.0
    return X, mask


def client_updates(view: ServerView, attack: str) -> tuple[np.ndarray | None, np.ndarray | None]:
    """``(updates (n, P), None)`` with individual messages, ``(None, aggregate update (P,))``
    under secure aggregation; FltrError when there is no parameter vector to attack."""
    if view.messages is not None:
        if view.messages.vector is None:
            raise FltrError(f"--attack {attack}: the messages carry no parameter vector (FOLtR-ES sends seed + metric)")
        return view.messages.updates(view.global_params), None
    if view.aggregate is None:
        raise FltrError(f"--attack {attack}: the view has neither messages nor an aggregate vector")
    aggregate = np.asarray(view.aggregate, dtype=np.float64)
    update = aggregate - view.global_params if view.aggregate_kind == "weights" else aggregate
    return None, update
