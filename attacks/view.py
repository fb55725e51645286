"""What the click-guessing attacks read off a ``ServerView``: shown features and updates.

Two cases (DESIGN.md, Threat models):

* individual messages (``view.messages`` set): one update per client, ``(n, P)``;
* secure aggregation (``view.messages`` is None): only the cohort's n_c-weighted mean
  ``view.aggregate`` is visible; its update relative to the global model is ``(P,)`` and
  the attacks run it against every document the cohort was shown;
* ``server-malicious`` (``fltr_audit.engine.malicious``): the server served the other members
  documents or a model under which their updates vanish, so with equal n_c the sum of the
  cohort's weights ``n * aggregate`` minus the models it served the others is the target's
  weights: one individual update ``(1, P)`` (the target's message itself when it is visible).
"""

from __future__ import annotations

import numpy as np

from fltr_audit.constraints import ParameterError
from fltr_audit.engine.messages import ServerView


def require_shown(view: ServerView, attack: str) -> None:
    """ParameterError naming ``attacks`` unless the view shows which documents each client saw."""
    if view.interactions is None or view.documents is None:
        raise ParameterError(
            "attacks", f"{attack}: needs the shown documents, which the {view.threat_model!r} threat model hides"
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
    under secure aggregation; ParameterError naming ``attacks`` when there is no parameter vector to attack."""
    if view.threat_model == "server-malicious" and view.messages is None and view.aggregate is not None:
        return _isolated_update(view, attack), None
    if view.messages is not None:
        if view.messages.vector is None:
            raise ParameterError("attacks", f"{attack}: the messages carry no parameter vector (FOLtR-ES sends seed + metric)")
        return view.messages.updates(view.global_params), None
    if view.aggregate is None:
        raise ParameterError("attacks", f"{attack}: the view has neither messages nor an aggregate vector")
    aggregate = np.asarray(view.aggregate, dtype=np.float64)
    update = aggregate - view.global_params if view.aggregate_kind == "weights" else aggregate
    return None, update


def _isolated_update(view: ServerView, attack: str) -> np.ndarray:
    """The target's update under ``server-malicious``: ``n * aggregate - sum of the others'
    served models - the target's model`` (equal n_c, the others' updates zero by construction)."""
    if len(view.dropouts) or view.aggregate_kind != "weights":
        raise ParameterError("attacks", f"{attack}: server-malicious isolation needs a cohort without dropouts "
                                        "that aggregates weights (FPDGD)")
    n = len(view.participants)
    g = np.asarray(view.global_params, dtype=np.float64)
    served = view.served_params if view.served_params is not None else np.broadcast_to(g, (n, len(g)))
    total = n * np.asarray(view.aggregate, dtype=np.float64)
    return (total - served[1:].sum(axis=0) - g)[None, :]
