"""Worst-case epsilon of FOLtR-ES's privatized MaxRR by enumerating rankings (FOLtR-ES §4,
Eq. 9-10, and §6.1, Table 2).

MaxRR over a list of length L takes n = L + 1 values: 1, 1/2, ..., 1/L and 0 (no click).
A user whose list has relevance placement r (one label per position) produces value v with
probability p_0(v | r), the first-click distribution of the click model. Randomized response
(§3.3) transmits v with probability ``P_T(v | r) = p p_0 + (1 - p)(1 - p_0)/(n - 1)``, and

    epsilon = max over placements r1, r2 and values v of  log P_T(v | r1) / P_T(v | r2)   (Eq. 9).

Every pair of placements and every transmitted value is covered (the published script
compares only the value MaxRR = 1). No pairs need forming: for p > 1/n, ``P_T`` is increasing
in ``p_0``, so for each v the maximum ratio is ``P_T(max_r p_0(v|r)) / P_T(min_r p_0(v|r))``.
And under a cascade model ``p_0(v = position i | r) = c(r_i) prod_{j<i} (1 - c(r_j))`` and
``p_0(no click | r) = prod_j (1 - c(r_j))`` are products of per-position factors in [0, 1]
(no stop happens before the first click), so their maximum and minimum over the L^levels
placements are the products of the per-position maxima and minima: an exact O(L levels)
dynamic program whose maximizing placements are read off position by position.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from fltr_audit.engine.clicks import CascadeClickModel, cascade_model
from fltr_audit.constraints import Interval, POSITIVE_INT, check
from fltr_audit.engine.maxrr import maxrr_values, rr_epsilon
from fltr_audit.base.resources import check_memory


@dataclass(frozen=True)
class EpsilonResult:
    """Worst-case epsilon of privatized MaxRR and where it is reached.

    ``placement_high`` / ``placement_low`` are the two relevance placements (q1, q2 of Eq. 9)
    and ``value`` the transmitted MaxRR (``value_index`` i < L: first click at position i + 1;
    i = L: no click); ``p0_high`` / ``p0_low`` its probability before privatization.
    """

    click_model: str
    levels: int
    length: int
    p: float
    n_values: int
    epsilon: float
    theoretical: float
    value_index: int
    value: float
    placement_high: tuple[int, ...]
    placement_low: tuple[int, ...]
    p0_high: float
    p0_low: float

    def as_dict(self) -> dict:
        return asdict(self)


theoretical_bound = rr_epsilon
"""Eq. 10, the bound the enumeration is set beside (``fltr_audit.engine.maxrr.rr_epsilon``)."""


def transmit_prob(p0: np.ndarray, p: float, n_values: int) -> np.ndarray:
    """Randomized response (§3.3): P(transmit v) given P(true metric = v) = p0."""
    return p * p0 + (1.0 - p) * (1.0 - p0) / (n_values - 1)


def first_click_extremes(click_prob: np.ndarray, length: int) -> tuple[np.ndarray, ...]:
    """Max and min over placements of P(first click at i) (i < L) and P(no click), with the
    placements reaching them.

    Returns
    -------
    high, low : ndarray (L + 1,)
    arg_high, arg_low : ndarray of int (L + 1, L)
        Row i is a placement reaching ``high[i]`` / ``low[i]`` (ties: the lowest label;
        positions after i do not matter and hold label 0).
    """
    c = np.asarray(click_prob, dtype=np.float64)
    skip = 1.0 - c
    L = int(length)
    high, low = np.empty(L + 1), np.empty(L + 1)
    arg_high = np.zeros((L + 1, L), dtype=np.int64)
    arg_low = np.zeros((L + 1, L), dtype=np.int64)
    for i in range(L + 1):
        before = i  # positions 0..i-1 are skipped
        high[i] = skip.max() ** before * (c.max() if i < L else 1.0)
        low[i] = skip.min() ** before * (c.min() if i < L else 1.0)
        arg_high[i, :before] = int(np.argmax(skip))
        arg_low[i, :before] = int(np.argmin(skip))
        if i < L:
            arg_high[i, i] = int(np.argmax(c))
            arg_low[i, i] = int(np.argmin(c))
    return high, low, arg_high, arg_low


def maxrr_epsilon(click_model: str | CascadeClickModel, p: float, length: int = 10, levels: int = 3) -> EpsilonResult:
    """Exact worst-case epsilon (Eq. 9) of privatized MaxRR over lists of ``length``.

    Parameters
    ----------
    click_model : str or CascadeClickModel
        A CCM name (perfect, navigational, informational) for ``levels`` levels, or a model.
    p : float
        Randomized-response parameter, 1/n < p <= 1 with n = length + 1.
    length : int
        L, the list length (FOLtR-ES Table 2 uses 5; the training setup 10).
    levels : int
        Relevance levels (3 or 5) when ``click_model`` is a name.
    """
    check("length", length, POSITIVE_INT)
    check_memory("length", 16 * (int(length) + 1) * int(length), f"the worst-case placements of lists of length "
                 f"{length:,} (two (L + 1) x L tables)")
    model = click_model if isinstance(click_model, CascadeClickModel) else cascade_model(click_model, int(levels))
    n_values = int(length) + 1
    check("p", p, (Interval(float, 1.0 / n_values, 1, "right"),), f"1/n < p <= 1 with n = {n_values} MaxRR values")
    high, low, arg_high, arg_low = first_click_extremes(model.click_prob, int(length))
    with np.errstate(divide="ignore"):
        log_ratio = np.log(transmit_prob(high, p, n_values)) - np.log(transmit_prob(low, p, n_values))
    i = int(np.argmax(log_ratio))
    return EpsilonResult(
        click_model=model.name,
        levels=model.n_levels,
        length=int(length),
        p=float(p),
        n_values=n_values,
        epsilon=float(log_ratio[i]),
        theoretical=theoretical_bound(p, n_values),
        value_index=i,
        value=float(maxrr_values(int(length))[i]),
        placement_high=tuple(int(x) for x in arg_high[i]),
        placement_low=tuple(int(x) for x in arg_low[i]),
        p0_high=float(high[i]),
        p0_low=float(low[i]),
    )


def epsilon_rows(click_models: list[str], ps: list[float], length: int = 10, levels: int = 3) -> list[dict]:
    """Rows of the ``epsilon`` result table (one per click model and p): the enumerated epsilon
    beside the Eq. 10 bound."""
    rows = []
    for model in click_models:
        for p in ps:
            result = maxrr_epsilon(model, p, length=length, levels=levels)
            rows.append({"click_model": model, "levels": levels, "length": length, "p": p,
                         "epsilon": result.epsilon, "theoretical": result.theoretical})
    return rows
