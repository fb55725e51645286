"""``dp-local-laplace(..., snapping=true)``: Mironov's snapping mechanism (CCS 2012), the Laplace
sampler without the textbook one's floating-point side channel (issue 37, item 5)."""

import numpy as np
from scipy import stats

from defenses.stack import parse_defense
from fltr_audit.engine.messages import Messages


def test_snapping_outputs_lie_on_the_grid_and_follow_the_laplace_law():
    """Mironov's snapping: multiples of the power of two >= the scale, within +-B, with the Laplace
    law's mass on each grid cell (chi-square against scipy's Laplace cdf; catches a dropped
    rounding, a wrong grid or a lost sign)."""
    d = parse_defense("dp-local-laplace(eps=1,sensitivity=2,snapping=true)").client[0]
    assert d.name.endswith("snapping=true)") and d.scale == 2.0
    n = 200_000
    msgs = Messages(n_interactions=np.ones(n, dtype=np.int64), vector=np.full((n, 1), 0.3), vector_kind="update")
    out = d.apply(msgs, np.zeros(1), np.random.default_rng(0)).updates(np.zeros(1))[:, 0]
    grid, bound = 2.0, 1.0 + d.SNAP_TAILS * 2.0
    assert np.all(out / grid == np.round(out / grid)) and np.abs(out).max() <= bound
    cells = np.arange(-10, 11) * grid
    observed = np.array([np.sum(out == c) for c in cells])
    law = stats.laplace(0.3, 2.0)
    expected = n * (law.cdf(cells + grid / 2) - law.cdf(cells - grid / 2))
    assert stats.chisquare(observed, expected * observed.sum() / expected.sum()).pvalue > 1e-3


def test_snapping_noise_is_symmetric_with_the_laplace_tail():
    """Scale 0.5 on the grid 0.5: P(|out| >= k 0.5) = P(|Laplace| >= (k - 1/2) 0.5) = e^-(k - 1/2),
    to k = 24 (12 scales, where a uniform confined to a few exponents would already have run out),
    and the signs balanced (catches a fixed sign, a uniform confined to part of (0, 1), or a wrong
    exponent)."""
    d = parse_defense("dp-local-laplace(eps=1,sensitivity=0.5,snapping=true)").client[0]
    n = 400_000
    msgs = Messages(n_interactions=np.ones(n, dtype=np.int64), vector=np.zeros((n, 1)), vector_kind="update")
    out = d.apply(msgs, np.zeros(1), np.random.default_rng(1)).updates(np.zeros(1))[:, 0]
    nonzero = out[out != 0]
    assert stats.binomtest(int((nonzero > 0).sum()), len(nonzero)).pvalue > 1e-3
    for k in (1, 4, 10, 24):
        p = np.exp(-(k - 0.5))
        count = int(np.sum(np.abs(out) >= k * 0.5))
        assert stats.binomtest(count, n, p).pvalue > 1e-4, (k, count, n * p)


class _ExtremeDraws:
    """A generator whose every uniform is the smallest double the sampler can draw (mantissa 0, a
    geometric exponent of 1,000: U = 2^-1052), with the sign its ``random`` draws pick."""

    def __init__(self, sign_draw):
        self.sign_draw = sign_draw

    def integers(self, low, high, size):
        return np.zeros(size, dtype=np.int64)

    def geometric(self, p, size):
        return np.full(size, 1000)

    def random(self, size):
        return np.full(size, self.sign_draw)


def test_snapping_clamps_the_output_at_b_of_the_claim():
    """Noise of 1,052 ln 2 scales, either sign: the output is clamped to exactly +-B with
    B = Delta/2 + ``SNAP_TAILS`` lambda, the bound the claim's slack 2^-49 B / (lambda eps) is
    computed from (Mironov, Sec. 5.2); natural draws never reach it (e^-64). Catches: another B
    (SNAP_TAILS / lambda, no Delta/2), the clamp dropped."""
    d = parse_defense("dp-local-laplace(eps=1,sensitivity=2,snapping=true)").client[0]
    msgs = Messages(n_interactions=np.ones(3, dtype=np.int64), vector=np.array([[0.3], [-1.0], [5.0]]),
                    vector_kind="update")
    bound = 2.0 / 2 + d.SNAP_TAILS * 2.0
    for sign_draw, sign in ((0.0, -1.0), (0.9, 1.0)):
        out = d.apply(msgs, np.zeros(1), _ExtremeDraws(sign_draw)).updates(np.zeros(1))[:, 0]
        assert np.array_equal(out, np.full(3, -sign * bound)), out
