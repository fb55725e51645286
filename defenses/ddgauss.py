"""The distributed discrete Gaussian mechanism with modular secure aggregation (Kairouz, Liu and
Steinke, ICML 2021; arXiv 2102.06387, whose numbering is cited)."""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import minimize_scalar

from defenses.dp_fedavg import clip_updates
from defenses.secagg import require_vectors
from defenses.secagg_protocol import neighbour_graph, run_protocol
from fltr_audit.constraints import Interval, ParameterError, check
from fltr_audit.errors import FltrError
from defenses.mechanism_events import dp_event
from fltr_audit.privacy import mechanisms as mech
from fltr_audit.engine.interfaces import Aggregate, AggregatorBase, PrivacyClaim
from fltr_audit.engine.messages import Messages

BETA = math.exp(-0.5)
"""The conditional-rounding constant beta of the paper's experiments."""
WRAP_TARGET = 1e-6
"""The per-round modular wrap-around probability the scale is chosen for (union tail bound)."""


def discrete_laplace(t: float, size: int, rng: np.random.Generator) -> np.ndarray:
    """Samples of P(y) proportional to exp(-|y| / t) on the integers: the difference of two
    geometric variables with success probability 1 - e^(-1/t)."""
    p = -math.expm1(-1.0 / t)
    return rng.geometric(p, size) - rng.geometric(p, size)


