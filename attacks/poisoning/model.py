"""Model poisoning by a fixed rule: sign flip, scaling, Gaussian noise, LIE and IPM.

With U the cohort's updates, ``u_c`` a malicious client's own honest update and mu, sigma the
coordinate-wise mean and standard deviation of the benign updates:

* ``sign-flip(scale=s)``: ``-s u_c`` (FOLtR-ES: the metric reflected about 1/2 and scaled,
  ``1/2 - s (f - 1/2)``, which multiplies the client's share of the ES gradient Eq. 4-6 by -s when
  antithetic, and in expectation otherwise);
* ``scale(factor=l)``: ``l u_c``, boosting (Bagdasaryan et al. 2020, model replacement at
  l = 1 / fraction); FOLtR-ES: ``l f``;
* ``noise(std=s)``: ``u_c + N(0, s^2 I)`` (the "add noise" poisoning of Wang et al., ECIR 2024);
  FOLtR-ES: ``f + N(0, s^2)``;
* ``lie(z)``: ``mu - z sigma`` (Baruch et al., NeurIPS 2019, "A little is enough"), by default
  ``z_max = Phi^-1((n - s) / n)`` with ``s = floor(n / 2 + 1) - m`` for a cohort of n with m
  malicious (their Eq. in Sec. 3; 0 when negative);
* ``ipm(epsilon=e)``: ``-e mu`` (Xie et al., UAI 2019, inner product manipulation).
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np
from scipy.stats import norm

from attacks.poisoning.crafting import Crafting, Oracle, benign_moments
from attacks.poisoning.domains import ALL_KINDS


class SignFlip(Crafting):
    carries: ClassVar[tuple[str, ...]] = ALL_KINDS

    def __init__(self, fraction: float, scale: float = 1.0, **common) -> None:
        super().__init__(fraction, **common)
        self.scale = float(scale)

    def vectors(self, U: np.ndarray, bad: np.ndarray, rng: np.random.Generator, oracle: Oracle) -> np.ndarray:
        return -self.scale * U[bad]

    def metrics(self, M: np.ndarray, bad: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return 0.5 - self.scale * (M[bad] - 0.5)


class Scale(Crafting):
    carries: ClassVar[tuple[str, ...]] = ALL_KINDS

    def __init__(self, fraction: float, factor: float = 10.0, **common) -> None:
        super().__init__(fraction, **common)
        self.factor = float(factor)

    def vectors(self, U: np.ndarray, bad: np.ndarray, rng: np.random.Generator, oracle: Oracle) -> np.ndarray:
        return self.factor * U[bad]

    def metrics(self, M: np.ndarray, bad: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return self.factor * M[bad]


class Noise(Crafting):
    carries: ClassVar[tuple[str, ...]] = ALL_KINDS

    def __init__(self, fraction: float, std: float = 1.0, **common) -> None:
        super().__init__(fraction, **common)
        self.std = float(std)

    def vectors(self, U: np.ndarray, bad: np.ndarray, rng: np.random.Generator, oracle: Oracle) -> np.ndarray:
        return U[bad] + rng.normal(0.0, self.std, size=U[bad].shape)

    def metrics(self, M: np.ndarray, bad: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return M[bad] + rng.normal(0.0, self.std, size=M[bad].shape)


def lie_z(n: int, m: int) -> float:
    """Baruch et al.'s z_max for a cohort of n with m malicious: ``Phi^-1((n - s) / n)``,
    ``s = floor(n / 2 + 1) - m`` supporters needed; 0 when that quantile is below the median."""
    s = math.floor(n / 2 + 1) - m
    return max(0.0, float(norm.ppf((n - s) / n)))


class LIE(Crafting):
    def __init__(self, fraction: float, z: float | None = None, **common) -> None:
        super().__init__(fraction, **common)
        self.z = None if z is None else float(z)

    def vectors(self, U: np.ndarray, bad: np.ndarray, rng: np.random.Generator, oracle: Oracle) -> np.ndarray:
        mu, sigma = benign_moments(U, bad)
        z = lie_z(len(U), int(bad.sum())) if self.z is None else self.z
        return np.broadcast_to(mu - z * sigma, (int(bad.sum()), U.shape[1])).copy()


class IPM(Crafting):
    def __init__(self, fraction: float, epsilon: float = 0.5, **common) -> None:
        super().__init__(fraction, **common)
        self.epsilon = float(epsilon)

    def vectors(self, U: np.ndarray, bad: np.ndarray, rng: np.random.Generator, oracle: Oracle) -> np.ndarray:
        mu, _ = benign_moments(U, bad)
        return np.broadcast_to(-self.epsilon * mu, (int(bad.sum()), U.shape[1])).copy()
