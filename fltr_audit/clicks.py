"""Click models, vectorized over many result lists (DESIGN.md, ClickModel).

CONTRACT (filled in by the primitives work; the CCM tables below are final):

CCM_TABLES[(name, n_levels)] = (click_prob, stop_prob)   FPDGD Table 1, FOLtR-ES Table 1

@dataclass(frozen=True) class CascadeClickModel(name, click_prob, stop_prob)
    n_levels: int
    simulate(labels_shown, rng) -> bool (..., k)      labels_shown int (..., k), -1 = empty
    first_click_distribution(labels_shown) -> (..., k + 1)
        P(first click at position i) for i < k; the last column is P(no click).
cascade_model(name, n_levels, click_prob=None, stop_prob=None) -> CascadeClickModel
    FltrError naming --click-model for an unknown name; custom tables accepted.
check_levels(model, labels) -> None
    FltrError naming the levels when labels exceed what the model covers.
@dataclass(frozen=True) class PositionBasedModel(gamma=1.0, gamma_sd=0.1, rule="fedips")
    draw_gammas(n_users, rng) -> (n_users,)   left-truncated N(gamma, 0.1) at 0
    examination(gammas, k) -> (n, k)          (1 / rank) ** gamma_u
    click_prob(labels_shown, gammas) -> (n, ..., k)   FedIPS Eq. 11
    simulate(labels_shown, gammas, rng) -> bool
"""

import numpy as np

CCM_TABLES = {
    ("perfect", 3): (np.array([0.0, 0.5, 1.0]), np.array([0.0, 0.0, 0.0])),
    ("navigational", 3): (np.array([0.05, 0.5, 0.95]), np.array([0.2, 0.5, 0.9])),
    ("informational", 3): (np.array([0.4, 0.7, 0.9]), np.array([0.1, 0.3, 0.5])),
    ("perfect", 5): (np.array([0.0, 0.2, 0.4, 0.8, 1.0]), np.array([0.0, 0.0, 0.0, 0.0, 0.0])),
    ("navigational", 5): (np.array([0.05, 0.3, 0.5, 0.7, 0.95]), np.array([0.2, 0.3, 0.5, 0.7, 0.9])),
    ("informational", 5): (np.array([0.4, 0.6, 0.7, 0.8, 0.9]), np.array([0.1, 0.2, 0.3, 0.4, 0.5])),
}
