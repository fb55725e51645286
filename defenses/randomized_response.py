"""Randomized response over a finite domain (FOLtR-ES Section 3.3)."""

from __future__ import annotations

import numpy as np

from fltr_audit.errors import FltrError
from defenses.mechanism_events import dp_event
from fltr_audit.privacy import mechanisms as mech
from fltr_audit.engine.interfaces import PrivacyClaim
from fltr_audit.engine.maxrr import rr_epsilon  # noqa: F401 (rr_epsilon: Eq. 10, re-exported)
from fltr_audit.engine.messages import Messages
from defenses.parameter_domains import MAXRR_VALUES


def randomize(codes: np.ndarray, n: int, p: float, rng: np.random.Generator) -> np.ndarray:
    """Randomized response on integer codes in [0, n): keep each with probability p, otherwise
    send one of the n - 1 *other* codes uniformly (code + uniform{1..n-1} mod n)."""
    codes = np.asarray(codes, dtype=np.int64)
    keep = rng.random(codes.shape) < p
    shift = rng.integers(1, n, size=codes.shape)
    return np.where(keep, codes, (codes + shift) % n)


def pack_bits(bits: np.ndarray) -> np.ndarray:
    """A boolean vector (..., k) as one k-ary code in [0, 2^k) (bit i worth 2^i), so a click
    vector can be privatized as a single value of a 2^k-value domain."""
    bits = np.asarray(bits, dtype=np.int64)
    return bits @ (1 << np.arange(bits.shape[-1], dtype=np.int64))


def unpack_bits(codes: np.ndarray, k: int) -> np.ndarray:
    """The inverse of ``pack_bits``: codes (...) to booleans (..., k)."""
    return (np.asarray(codes, dtype=np.int64)[..., None] >> np.arange(k)) & 1 == 1


class RandomizedResponse:
    """``rr(p, values)``: privatize every metric value of a FOLtR-ES message (one value per
    interaction) by randomized response over the domain ``values`` (default MaxRR on a top-10
    list, n = 11). Claim: epsilon = log(p (n-1)/(1-p)), scope ``message``, per transmitted
    value -- the paper's assumption (a) that a message carries one interaction; a message of
    B values composes to at most B * epsilon."""

    privatizes = "metric"

    def __init__(self, p: float = 0.9, values: tuple[float, ...] = MAXRR_VALUES, name: str = "rr"):
        self.values = np.sort(np.asarray(values, dtype=np.float64))
        self.n, self.p, self.name = len(self.values), float(p), name
        if self.n < 2 or np.any(np.diff(self.values) == 0):
            raise FltrError(f"{name}: values must hold at least two distinct numbers")
        if not (1.0 / self.n < self.p <= 1.0):
            raise FltrError(f"{name}: needs 1/n < p <= 1, got p = {self.p:g} with n = {self.n} values")
        self.claim = PrivacyClaim(epsilon=rr_epsilon(self.p, self.n), delta=0.0, scope="message")

    @property
    def mechanism(self) -> mech.RandomizedResponse:
        """Declared: randomized response with keep probability p over ``values``."""
        return mech.RandomizedResponse(self.p, tuple(float(v) for v in self.values))

    def dp_event(self):
        """One transmitted value, from the declaration: ``RandomizedResponseDpEvent`` over the n
        values. dp-accounting's mechanism sends a uniform value with probability ``noise`` (the true
        one included), ours one of the n - 1 others with probability 1 - p: equal when
        noise / n = (1 - p) / (n - 1)."""
        return dp_event(self.mechanism, self.claim)

    def encode(self, metric: np.ndarray) -> np.ndarray:
        """Codes (indices into the sorted domain) of metric values; refuses values outside it."""
        idx = np.clip(np.searchsorted(self.values, metric), 1, self.n - 1)
        nearer_left = np.abs(metric - self.values[idx - 1]) <= np.abs(metric - self.values[idx])
        idx = idx - nearer_left
        bad = ~np.isclose(self.values[idx], metric, rtol=1e-9, atol=1e-12)
        if bad.any():
            raise FltrError(f"{self.name}: metric value {metric[bad].flat[0]!r} is not in the domain of {self.n} values")
        return idx

    def apply(self, messages: Messages, global_params: np.ndarray, rng: np.random.Generator) -> Messages:
        if messages.metric is None:
            raise FltrError(f"{self.name}: needs messages with metric values (FOLtR-ES); these carry none")
        codes = randomize(self.encode(np.asarray(messages.metric, dtype=np.float64)), self.n, self.p, rng)
        return messages.replace(metric=self.values[codes])
