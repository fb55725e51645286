"""Click models, vectorized over many result lists (DESIGN.md, ClickModel).

* ``CascadeClickModel``: the cascade click model (CCM) of FPDGD Section 5 / FOLtR-ES Section 6.
  The user scans top-down, clicks a document of label r with ``click_prob[r]`` and, after a
  click, stops with ``stop_prob[r]``. ``CCM_TABLES`` holds the perfect / navigational /
  informational instantiations for 3 levels (MQ2007/8, FOLtR-ES Table 1 and FPDGD Table 1
  in brackets) and 5 levels (MSLR-WEB10K, FPDGD Table 1).
* ``PositionBasedModel``: the PBM of FedIPS Section 4 (Eq. 11), examination
  ``(1 / rank) ** gamma_u`` with a per-user ``gamma_u`` from N(gamma, 0.1) left-truncated at 0.

Shown lists are label arrays ``(..., k)`` in display order, -1 marking an empty slot (a
query with fewer than k documents): an empty slot is never clicked.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from fltr_audit.constraints import ParameterError
from fltr_audit.engine.footprint import check_counterfactual_memory

CCM_TABLES = {
    ("perfect", 3): (np.array([0.0, 0.5, 1.0]), np.array([0.0, 0.0, 0.0])),
    ("navigational", 3): (np.array([0.05, 0.5, 0.95]), np.array([0.2, 0.5, 0.9])),
    ("informational", 3): (np.array([0.4, 0.7, 0.9]), np.array([0.1, 0.3, 0.5])),
    ("perfect", 5): (np.array([0.0, 0.2, 0.4, 0.8, 1.0]), np.array([0.0, 0.0, 0.0, 0.0, 0.0])),
    ("navigational", 5): (np.array([0.05, 0.3, 0.5, 0.7, 0.95]), np.array([0.2, 0.3, 0.5, 0.7, 0.9])),
    ("informational", 5): (np.array([0.4, 0.6, 0.7, 0.8, 0.9]), np.array([0.1, 0.2, 0.3, 0.4, 0.5])),
}
CCM_NAMES = ("perfect", "navigational", "informational")

# FedIPS Eq. 11 counts labels 3 and 4 of the 5-level data (Yahoo, Istella) as relevant. For
# other scales we keep "the top levels": 3 levels (MQ2007/8) -> label 2 only, 2 levels -> 1.
PBM_RELEVANT_FROM = {5: 3, 3: 2, 2: 1}
PBM_NOISE = 0.1  # Eq. 11: a non-relevant document is clicked with 0.1 x its examination probability


def check_levels(model, labels: np.ndarray) -> None:
    """ParameterError naming ``click_model`` and the levels when ``labels`` exceed what ``model`` covers.

    ``model`` is any click model with ``name`` and ``n_levels``; -1 (empty slot) is allowed.
    """
    labels = np.asarray(labels)
    if labels.size == 0:
        return
    top, low = int(labels.max()), int(labels.min())
    if low < -1:
        raise ParameterError("click_model", f"relevance label {low} is negative")
    if top >= model.n_levels:
        raise ParameterError(
            "click_model", f"the data has relevance labels up to {top} ({top + 1} levels) but click model "
            f"{model.name!r} covers {model.n_levels} levels (0-{model.n_levels - 1})"
        )


def _prob_table(values, what: str, n_levels: int | None = None) -> np.ndarray:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1 or len(arr) < 1 or not np.all((arr >= 0) & (arr <= 1)):
        raise ParameterError("click_model", f"{what} must be a list of probabilities in [0, 1], got {values!r}")
    if n_levels is not None and len(arr) != n_levels:
        raise ParameterError("click_model", f"{what} has {len(arr)} entries for {n_levels} relevance levels")
    return arr


@dataclass(frozen=True, eq=False)
class CascadeClickModel:
    """Cascade click model with per-label click and stop probabilities (FPDGD Table 1)."""

    name: str
    click_prob: np.ndarray
    stop_prob: np.ndarray
    _click_ext: np.ndarray = field(init=False, repr=False)
    _stop_ext: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        click = _prob_table(self.click_prob, "click probabilities")
        stop = _prob_table(self.stop_prob, "stop probabilities", len(click))
        object.__setattr__(self, "click_prob", click)
        object.__setattr__(self, "stop_prob", stop)
        # one extra trailing entry 0 so that label -1 (empty slot) indexes "never clicked"
        object.__setattr__(self, "_click_ext", np.append(click, 0.0))
        object.__setattr__(self, "_stop_ext", np.append(click * stop, 0.0))

    @property
    def n_levels(self) -> int:
        return len(self.click_prob)

    def simulate(self, labels_shown: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Clicks on shown lists ``(..., k)`` (labels, -1 = empty), bool ``(..., k)``.

        One uniform ``u`` per position decides both events: click iff ``u < c(r)`` and stop
        iff ``u < c(r) s(r)``, so ``P(stop | click) = s(r)`` as the CCM requires.
        """
        labels = np.asarray(labels_shown)
        check_levels(self, labels)
        clicks = np.empty(labels.shape, dtype=bool)
        alive = np.ones(labels.shape[:-1], dtype=bool)
        for i in range(labels.shape[-1]):
            lab = labels[..., i]
            u = rng.random(alive.shape)
            clicks[..., i] = (u < self._click_ext[lab]) & alive
            alive &= u >= self._stop_ext[lab]
        return clicks

    def first_click_distribution(self, labels_shown: np.ndarray) -> np.ndarray:
        """``P(first click at position i)`` for i < k, then ``P(no click)``: shape (..., k + 1).

        Before the first click the user cannot have stopped, so the first click is at i with
        probability ``c_i * prod_{j<i} (1 - c_j)``.
        """
        labels = np.asarray(labels_shown)
        check_levels(self, labels)
        k = labels.shape[-1]
        out = np.empty(labels.shape[:-1] + (k + 1,))
        survive = np.ones(labels.shape[:-1])
        for i in range(k):
            c = self._click_ext[labels[..., i]]
            out[..., i] = survive * c
            survive = survive * (1.0 - c)
        out[..., k] = survive
        return out

    def expected_max_rr(self, labels_shown: np.ndarray) -> np.ndarray:
        """Expected MaxRR of shown lists (FOLtR-ES Table 3), shape (...)."""
        dist = self.first_click_distribution(labels_shown)
        return dist[..., :-1] @ (1.0 / np.arange(1, dist.shape[-1]))


