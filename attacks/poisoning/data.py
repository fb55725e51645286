"""``data-poison``: malicious users click by an inverted click model and otherwise follow the
protocol (untargeted data poisoning, Wang & Zuccon ICTIR 2023; Unlearning-for-FOLTR ``runs/train.py``).

Click models (``click``), for L relevance levels, label r read as ``L - 1 - r``:

* ``inverted`` (default): the Unlearning-for-FOLTR poison model, no stopping -- click
  probabilities {0: 1.0, 1: 0.5, 2: 0.0} on 3 levels, {0: 1.0, 1: 0.8, 2: 0.6, 3: 0.2, 4: 0.0} on 5;
  on other scales falling linearly from 1 (label 0) to 0 (the top label);
* ``navigational`` / ``informational``: that cascade model (FPDGD Table 1) on the reversed labels,
  stopping as it does;
* ``pbm``: the position-based model of FedIPS Eq. 11 on the reversed labels, no stopping: rank i is
  examined with probability ``1 / i`` (gamma 1), a document relevant after the reversal is clicked
  when examined, any other with 0.1 of that.

The malicious users' messages are honest computations on these clicks, so client defenses apply to
them as to anyone's; only algorithms that pass each user to its click model can carry it.
"""

from __future__ import annotations

import numpy as np

from attacks.poisoning.selection import Malicious
from fltr_audit.constraints import ParameterError
from fltr_audit.engine.clicks import CCM_TABLES, PBM_NOISE, PBM_RELEVANT_FROM
from fltr_audit.engine.messages import Messages
from fltr_audit.engine.poisoning import PoisonClicks

INVERTED = {3: (1.0, 0.5, 0.0), 5: (1.0, 0.8, 0.6, 0.2, 0.0)}
"""The Unlearning-for-FOLTR poison click probabilities by label (MQ2007; MSLR-WEB10K, Yahoo, istella)."""


def poison_clicks(click: str, n_levels: int) -> PoisonClicks:
    """The malicious users' click model ``click`` for ``n_levels`` levels (module docstring)."""
    if click == "inverted":
        probs = INVERTED.get(n_levels, tuple(np.linspace(1.0, 0.0, n_levels)))
        return PoisonClicks("inverted", np.array(probs), np.zeros(n_levels))
    if click == "pbm":
        if n_levels not in PBM_RELEVANT_FROM:
            raise ParameterError("poison", f"data-poison: the pbm rule is defined for "
                                           f"{', '.join(map(str, sorted(PBM_RELEVANT_FROM)))} levels, not {n_levels}")
        reversed_labels = n_levels - 1 - np.arange(n_levels)
        probs = np.where(reversed_labels >= PBM_RELEVANT_FROM[n_levels], 1.0, PBM_NOISE)
        return PoisonClicks("inverted-pbm", probs, np.zeros(n_levels), gamma=1.0)
    if (click, n_levels) not in CCM_TABLES:
        raise ParameterError("poison", f"data-poison: no {click} table for {n_levels} relevance levels")
    click_prob, stop_prob = CCM_TABLES[(click, n_levels)]
    return PoisonClicks(f"inverted-{click}", click_prob[::-1].copy(), stop_prob[::-1].copy())


class DataPoison(Malicious):
    """Malicious users click by ``poison_clicks(click, n_levels)``; messages are left as computed."""

    def __init__(self, fraction: float, click: str = "inverted", n_levels: int = 3, **common) -> None:
        super().__init__(fraction, **common)
        self.click = str(click)
        self.clicks = poison_clicks(self.click, int(n_levels))

    def craft(self, messages: Messages, malicious: np.ndarray, global_params: np.ndarray, aggregator,
              rng: np.random.Generator) -> Messages:
        return messages