def discrete_gaussian(sigma2: float, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Samples of the discrete Gaussian N_Z(0, sigma2), P(y) proportional to exp(-y^2 / (2 sigma2)),
    by Canonne-Kamath-Steinke's rejection sampler (NeurIPS 2020, Algorithm 3), vectorized:
    propose y from the discrete Laplace of scale t = floor(sigma) + 1, accept with probability
    exp(-(|y| - sigma2/t)^2 / (2 sigma2)). Exact up to the float64 acceptance test."""
    size = int(np.prod(shape))
    t = math.floor(math.sqrt(sigma2)) + 1.0
    out = np.empty(size, dtype=np.int64)
    todo = np.arange(size)
    while todo.size:
        y = discrete_laplace(t, todo.size, rng)
        accept = rng.random(todo.size) < np.exp(-((np.abs(y) - sigma2 / t) ** 2) / (2.0 * sigma2))
        out[todo[accept]] = y[accept]
        todo = todo[~accept]
    return out.reshape(shape)


def hadamard(x: np.ndarray) -> np.ndarray:
    """The orthonormal Walsh-Hadamard transform H x / sqrt(d) of each row (d a power of two);
    its own inverse."""
    n, d = x.shape
    y = np.array(x, dtype=np.float64)
    h = 1
    while h < d:
        y = y.reshape(n, d // (2 * h), 2, h)
        y = np.stack([y[:, :, 0] + y[:, :, 1], y[:, :, 0] - y[:, :, 1]], axis=2).reshape(n, d)
        h *= 2
    return y / math.sqrt(d)


def rounded_norm_bound(scaled_norm: float, dim: int, beta: float = BETA) -> float:
    """The L2 bound that conditional randomized rounding enforces on an integer vector rounded
    from one of norm ``scaled_norm`` (Theorem 1 / Prop. 22): min(c + sqrt(d),
    sqrt(c^2 + d/4 + sqrt(2 log(1/beta)) (c + sqrt(d)/2)))."""
    plain = scaled_norm + math.sqrt(dim)
    conditioned = math.sqrt(scaled_norm**2 + dim / 4 + math.sqrt(2 * math.log(1 / beta)) * (scaled_norm + math.sqrt(dim) / 2))
    return min(plain, conditioned)


def sum_tau(local_sigma: float, n: int) -> float:
    """tau = 10 sum_{k=1}^{n-1} exp(-2 pi^2 sigma^2 k/(k+1)) (Theorem 1, Prop. 14): how far a sum
    of n discrete Gaussians N_Z(0, sigma^2) is from one discrete Gaussian."""
    k = np.arange(1, max(n, 1), dtype=np.float64)
    return float(10.0 * np.exp(-2.0 * math.pi**2 * local_sigma**2 * k / (k + 1)).sum())


def zcdp_terms(sensitivity: float, local_sigma: float, n: int, dim: int) -> list[tuple[float, float]]:
    """(rho, xi) pairs, each a valid (xi, rho)-zCDP bound of the sum of n clients' integer
    vectors (L2 norm <= ``sensitivity``) plus their N_Z(0, local_sigma^2) shares (Prop. 14 /
    Eq. 17: RDP(alpha) <= min(alpha/2 s^2 + tau d, alpha/2 (s + sqrt(d) tau)^2), with
    s = sensitivity / (sqrt(n) local_sigma); the L1 term, needing a tighter L1 bound, is left out)."""
    tau = sum_tau(local_sigma, n)
    s = sensitivity / (math.sqrt(n) * local_sigma)
    return [(s * s / 2.0, tau * dim), ((s + math.sqrt(dim) * tau) ** 2 / 2.0, 0.0)]


def zcdp_epsilon(rho: float, xi: float, delta: float) -> float:
    """The (epsilon, delta) of an (xi, rho)-zCDP mechanism: its RDP curve xi + rho alpha put
    through the conversion of Canonne-Kamath-Steinke 2020 (Prop. 12) / Balle et al. 2020,
    epsilon = min over alpha > 1 of xi + rho alpha + log((alpha-1)/alpha) - (log delta + log alpha)/(alpha-1),
    the one dp-accounting's RDP accountant uses (the tests compare the two)."""
    def eps(alpha: float) -> float:
        return xi + rho * alpha + math.log1p(-1.0 / alpha) - (math.log(delta) + math.log(alpha)) / (alpha - 1.0)

    best = minimize_scalar(lambda a: eps(1.0 + math.exp(a)), bounds=(-12.0, 12.0), method="bounded",
                           options={"xatol": 1e-10})
    return max(0.0, float(best.fun))


def scale_for_bits(bits: int, n: int, clip: float, noise_std: float, dim: int) -> float:
    """The granularity gamma (one integer step = gamma) that keeps the modular sum of n clients
    inside [-2^(b-1), 2^(b-1)) except with probability ``WRAP_TARGET``. One coordinate of the
    scaled sum is sub-Gaussian with variance proxy V = (n c)^2/(gamma^2 d) (the rotated sum,
    norm <= n c, Hoeffding over the random signs) + n/4 (rounding) + noise_std^2/gamma^2 (the
    discrete Gaussian shares); the union bound 2 d exp(-(2^(b-1))^2 / (2V)) <= WRAP_TARGET
    fixes gamma (the form of the paper's Sec. 4.4 / Eq. 61 with k = sqrt(2 log(2d/target)))."""
    budget = (2.0 ** (bits - 1)) ** 2 / (2.0 * math.log(2.0 * dim / WRAP_TARGET)) - n / 4.0
    if budget <= 0:
        return math.inf
    return math.sqrt(((n * clip) ** 2 / dim + noise_std**2) / budget)


def wrap_probability(bits: int, n: int, clip: float, noise_std: float, dim: int, gamma: float) -> float:
    """The union tail bound on the probability that some coordinate of the round's scaled sum
    leaves the ring's signed range (see ``scale_for_bits``)."""
    var = (n * clip) ** 2 / (gamma**2 * dim) + n / 4.0 + noise_std**2 / gamma**2
    return float(min(1.0, 2.0 * dim * math.exp(-((2.0 ** (bits - 1)) ** 2) / (2.0 * var))))


class DDGauss(AggregatorBase):
    """``ddgauss(noise_multiplier=z, clip=C, bits=b, n, dim, dp_delta)``, an aggregator simulating
    the whole client-plus-SecAgg pipeline of Kairouz et al. (Algorithms 1-2):

    1. each client clips its update (weights minus global model) to L2 norm C, pads it to
       ``dim`` coordinates (a power of two), flips signs with a shared random sign vector and
       applies the orthonormal Walsh-Hadamard transform (the flattening rotation, Sec. 4.2);
    2. scales by 1/gamma and rounds each coordinate up or down at random (unbiased), redrawing
       a client's rounding until its L2 norm is within ``rounded_norm_bound`` (conditional
       randomized rounding, beta = e^-0.5);
    3. adds discrete Gaussian noise N_Z(0, sigma_l^2) per coordinate, sigma_l = z C / (gamma
       sqrt(n_round)), so the sum over the round's n_round clients carries variance (z C/gamma)^2;
    4. the modular sum in Z_(2^b) of the n_round vectors: simulated exactly with uint64
       arithmetic (``secagg=sum``, the default: the masks cancel in this sum), or run through
       ``secagg-protocol``'s double-masking protocol (``secagg=protocol``: the same bits, at
       O(n^2) key agreements per round);
    5. the server centres the sum into [-2^(b-1), 2^(b-1)), multiplies by gamma, undoes the
       rotation and divides by n_round (fixed denominator): the server sees only this mean.

    gamma comes from ``scale_for_bits`` for a cohort of ``n`` clients. Claim, per round per
    participating user (neighbours: the user's update present or zero, every client still
    adding its noise share, as in the paper), scope ``aggregate``: the paper's (xi, rho)-zCDP
    bound for a cohort of ``n`` (``zcdp_terms``: sensitivity the rounded norm bound of C/gamma)
    turned into (epsilon, dp_delta) by the RDP conversion dp-accounting uses (``zcdp_epsilon``);
    ``dp_event()`` is that ``ZCDpEvent`` (an RDP accountant composes it; the PLD accountant
    does not support it). ``stats`` carry ``wrap_probability`` (the tail bound for the round's
    cohort), ``wrapped_coordinates`` (counted in simulation, where the true sum is known),
    ``epsilon_round`` (the claim for the round's own cohort size), ``gamma`` and the rounding
    redraws.
    """

    reads_global_model = True
    sees = "sum"
    """The server sees only the modular sum of the shares."""

    def __init__(self, noise_multiplier: float = 1.0, clip: float = 1.0, bits: int = 20, n: int = 1000,
                 dim: int = 64, dp_delta: float = 1e-5, secagg: str = "sum", name: str = "ddgauss"):
        self.noise_multiplier, self.clip, self.bits = float(noise_multiplier), float(clip), int(bits)
        self.secagg = secagg
        self.n, self.dim, self.dp_delta, self.name = int(n), int(dim), float(dp_delta), name
        try:
            for parameter, value in (("noise_multiplier", self.noise_multiplier), ("clip", self.clip)):
                check(parameter, value, (Interval(float, 0.0, math.inf, closed="neither"),))
            check("bits", self.bits, (Interval(int, 2, 62),))
            check("n", self.n, (Interval(int, 1, None),))   # the cohort size
        except ParameterError as exc:
            raise exc.within(f"{name}: ") from None
        if self.dim < 1 or self.dim & (self.dim - 1):
            raise ParameterError("dim", f"must be a power of two (the padded model size), got {self.dim}", f"{name}: ")
        self.gamma = scale_for_bits(self.bits, self.n, self.clip, self.noise_std, self.dim)
        if not math.isfinite(self.gamma):
            raise FltrError(f"{name}: bits = {self.bits} are too few for the rounding errors of n = {self.n} clients "
                            f"(a {self.dim}-coordinate sum would wrap around the ring)")
        if self.local_sigma(self.n) < 0.5:
            raise FltrError(f"{name}: bits = {self.bits} are too few for the noise of n = {self.n} clients: each "
                            f"client's discrete Gaussian would have std {self.local_sigma(self.n):.3g} < 1/2 of a step "
                            f"(Prop. 14 needs >= 1/2); raise bits or noise_multiplier")
        self.sensitivity = rounded_norm_bound(self.clip / self.gamma, self.dim)
        self.zcdp = self._best_zcdp(self.n)
        self.claim = PrivacyClaim(epsilon=zcdp_epsilon(*self.zcdp, self.dp_delta), delta=self.dp_delta,
                                  scope="aggregate")

    @property
    def noise_std(self) -> float:
        """The target std z C of the noise on the sum (original units)."""
        return self.noise_multiplier * self.clip

    def local_sigma(self, n: int) -> float:
        """One client's discrete Gaussian std, in integer steps, when n clients share the noise."""
        return self.noise_std / (self.gamma * math.sqrt(n))

    def mean_error_std(self, n: int) -> float:
        """The stated error of the decoded mean, per coordinate, for n clients: at most
        sqrt((z C)^2 + n gamma^2 / 4) / n (the shares' variance is below sigma_l^2, CKS 2020,
        and each rounding has variance <= 1/4 step^2, kept by the orthonormal rotation); it is
        unbiased up to the conditioning of the rounding."""
        return math.sqrt(self.noise_std**2 + n * self.gamma**2 / 4.0) / n

    def _best_zcdp(self, n: int) -> tuple[float, float]:
        terms = zcdp_terms(self.sensitivity, self.local_sigma(n), n, self.dim)
        return min(terms, key=lambda t: zcdp_epsilon(*t, self.dp_delta))

    @property
    def mechanism(self) -> mech.DiscreteGaussianSum:
        """Declared: the distributed discrete Gaussian sum, (xi, rho)-zCDP for a cohort of ``n``."""
        return mech.DiscreteGaussianSum(self.noise_multiplier, self.clip, *self.zcdp)

    def dp_event(self):
        """One round for one participating user, from the declaration: ``ZCDpEvent(rho, xi)``."""
        return dp_event(self.mechanism, self.claim)

    def encode(self, updates: np.ndarray, signs: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, int]:
        """Steps 1-2 for every client: the rounded, rotated, scaled updates (int64, n x dim)
        and the number of rounding redraws."""
        n, p = updates.shape
        clipped = clip_updates(updates, self.clip)
        padded = np.zeros((n, self.dim))
        padded[:, :p] = clipped
        scaled = hadamard(padded * signs) / self.gamma
        low = np.floor(scaled)
        out = np.empty((n, self.dim), dtype=np.int64)
        todo, redraws = np.arange(n), 0
        while todo.size:
            draw = (low[todo] + (rng.random((todo.size, self.dim)) < scaled[todo] - low[todo])).astype(np.int64)
            ok = np.linalg.norm(draw.astype(np.float64), axis=1) <= self.sensitivity
            out[todo[ok]] = draw[ok]
            redraws += int((~ok).sum())
            todo = todo[~ok]
        return out, redraws

    def noisy_sum(self, updates: np.ndarray, signs: np.ndarray, rng: np.random.Generator
                  ) -> tuple[np.ndarray, np.ndarray, int]:
        """Steps 1-4 and the centring: the server's integer sum (int64, dim), the true integer
        sum it stands for (known only in simulation) and the rounding redraws."""
        ints, redraws = self.encode(updates, signs, rng)
        noisy = ints + discrete_gaussian(self.local_sigma(len(updates)) ** 2, ints.shape, rng)
        return self.centre(self.modular_sum(noisy, rng)), noisy.sum(axis=0), redraws

    def modular_sum(self, values: np.ndarray, rng: np.random.Generator | None = None) -> np.ndarray:
        """Step 4: each client's vector reduced into Z_(2^b), summed in Z_(2^b) (uint64): by
        numpy, or with ``secagg=protocol`` by the Bonawitz et al. double-masking protocol of
        ``secagg-protocol`` on those ring elements (complete graph, no dropouts)."""
        ring = np.uint64((1 << self.bits) - 1)
        inputs = values.view(np.uint64) & ring
        if self.secagg == "protocol":
            n = len(inputs)
            graph = neighbour_graph(n, 0, rng or np.random.default_rng(0))
            return run_protocol(inputs, self.bits, graph, np.zeros(n, dtype=bool), 0.5, self.name).total
        return inputs.sum(axis=0, dtype=np.uint64) & ring

    def centre(self, total: np.ndarray) -> np.ndarray:
        """Ring elements read as the signed integers in [-2^(b-1), 2^(b-1))."""
        signed = total.astype(np.int64)
        return signed - np.where(signed >= (1 << (self.bits - 1)), 1 << self.bits, 0)

    def aggregate(self, messages: Messages, participants: np.ndarray, rng: np.random.Generator,
                  global_params: np.ndarray | None = None) -> Aggregate:
        require_vectors(messages, self.name)
        p = messages.vector.shape[1]
        if p > self.dim:
            raise FltrError(f"{self.name}: the model has {p} parameters, more than dim = {self.dim}; "
                            f"set dim to a power of two >= {p}")
        g = np.zeros(p) if global_params is None else np.asarray(global_params, dtype=np.float64)
        n = messages.n_clients
        if self.local_sigma(n) < 0.5:
            raise FltrError(f"{self.name}: a round of {n} clients leaves each a discrete Gaussian std "
                            f"{self.local_sigma(n):.3g} < 1/2 of a step; set n >= {n} (the cohort size)")
        signs = rng.choice(np.array([-1.0, 1.0]), size=self.dim)
        summed, exact, redraws = self.noisy_sum(messages.updates(g), signs, rng)
        decoded = hadamard((summed * self.gamma)[None, :])[0] * signs
        mean = decoded[:p] / n
        stats = {"gamma": self.gamma, "rounding_redraws": float(redraws),
                 "wrap_probability": wrap_probability(self.bits, n, self.clip, self.noise_std, self.dim, self.gamma),
                 "wrapped_coordinates": float((summed != exact).sum()),
                 "epsilon_round": zcdp_epsilon(*self._best_zcdp(n), self.dp_delta) if n != self.n else self.claim.epsilon,
                 "bytes_up": float(n * self.dim * math.ceil(self.bits / 8))}
        return Aggregate(mean=mean + g if messages.vector_kind == "weights" else mean,
                         participants=np.asarray(participants), dropouts=np.empty(0, dtype=np.int64),
                         messages=None, stats=stats)


def decoded_noise_std(defense: DDGauss, members: int) -> float:
    """Per-coordinate std of what ``ddgauss`` adds to one client's clipped update when that
    update is alone in the modular sum of ``members`` clients (the others' updates zero), in
    update units -- a Gaussian approximation of the decoded error (Kairouz et al. 2021, Alg. 2).

    In the rotated, scaled domain the error is the sum of the members' discrete Gaussian
    shares N_Z(0, sigma_l^2), sigma_l = ``local_sigma(members)`` (variance summed exactly over
    the integers, ``discrete_gaussian_variance``), plus the target's randomized-rounding error,
    variance f (1 - f) per coordinate with f the fractional part, taken as its mean 1/6 over
    uniform f (the others' zero vectors round exactly; the norm conditioning and ring wrap-around,
    probability ``wrap_probability``, are ignored). The server undoes the scale (times gamma)
    and the orthonormal sign-flip + Walsh-Hadamard rotation: the i.i.d. shares stay
    uncorrelated with equal variance; the rounding errors, independent but of unequal
    variances, become weakly correlated coordinates whose variances are their mean -- treated
    as independent (their share of the variance is gamma^2 / 6 against members gamma^2
    sigma_l^2, negligible unless the ring is small). Each decoded coordinate mixes all dim
    rotated ones, so a Gaussian of this variance is the likelihood.
    """
    shares = members * discrete_gaussian_variance(defense.local_sigma(members) ** 2)
    return float(defense.gamma * np.sqrt(shares + 1.0 / 6.0))


def discrete_gaussian_variance(sigma2: float) -> float:
    """Variance of N_Z(0, sigma2), P(y) proportional to exp(-y^2 / (2 sigma2)) on the integers,
    summed over |y| <= 40 sigma + 10 (equal to sigma2 to double precision from sigma2 >= 16)."""
    if sigma2 >= 16.0:
        return float(sigma2)
    y = np.arange(-int(40 * np.sqrt(sigma2)) - 10, int(40 * np.sqrt(sigma2)) + 11, dtype=np.float64)
    p = np.exp(-y * y / (2.0 * sigma2))
    return float((p * y * y).sum() / p.sum())
