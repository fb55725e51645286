"""What an observer of a round may read: the parts of one round of ``federation.run_round``.

An observer (``train(..., observer=...)``) is called once per round after the client defenses and
before aggregation; it reads these parts and may compute on copies (the run-audit canaries of
``attacks.canaries`` build their own aggregate from them) but changes nothing the round does, so
a run with an observer trains exactly the model of a run without one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from fltr_audit.engine.messages import Messages


@dataclass(frozen=True)
class RoundParts:
    """Round ``round_index`` of run ``seed``: the global model the cohort started from, the cohort's
    messages before (``undefended``) and after (``defended``) the client defenses, its client ids,
    the client defenses and the aggregator."""

    round_index: int
    seed: int
    params: np.ndarray
    undefended: Messages
    defended: Messages
    client_ids: np.ndarray
    client_defenses: Sequence[Any]
    aggregator: Any