def shown_labels(labels: np.ndarray, shown: np.ndarray) -> np.ndarray:
    """Relevance labels of shown rows ``(..., k)`` (``labels`` indexed by row), -1 on empty slots."""
    shown = np.asarray(shown)
    return np.where(shown >= 0, np.asarray(labels)[np.maximum(shown, 0)], -1)


def redraw_cascade(click_model, labels_shown: np.ndarray, draws: int, rng: np.random.Generator) -> np.ndarray:
    """``draws`` independent click vectors of ``click_model`` on the same lists, bool
    ``(draws, ...) + labels_shown.shape`` (the counterfactual baseline of ``attacks.scoring``)."""
    check_counterfactual_memory(draws, np.size(labels_shown))
    labels = np.broadcast_to(np.asarray(labels_shown), (int(draws),) + np.shape(labels_shown))
    return np.asarray(click_model.simulate(labels, rng), dtype=bool) & (labels >= 0)


def cascade_model(name: str, n_levels: int, click_prob=None, stop_prob=None) -> CascadeClickModel:
    """The CCM called ``name`` for ``n_levels`` relevance levels, or a custom table.

    With ``click_prob`` and ``stop_prob`` given, they define the model (any name, one entry per
    level); otherwise ``name`` must be perfect, navigational or informational.
    """
    if click_prob is not None or stop_prob is not None:
        if click_prob is None or stop_prob is None:
            raise ParameterError("click_model", "a custom click model needs both click and stop probabilities")
        return CascadeClickModel(
            name,
            _prob_table(click_prob, "click probabilities", n_levels),
            _prob_table(stop_prob, "stop probabilities", n_levels),
        )
    if name not in CCM_NAMES:
        raise ParameterError("click_model", f"unknown click model {name!r} (choose from {', '.join(CCM_NAMES)})")
    if (name, n_levels) not in CCM_TABLES:
        have = sorted(n for (m, n) in CCM_TABLES if m == name)
        raise ParameterError(
            "click_model", f"no {name} table for {n_levels} relevance levels "
            f"(tables exist for {' and '.join(map(str, have))} levels)"
        )
    click, stop = CCM_TABLES[(name, n_levels)]
    return CascadeClickModel(name, click.copy(), stop.copy())


@dataclass(frozen=True)
class PositionBasedModel:
    """Position-based model with per-user position bias and the FedIPS click rule (Eq. 11).

    ``p(click) = exam`` for a relevant document and ``0.1 * exam`` otherwise, with
    ``exam = (1 / rank) ** gamma_u``. Relevant means label >= ``PBM_RELEVANT_FROM[n_levels]``
    (3 and 4 on a 5-level scale as in the paper; 2 on a 3-level scale).
    ``gamma_sd`` is read as the standard deviation of N(gamma, 0.1).
    """

    gamma: float = 1.0
    gamma_sd: float = 0.1
    rule: str = "fedips"
    n_levels: int = 5

    def __post_init__(self) -> None:
        if self.rule != "fedips":
            raise ParameterError("click_model", f"unknown PBM click rule {self.rule!r} (choose from fedips)")
        if not (np.isfinite(self.gamma) and np.isfinite(self.gamma_sd) and self.gamma_sd > 0):
            raise ParameterError("click_model", f"PBM needs a finite gamma and gamma_sd > 0, got {self.gamma}, {self.gamma_sd}")
        if self.n_levels not in PBM_RELEVANT_FROM:
            raise ParameterError(
                "click_model", f"the PBM click rule is defined for {', '.join(map(str, sorted(PBM_RELEVANT_FROM)))} "
                f"relevance levels, not {self.n_levels}"
            )

    @property
    def name(self) -> str:
        return "pbm"

    @property
    def relevant_from(self) -> int:
        return PBM_RELEVANT_FROM[self.n_levels]

    def draw_gammas(self, n_users: int, rng: np.random.Generator) -> np.ndarray:
        """Per-user bias ``gamma_u ~ N(gamma, gamma_sd)`` left-truncated at 0, shape (n_users,)."""
        from scipy import stats  # here: importing scipy.stats costs every process seconds (Flower's ClientApps)

        a = (0.0 - self.gamma) / self.gamma_sd
        return stats.truncnorm.rvs(a, np.inf, loc=self.gamma, scale=self.gamma_sd, size=n_users, random_state=rng)

    @staticmethod
    def examination(gammas: np.ndarray, k: int) -> np.ndarray:
        """``(1 / rank) ** gamma_u`` for ranks 1..k, shape (n, k)."""
        ranks = np.arange(1, k + 1, dtype=np.float64)
        return ranks[None, :] ** -np.asarray(gammas, dtype=np.float64)[:, None]

    def click_prob(self, labels_shown: np.ndarray, gammas: np.ndarray) -> np.ndarray:
        """FedIPS Eq. 11 click probabilities of lists ``(n, ..., k)`` for users ``gammas (n,)``."""
        labels = np.asarray(labels_shown)
        check_levels(self, labels)
        gammas = np.asarray(gammas, dtype=np.float64)
        if labels.ndim < 2 or gammas.shape != labels.shape[:1]:
            raise ValueError(f"labels_shown must be (n, ..., k) with gammas (n,), got {labels.shape} and {gammas.shape}")
        exam = self.examination(gammas, labels.shape[-1])
        exam = exam.reshape((len(gammas),) + (1,) * (labels.ndim - 2) + (labels.shape[-1],))
        factor = np.where(labels >= self.relevant_from, 1.0, np.where(labels >= 0, PBM_NOISE, 0.0))
        return exam * factor

    def simulate(self, labels_shown: np.ndarray, gammas: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Independent clicks with the Eq. 11 probabilities, bool ``(n, ..., k)``."""
        p = self.click_prob(labels_shown, gammas)
        return rng.random(p.shape) < p
