"""``bayes``: the exact Bayes posterior of a client's clicks given its message.

The ceiling of every passive attack under threat model ``server``: the server knows the
global model, the shown lists and their documents, the public algorithm (PDGD's learning
rate, the click model) and the defense's noise model (``NoiseModel``), so for every shown
list it can enumerate the click vectors the click model allows, replay the client's local
step for each deterministically, and weigh each by ``prior(c) * p(message | c)``. The guess
scores are the posterior click log-odds (``posterior_log_odds``: expit of a score is the
posterior marginal, and unlike the marginal it does not round to exactly 0 or 1 when the
posterior is nearly a point mass); decisions are the marginals above 0.5 (log-odds above 0).

Prior (``prior=``):

* ``"click-model"`` (default): the click model's exact probability of each click vector on
  the shown list (``cascade_log_prior``), which needs the relevance labels of the shown
  documents -- the testbed's server owns the documents and their judgments and the click
  model is public (the same assumption as ``seed-replay``). Vectors the cascade makes
  impossible (a click on an empty slot, or on a label with click probability 0) get 0.
* ``"uniform"``: every click vector on the shown slots equally likely (no labels used).

Likelihood, per ``NoiseModel.kind`` (the replayed message is first clipped exactly as the
client clips, ``NoiseModel.clips`` in order):

* ``none``: an exact-match test, written as a Gaussian of standard deviation
  ``EXACT_RTOL * ||observed update||`` (floating-point replay error is ~1e-15 relative);
* ``laplace`` / ``gaussian``: their densities per coordinate;
* ``gamma-difference``: one client's share of ``dp-distributed`` (Gamma(1/n, lambda) minus
  Gamma(1/n, lambda)). Its exact density is a Bessel-K (symmetric variance-gamma) density,
  ``|x|^(a-1/2) K_(a-1/2)(|x|/lambda)`` with a = 1/n. We use the approximation
  ``log f(x) ~ (2a - 1) log|x| - |x| / lambda`` (exact exponent at x -> 0, exponential tail
  at large |x|, off by ``a log|x|`` in between), with |x| floored at ``GAMMA_FLOOR`` times
  the message's largest weight (shares underflow to exactly 0; replay error is ~1e-16);
* ``rr`` (FOLtR-ES metric values): the randomized-response transition table over the MaxRR
  of each candidate click vector.

Algorithms. FPDGD (linear and MLP rankers): one PDGD step per query (Eq. 5-6): the
update of a single list is ``lr * coef(c) @ J`` with ``J`` the shown documents' score
gradients at the global model and ``coef(c)`` the per-position pair-weight sums, linear in
per-message pair weights ``W[a, b] = rho_ab sigma(d) sigma(-d)`` (``pairwise_weights``), so
every candidate is evaluated in the k-dimensional coefficient space (Gram matrices) when
clipping is L2 and the noise Gaussian or absent, and in parameter space otherwise.
Messages with B > 1 lists: the lists' steps depend on each other (each starts from the
weights the previous one left), so a candidate is a joint configuration of B click vectors,
replayed through the whole sequence (``replay_product``: a tree, list b's step computed once
per distinct model the earlier lists leave). When 2^(Bk) <= ``MAX_JOINT`` every configuration
is enumerated and the posterior is exact (named ``bayes``). Otherwise (named ``bayes-approx``):

1. *prefix search*: per list the k + 1 click sets "the top j shown documents by OLSR's score"
   (j = 0 .. shown), every joint combination ((k+1)^B, 14,641 for B = 4, k = 10) replayed and
   weighed by likelihood times prior; above ``MAX_JOINT`` a beam over the lists instead
   (``_prefix_beam``: ``BEAM`` partial configurations, each extended by the next list's
   prefixes, ranked by the fit of the message off the later lists' span -- exact for the
   linear ranker -- and evaluated completed by OLSR's decisions on the later lists);
2. *coordinate ascent* from the best of them: list by list, all 2^k click vectors with the
   other lists fixed, the list's conditional MAP kept, ``SWEEPS`` sweeps or a fixed point;
3. scores = posterior log-odds normalized over *every* distinct configuration evaluated in
   1 and 2, exact ties broken by OLSR's within-list order (weight ``TIE``).

Within one list the prefix set's posterior never reverses OLSR's order, so the scores differ
from OLSR's ranking only where a configuration off the prefixes explains the message better;
when OLSR ranks every list of a message perfectly the truth is among the prefixes and, without
noise, it is the posterior's point mass. (Not used: the shown lists of later queries are the
deterministic ranking under the weights the earlier clicks left, which a candidate could also
be checked against.)

FOLtR-ES: exact, per interaction. FedIPS and secure aggregation over more than one client are
refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
from scipy.special import expit, logsumexp

from attacks.view import client_updates, require_shown
from fltr_audit import plackett_luce
from fltr_audit.algorithms.fpdgd import pair_weights, swap_log_ratios
from fltr_audit.errors import FltrError
from fltr_audit.messages import Guess, ServerView

NOISE_KINDS = ("none", "laplace", "gaussian", "gamma-difference", "rr")
PRIORS = ("click-model", "uniform")
MAX_K = 10
"""Largest shown list enumerated (2^10 click vectors)."""
EXACT_RTOL = 1e-10
"""Standard deviation of the exact-match test relative to the observed update's norm."""
GAMMA_FLOOR = 1e-12
"""Floor of |residual| in the Gamma-difference log-density, relative to the largest |weight|."""
CHUNK_ELEMENTS = 1 << 22
"""Candidate-by-parameter elements materialized at once on the parameter-space path."""
SWEEPS = 4
"""Coordinate-ascent sweeps over the lists of a B > 1 message (stops early at a fixed point)."""
MAX_JOINT = 20_000
"""Largest joint OLSR-prefix search, (k+1)^B configurations per message (11^4 = 14,641);
beyond it a beam over the lists (``BEAM``)."""
BEAM = 64
"""Partial configurations kept per list by the beam that replaces a joint search over MAX_JOINT."""
TIE = 1e-9
"""Weight of OLSR's within-list order in the bayes-approx scores: it breaks exact ties between
posterior log-odds (e.g. slots no evaluated configuration clicks) and nothing else."""


@dataclass(frozen=True)
class ClipStep:
    """One clipping transform of the client: scale to norm ``bound`` (``norm`` l1 | l2) the
    ``of`` = "weights" (FPDGD Alg. 3) or the "update"."""

    bound: float
    of: str = "weights"
    norm: str = "l2"


@dataclass(frozen=True)
class NoiseModel:
    """What the defense stack does to a message, as the attack needs it for its likelihood.

    Attributes
    ----------
    kind : {"none", "laplace", "gaussian", "gamma-difference", "rr"}
    scale : float
        Laplace scale b, Gaussian std, Gamma scale lambda, or rr's keep probability p.
    clips : tuple of ClipStep
        The clipping transforms in the order the client applies them (before the noise).
    cohort : int
        n of the Gamma(1/n, lambda) shares; 0 = the round's cohort (participants + dropouts).
    values : tuple of float
        The randomized-response domain (rr only).
    defense : str
        The defense stack's name (for messages).
    """

    kind: str = "none"
    scale: float = 0.0
    clips: tuple[ClipStep, ...] = ()
    cohort: int = 0
    values: tuple[float, ...] = ()
    defense: str = "none"

    def __post_init__(self) -> None:
        if self.kind not in NOISE_KINDS:
            raise FltrError(f"--attack bayes: no likelihood for defense {self.defense!r} "
                            f"(supported noise: {', '.join(NOISE_KINDS)}, with clip)")


def click_vectors(k: int) -> np.ndarray:
    """All 2^k click vectors, bool (2^k, k); vector j clicks position i when bit i of j is set."""
    return (np.arange(2**k)[:, None] >> np.arange(k)) & 1 == 1


def cascade_log_prior(click_prob: np.ndarray, stop_prob: np.ndarray, labels: np.ndarray,
                      vectors: np.ndarray) -> np.ndarray:
    """``log P(c)`` of every click vector under the CCM, shape (..., C) for labels (..., k).

    With L the last click of c, the user clicked and went on at every click above L, skipped
    every unclicked position above L, clicked L and then stopped or went on without a click:
    ``P(c) = prod_{i<L} [c_i (1 - s_i) | 1 - c_i] * c_L * (s_L + (1 - s_L) prod_{j>L} (1 - c_j))``;
    without a click ``prod_j (1 - c_j)``. So ``log P`` is a sum of per-position terms picked by
    fixed indicator matrices of the candidates: three GEMMs. Empty slots (label -1) are never
    clicked; impossible vectors get -inf.
    """
    labels = np.asarray(labels)
    empty = labels < 0
    lab = np.where(empty, 0, labels)
    c = np.where(empty, 0.0, np.asarray(click_prob)[lab])
    s = np.where(empty, 0.0, np.asarray(stop_prob)[lab])
    k = labels.shape[-1]
    tail = np.ones(labels.shape[:-1] + (k + 1,))                          # prod_{j >= m} (1 - c_j)
    for m in range(k - 1, -1, -1):
        tail[..., m] = tail[..., m + 1] * (1.0 - c[..., m])
    with np.errstate(divide="ignore"):
        go_on = np.log(c) + np.log1p(-s)
        skip = np.log1p(-c)
        end = np.log(c) + np.log(s + (1.0 - s) * tail[..., 1:])
    big = -1e30                                                           # log 0 that GEMMs can carry
    go_on, skip, end = (np.maximum(x, big) for x in (go_on, skip, end))
    any_click = vectors.any(-1)
    last = np.where(any_click, k - 1 - np.argmax(vectors[:, ::-1], axis=-1), k)
    above = np.arange(k)[None, :] < last[:, None]
    out = (go_on @ (vectors & above).T.astype(np.float64) + skip @ (~vectors & above).T.astype(np.float64)
           + end @ (np.arange(k)[None, :] == last[:, None]).T.astype(np.float64))
    return np.where(out < big / 2, -np.inf, out)


def log_prior(prior: str, click_model: Any, labels: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """Log prior (..., C) of the candidate click vectors on lists with ``labels`` (..., k)."""
    if prior == "uniform":
        on_empty = (vectors[None, :, :] & (np.asarray(labels) < 0)[..., None, :]).any(-1)
        return np.where(on_empty, -np.inf, 0.0)
    if not hasattr(click_model, "stop_prob"):
        raise FltrError("--attack bayes: the click-model prior needs a cascade click model "
                        f"(got {getattr(click_model, 'name', click_model)!r}); use prior='uniform'")
    return cascade_log_prior(click_model.click_prob, click_model.stop_prob, labels, vectors)


def examined_unclicked(vectors: np.ndarray) -> np.ndarray:
    """PDGD's losing positions of each click vector: unclicked, at or above the one right
    after the last click (``fpdgd.pair_weights``), bool (C, k)."""
    k = vectors.shape[-1]
    any_click = vectors.any(-1)
    last = np.where(any_click, k - 1 - np.argmax(vectors[..., ::-1], axis=-1), -1)
    return ~vectors & (np.arange(k) <= last[..., None] + 1)


def ranking_geometry(scores: np.ndarray, valid: np.ndarray, positions: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray]:
    """Shown scores (n, k) (-inf on empty slots) and the log-denominators (n, k + 1) of the
    shown ranking over each query's candidates (as ``fpdgd.cohort_rankings``).

    ``scores`` (n, D) and ``valid`` (n, D) cover each query's candidates; ``positions`` (n, k)
    are the shown candidates' columns, -1 on empty slots.
    """
    ok = positions >= 0
    shown_scores = np.where(ok, np.take_along_axis(scores, np.where(ok, positions, 0), axis=1), -np.inf)
    extended = np.concatenate([positions, np.full((len(positions), 1), -1, dtype=np.int64)], axis=1)
    return shown_scores, plackett_luce.log_denominators(scores, valid, extended)


def pairwise_weights(shown_scores: np.ndarray, log_dens: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """``W[a, b] = rho_ab sigma(s_a - s_b) sigma(s_b - s_a)`` for every pair of shown positions,
    symmetric (n, k, k), zero diagonal and on empty slots (Eq. 5-6; the weight a pair adds
    to its preferred position and subtracts from the other, whichever is preferred)."""
    n, k = mask.shape
    a, b = np.triu_indices(k, 1)
    rows = np.repeat(np.arange(n), len(a))
    aa, bb = np.tile(a, n), np.tile(b, n)
    keep = mask[rows, aa] & mask[rows, bb]
    rows, aa, bb = rows[keep], aa[keep], bb[keep]
    W = np.zeros((n, k, k))
    if len(rows):
        rho = expit(swap_log_ratios(shown_scores, log_dens, rows, aa, bb))
        d = shown_scores[rows, aa] - shown_scores[rows, bb]
        w = rho * expit(d) * expit(-d)
        W[rows, aa, bb] = w
        W[rows, bb, aa] = w
    return W


def pair_sign_tensor(vectors: np.ndarray) -> np.ndarray:
    """``T[a, b, c] = clicks_c[a] neg_c[b] - neg_c[a] clicks_c[b]`` (k, k, C): with it the PDGD
    coefficients of candidate c are ``coef[a] = sum_b W[a, b] T[a, b, c]`` (Eq. 5)."""
    clicks = vectors.T.astype(np.float64)                                  # (k, C)
    neg = examined_unclicked(vectors).T.astype(np.float64)
    return clicks[:, None, :] * neg[None, :, :] - neg[:, None, :] * clicks[None, :, :]


def candidate_coefficients(W: np.ndarray, T: np.ndarray, left: np.ndarray | None = None) -> np.ndarray:
    """The PDGD gradient coefficients (Eq. 5) of every candidate on every list, (n, k, C), from
    the pair weights W (n, k, k) -- zero on empty slots, so no mask is needed -- and
    ``pair_sign_tensor`` T (k, k, C); with ``left`` (n, r, k), the products ``left @ coef``
    (n, r, C) instead. Either way one GEMM: ``Q[n, j, (a, b)] = left[n, j, a] W[n, a, b]`` times
    T as a (k^2, C) matrix (``left`` = identity gives the coefficients themselves)."""
    n, k, _ = W.shape
    if left is None:
        Q = np.zeros((n, k, k, k))
        Q[:, np.arange(k), np.arange(k), :] = W
    else:
        Q = left[:, :, :, None] * W[:, None, :, :]
    r = Q.shape[1]
    return (Q.reshape(n * r, k * k) @ T.reshape(k * k, -1)).reshape(n, r, -1)


def _clip_scalars(clips: tuple[ClipStep, ...], gg: np.ndarray, gu: np.ndarray, uu: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
    """(alpha, beta) with the clipped candidate weights ``alpha g + beta u`` from the Gram
    quantities ``g.g``, ``g.u``, ``u.u`` (L2 clips only)."""
    alpha, beta = np.ones_like(uu), np.ones_like(uu)
    tiny = np.finfo(np.float64).tiny
    for step in clips:
        if step.of == "weights":
            a, b = alpha, beta
        else:
            a, b = alpha - 1.0, beta
        norm = np.sqrt(np.maximum(a * a * gg + 2 * a * b * gu + b * b * uu, 0.0))
        c = np.minimum(1.0, step.bound / np.maximum(norm, tiny))
        if step.of == "weights":
            alpha, beta = alpha * c, beta * c
        else:
            alpha, beta = 1.0 + c * (alpha - 1.0), beta * c
    return alpha, beta


def _clip_full(clips: tuple[ClipStep, ...], g: np.ndarray, u: np.ndarray) -> np.ndarray:
    """The clipped candidate *updates* of raw updates u (..., P) from global g (P,)."""
    w = g + u
    tiny = np.finfo(np.float64).tiny
    for step in clips:
        x = w if step.of == "weights" else w - g
        norm = np.abs(x).sum(-1) if step.norm == "l1" else np.sqrt((x * x).sum(-1))
        c = np.minimum(1.0, step.bound / np.maximum(norm, tiny))[..., None]
        w = x * c if step.of == "weights" else g + x * c
    return w - g


def _coordinate_loglik(noise: NoiseModel, r: np.ndarray, cohort: int, floor: np.ndarray) -> np.ndarray:
    """Sum over the last axis of the per-coordinate noise log-density of residuals r."""
    if noise.kind == "laplace":
        return -np.abs(r).sum(-1) / noise.scale
    if noise.kind == "gamma-difference":
        a = 1.0 / max(cohort, 1)
        x = np.maximum(np.abs(r), floor)
        return ((2 * a - 1) * np.log(x) - x / noise.scale).sum(-1)
    raise AssertionError(noise.kind)


def _gaussian_std(noise: NoiseModel, observed: np.ndarray) -> np.ndarray:
    """Per-message std of the Gaussian likelihood: the noise std, or the exact-match width."""
    if noise.kind == "gaussian":
        return np.full(len(observed), noise.scale)
    norm = np.sqrt((observed * observed).sum(-1))
    return np.maximum(EXACT_RTOL * norm, 1e-100)


def single_list_loglik(noise: NoiseModel, g: np.ndarray, J: np.ndarray, W: np.ndarray, T: np.ndarray,
                       observed: np.ndarray, lr: float, cohort: int) -> np.ndarray:
    """``log p(observed update | candidate)`` (n, C) for candidates with raw update ``lr * coef^T J``.

    Parameters
    ----------
    g : ndarray (P,)
    J : ndarray (n, k, P)
        Score gradients of the shown documents at g.
    W, T : the pair weights (n, k, k) and ``pair_sign_tensor`` (k, k, C) (the coefficients)
    observed : ndarray (n, P)
        The observed updates (message minus g).
    """
    if noise.kind in ("none", "gaussian") and all(s.norm == "l2" for s in noise.clips):
        return _gram_loglik(noise, g, J, W, T, observed, lr)
    coef = candidate_coefficients(W, T)
    n, k, C = coef.shape
    P = J.shape[-1]
    out = np.empty((n, C))
    step = max(1, CHUNK_ELEMENTS // (C * P))
    floor = GAMMA_FLOOR * np.maximum(np.abs(observed + g).max(-1), 1e-300)
    for s in range(0, n, step):
        part = slice(s, s + step)
        u = lr * (np.swapaxes(coef[part], 1, 2) @ J[part])                   # (m, C, P)
        if noise.clips:
            u = _clip_full(noise.clips, g, u)
        r = observed[part, None, :] - u
        if noise.kind in ("none", "gaussian"):
            std = _gaussian_std(noise, observed[part])[:, None]
            out[part] = -(r * r).sum(-1) / (2 * std * std)
        else:
            out[part] = _coordinate_loglik(noise, r, cohort, floor[part, None, None])
    return out


def _gram_loglik(noise: NoiseModel, g: np.ndarray, J: np.ndarray, W: np.ndarray, T: np.ndarray,
                 observed: np.ndarray, lr: float) -> np.ndarray:
    """The Gaussian / exact-match log-likelihood (n, C) in the k-dimensional span of the shown
    documents' gradients, without cancellation: with ``v = J^T a_v + e_v`` and
    ``g = J^T a_g + e_g`` (least squares, e orthogonal to the span), the residual of a candidate
    whose clipped weights are ``alpha g + beta u`` is ``J^T d + e_v - (alpha - 1) e_g`` with
    ``d = a_v - (alpha - 1) a_g - beta lr coef``, so ``||r||^2 = ||M^T d||^2 + ||e_v - (alpha-1) e_g||^2``
    with ``G = J J^T = M M^T`` (M = V sqrt(Lambda)); the exact candidate's d is at rounding
    level, not the difference of two large numbers. ``M^T coef`` and ``(J g) . coef`` of all
    candidates come out of one GEMM (``candidate_coefficients`` with ``left``)."""
    G = J @ np.swapaxes(J, 1, 2)                                              # (n, k, k)
    lam, V = np.linalg.eigh(G)
    keep = lam > 1e-12 * np.maximum(lam.max(-1, keepdims=True), 1e-300)
    inv = np.where(keep, 1.0 / np.where(keep, lam, 1.0), 0.0)
    Mt = np.swapaxes(V * np.sqrt(np.where(keep, lam, 0.0))[:, None, :], 1, 2)   # M^T (n, k, k)
    k = Mt.shape[1]

    def project(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        Jx = np.einsum("nkp,np->nk", J, x)
        a = np.einsum("nkr,nr,nr->nk", V, inv, np.einsum("nkr,nk->nr", V, Jx))
        return a, x - np.einsum("nk,nkp->np", a, J)

    a_v, e_v = project(observed)
    left = np.concatenate([Mt, (J @ g)[:, None, :]], axis=1) if noise.clips else Mt
    R = candidate_coefficients(W, T, left)                                   # (n, k [+1], C)
    dM = R[:, :k]
    if noise.clips:
        a_g, e_g = project(np.broadcast_to(g, observed.shape))
        uu = lr * lr * np.einsum("nkc,nkc->nc", dM, dM)
        alpha, beta = _clip_scalars(noise.clips, float(g @ g), lr * R[:, k], uu)
        a1 = alpha - 1.0
        dM *= -(beta * lr)[:, None, :]
        dM += (Mt @ a_v[:, :, None]) - a1[:, None, :] * (Mt @ a_g[:, :, None])
        e2 = (e_v * e_v).sum(-1)[:, None] - 2 * a1 * (e_v * e_g).sum(-1)[:, None] + a1 * a1 * (e_g * e_g).sum(-1)[:, None]
    else:
        dM *= -lr
        dM += Mt @ a_v[:, :, None]
        e2 = (e_v * e_v).sum(-1)[:, None]
    rr = np.einsum("nkc,nkc->nc", dM, dM) + e2
    std = _gaussian_std(noise, observed)[:, None]
    return -np.maximum(rr, 0.0) / (2 * std * std)


LOG_ODDS_BOUND = 1e300
"""|log-odds| of a click the posterior rules out (or in) entirely: finite, so scores stay finite."""
UNDERFLOW = 1e-300
"""A side's probability mass below this (relative to the best candidate) is recomputed from its best term."""


def posterior_log_odds(logpost: np.ndarray, events: np.ndarray) -> np.ndarray:
    """Posterior log-odds ``log P(e_j | message) - log P(not e_j | message)`` (n, k) of events
    ``events`` (C, k) (bool: candidate c makes e_j true, e.g. clicks position j) from the
    unnormalized log posteriors ``logpost`` (n, C) of the C candidates.

    Both sides' masses come from one product of ``exp(logpost - max)`` with ``[events | ~events]``.
    Where a side's mass underflows -- its best candidate is more than ~690 nats behind the
    overall best, as in the noise-free exact-match posterior -- its log-mass is its best term
    (off by at most log C), so a near point mass keeps its order (how far the best alternative
    falls behind) instead of rounding to a marginal of exactly 0 or 1, which would tie every
    confident slot at the low false-positive rates TPR at 1 % FPR is read at. ``expit`` of the
    result is the posterior marginal; it is > 0 exactly where the marginal is > 0.5."""
    events = np.asarray(events, dtype=bool)
    top = logpost.max(axis=1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    k = events.shape[1]
    mass = np.exp(logpost - top) @ np.concatenate([events, ~events], axis=1).astype(np.float64)   # (n, 2k)
    with np.errstate(divide="ignore"):
        log_mass = np.log(mass)
    lost = mass < UNDERFLOW
    rows = np.flatnonzero(lost.any(axis=1))
    both = np.concatenate([events, ~events], axis=1)
    step = max(1, CHUNK_ELEMENTS // (logpost.shape[1] * 2 * k))
    for s in range(0, len(rows), step):
        r = rows[s:s + step]
        best = np.where(both[None], logpost[r][:, :, None], -np.inf).max(axis=1) - top[r]     # (m, 2k)
        log_mass[r] = np.where(lost[r], best, log_mass[r])
    with np.errstate(invalid="ignore"):
        odds = log_mass[:, :k] - log_mass[:, k:]
    odds = np.nan_to_num(odds, nan=0.0, posinf=LOG_ODDS_BOUND, neginf=-LOG_ODDS_BOUND)
    return np.clip(odds, -LOG_ODDS_BOUND, LOG_ODDS_BOUND)


class Bayes:
    """The exact Bayes attack (module docstring).

    Parameters
    ----------
    algorithm : object
        The audited algorithm: FPDGD (its ``lr``, ``click_model``, ``local_updates``) or
        FOLtR-ES (its ``click_model``).
    noise : NoiseModel
        The defense stack's noise model (built by the composition root); default: none.
    prior : {"click-model", "uniform"}
        The prior over click vectors; with ``"uniform"`` the attack is named ``bayes-uniform``.
    """

    def __init__(self, algorithm: Any = None, noise: NoiseModel | None = None, prior: str = "click-model"):
        if prior not in PRIORS:
            raise FltrError(f"--attack bayes: prior must be one of {', '.join(PRIORS)}, got {prior!r}")
        self.algorithm = algorithm
        self.noise = noise if noise is not None else NoiseModel()
        self.prior = prior
        self.name = "bayes" if prior == "click-model" else "bayes-uniform"

    # -- entry point ------------------------------------------------------------------------
    def guess(self, view: ServerView) -> Guess:
        require_shown(view, self.name)
        if self.algorithm is None:
            raise FltrError("--attack bayes: needs the audited algorithm (its learning rate and click model)")
        algo = getattr(self.algorithm, "name", "")
        if view.messages is not None and view.messages.metric is not None:
            return self._guess_metric(view)
        if algo != "fpdgd" and not hasattr(self.algorithm, "local_updates"):
            raise FltrError(f"--attack bayes: cannot replay {algo or 'these'} messages "
                            "(supported: fpdgd with a linear or MLP ranker, foltr-es metric values)")
        if self.noise.kind == "rr":
            raise FltrError(f"--attack bayes: defense {self.noise.defense!r} randomizes metric values; "
                            "these messages carry parameter vectors")
        updates, aggregate_update = client_updates(view, self.name)
        if updates is None:
            n_members = len(view.participants)
            if n_members != 1:
                raise FltrError(f"--attack bayes: under secure aggregation the aggregate of {n_members} clients "
                                "is intractable to enumerate (supported: individual messages, a cohort of one, "
                                "or --threat-model server-malicious)")
            updates = aggregate_update[None, :]
        shown = view.interactions.shown
        k = shown.shape[-1]
        if k > MAX_K:
            raise FltrError(f"--attack bayes: enumerates at most {MAX_K} shown documents per list, got k = {k}")
        if shown.shape[1] == 1:
            score = self._single_list(view, updates)[:, None, :]
            name = self.name
        else:
            score = self._several_lists(view, updates)
            name = self.name if exhaustive(shown.shape[1], k) else self.name + "-approx"
        mask = shown >= 0
        return Guess(attack=name, score=np.where(mask, score, np.nan), decision=(score > 0) & mask)

    # -- shared pieces ----------------------------------------------------------------------
    def _cohort(self, view: ServerView) -> int:
        return self.noise.cohort or int(len(view.participants) + len(view.dropouts))

    def _labels(self, view: ServerView, shown: np.ndarray) -> np.ndarray:
        docs = view.documents
        return np.where(shown >= 0, docs.labels[np.maximum(shown, 0)], -1)

    def _candidates(self, view: ServerView, shown: np.ndarray, labels: np.ndarray | None = None):
        """Click vectors (C, k) and the log prior (n, C) of every list of ``shown`` (n, k)."""
        vectors = click_vectors(shown.shape[-1])
        labels = self._labels(view, shown) if labels is None else labels
        return vectors, log_prior(self.prior, self.algorithm.click_model, labels, vectors)

    @staticmethod
    def _query_candidates(view: ServerView, queries: np.ndarray, shown: np.ndarray
                          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each query's candidate rows (n, D) (-1 padded), validity, and the shown positions (n, k)."""
        docs = view.documents
        rows = docs.padded_rows[queries]
        starts = docs.query_ptr[queries]
        positions = np.where(shown >= 0, shown - starts[:, None], -1)
        return rows, rows >= 0, positions

    # -- FPDGD, one list per message: exact ------------------------------------------------
    def _single_list(self, view: ServerView, updates: np.ndarray) -> np.ndarray:
        ranker, g = view.ranker, np.asarray(view.global_params, dtype=np.float64)
        shown = view.interactions.shown[:, 0]
        queries = view.interactions.queries[:, 0]
        mask = shown >= 0
        docs = view.documents
        rows, valid, positions = self._query_candidates(view, queries, shown)
        all_scores = ranker.score(g, docs.features)
        scores = np.where(valid, all_scores[np.maximum(rows, 0)], -np.inf)
        shown_scores, log_dens = ranking_geometry(scores, valid, positions)
        W = pairwise_weights(shown_scores, log_dens, mask)
        vectors, prior = self._candidates(view, shown)
        T = pair_sign_tensor(vectors)
        X = docs.features[np.maximum(shown, 0)]
        X[~mask] = 0.0
        n, k = shown.shape
        P = len(g)
        out = np.empty((n, k))
        step = max(1, CHUNK_ELEMENTS // (k * P) // 4)
        for s in range(0, n, step):
            part = slice(s, s + step)
            J = ranker.grad(g, X[part])                                       # (m, k, P)
            J[~mask[part]] = 0.0
            loglik = single_list_loglik(self.noise, g, J, W[part], T, updates[part], self.algorithm.lr,
                                        self._cohort(view))
            out[part] = posterior_log_odds(prior[part] + loglik, vectors)
        return out

    # -- FPDGD, several lists per message: prefix search + coordinate ascent ----------------
    def _pdgd_step(self, view: ServerView, messages: np.ndarray, b: int, w: np.ndarray, clicks: np.ndarray,
                   per_model: bool = False) -> np.ndarray:
        """List ``b``'s PDGD step (Eq. 5-6, times the learning rate) from each of S models ``w``
        (m, S, P): for each of the E click vectors ``clicks`` (m, E, k), (m, S, E, P); with
        ``per_model``, for model s's own click vector ``clicks[:, s]`` (m, S, k), (m, S, 1, P).
        One click vector per model: ``fpdgd.pair_weights`` (only the pairs that vector needs).
        Several: every pair's weight once per model (``pairwise_weights``), each vector's
        coefficients their signed sums (``pair_sign_tensor``), one batched GEMM."""
        ranker, docs, inter = view.ranker, view.documents, view.interactions
        m, S = w.shape[:2]
        k = clicks.shape[-1]
        shown = inter.shown[messages, b]
        mask = shown >= 0
        rows, valid, positions = self._query_candidates(view, inter.queries[messages, b], shown)
        scores = np.where(valid[:, None, :], _score_many(ranker, w, docs.features[np.maximum(rows, 0)]), -np.inf)
        D = rows.shape[1]
        shown_scores, log_dens = ranking_geometry(scores.reshape(m * S, D), np.repeat(valid, S, axis=0),
                                                  np.repeat(positions, S, axis=0))
        if per_model or clicks.shape[1] == 1:
            own = np.broadcast_to(clicks, (m, S, k)).reshape(m * S, k)
            coef = pair_weights(shown_scores, log_dens, own, np.repeat(mask, S, axis=0)).reshape(m, S, 1, k)
        else:
            W = pairwise_weights(shown_scores, log_dens, np.repeat(mask, S, axis=0)).reshape(m, S, k, k)
            T = np.moveaxis(pair_sign_tensor(clicks.reshape(-1, k)).reshape(k, k, m, -1), 2, 0)   # (m, k, k, E)
            coef = np.moveaxis(np.swapaxes(W, 1, 2) @ T, 1, 3)                             # (m, S, E, k)
        E = coef.shape[2]
        X = docs.features[np.maximum(shown, 0)]
        X[~mask] = 0.0
        models = np.repeat(w, E, axis=1) if ranker.name != "linear" else w[:, :1]       # linear: J = X
        step = self.algorithm.lr * _vjp_many(ranker, models, X, coef.reshape(m, S * E, k))
        return step.reshape(m, S, E, -1)

    def replay(self, view: ServerView, clicks: np.ndarray, messages: np.ndarray) -> np.ndarray:
        """The raw updates (m, C, P) of messages ``messages`` (m,) for candidate click
        configurations ``clicks`` (m, C, B, k): the client's B sequential PDGD steps (Alg. 1)."""
        m, C, B, k = clicks.shape
        g = np.asarray(view.global_params, dtype=np.float64)
        local = getattr(self.algorithm, "local_updates", True)
        total = np.zeros((m, C, len(g)))
        for b in range(B):
            current = g + total if local else np.broadcast_to(g, total.shape)
            total += self._pdgd_step(view, messages, b, current, clicks[:, :, b], per_model=True)[:, :, 0]
        return total

    def replay_product(self, view: ServerView, choices: list[np.ndarray], messages: np.ndarray) -> np.ndarray:
        """The raw updates (m, C_0 ... C_(B-1), P) of every configuration of the Cartesian product
        of per-list click vectors ``choices[b]`` (m, C_b, k), list 0 varying slowest (C order).
        Replayed as a tree: list b's step is computed once per distinct model its prefix of
        lists leaves, so the cost is about that of the last list, not B times the product."""
        g = np.asarray(view.global_params, dtype=np.float64)
        local = getattr(self.algorithm, "local_updates", True)
        m = len(messages)
        total = np.zeros((m, 1, len(g)))
        for b, choice in enumerate(choices):
            S, E = total.shape[1], choice.shape[1]
            current = g + total if local else np.broadcast_to(g, total.shape)
            total = (total[:, :, None, :] + self._pdgd_step(view, messages, b, current, choice)).reshape(m, S * E, -1)
        return total

    def _several_lists(self, view: ServerView, updates: np.ndarray) -> np.ndarray:
        """Posterior click log-odds (n, B, k) of messages with B > 1 lists, exact or approximate
        (module docstring: ``bayes`` / ``bayes-approx``), in chunks of messages."""
        from attacks.olsr import OLSR

        inter = view.interactions
        n, B, k = inter.shown.shape
        mask = inter.shown >= 0
        olsr_guess = OLSR().guess(view)
        olsr = np.where(mask, np.nan_to_num(olsr_guess.score, nan=-np.inf, posinf=np.finfo(float).max,
                                            neginf=-np.finfo(float).max), -np.inf)
        olsr_idx = ((olsr_guess.decision & mask) * (1 << np.arange(k))).sum(-1)        # (n, B) vector indices
        rank = np.argsort(np.argsort(-olsr, axis=-1, kind="stable"), axis=-1)            # 0 = OLSR's top slot
        vectors = click_vectors(k)
        labels = self._labels(view, inter.shown)
        prior = np.stack([log_prior(self.prior, self.algorithm.click_model, labels[:, b], vectors)
                          for b in range(B)], axis=1)                                   # (n, B, 2^k)
        widest = 2 ** (B * k) if exhaustive(B, k) else max(min((k + 1) ** B, MAX_JOINT), BEAM * (k + 1), 2**k)
        step = max(1, CHUNK_ELEMENTS // (widest * max(len(view.global_params), 1)))
        odds = np.empty((n, B, k))
        for s in range(0, n, step):
            idx = np.arange(s, min(n, s + step))
            odds[idx] = self._posterior_chunk(view, updates[idx], idx, rank[idx], olsr_idx[idx], mask[idx], prior[idx])
        if exhaustive(B, k):
            return odds
        return odds + TIE * (1.0 - rank / k)                                             # ties: OLSR's order

    def _posterior_chunk(self, view: ServerView, observed: np.ndarray, messages: np.ndarray, rank: np.ndarray,
                          olsr_idx: np.ndarray, mask: np.ndarray, prior: np.ndarray) -> np.ndarray:
        """Posterior click log-odds (m, B, k) over every configuration evaluated for messages
        ``messages``: all 2^(Bk) when ``exhaustive`` (exact), else the OLSR-prefix search, then
        coordinate ascent from its best."""
        m, B, k = mask.shape
        g = np.asarray(view.global_params, dtype=np.float64)
        cohort = self._cohort(view)
        bits = 1 << np.arange(k)
        shown = mask.sum(-1)                                                             # (m, B)
        prefixes = (rank[:, :, None, :] < np.arange(k + 1)[:, None]) & mask[:, :, None, :]   # (m, B, k+1, k)
        prefix_idx = (prefixes * bits).sum(-1)                                           # (m, B, k+1)
        rows = np.arange(m)[:, None]

        def joint_prior(config: np.ndarray) -> np.ndarray:                              # config (m, E, B)
            return sum(prior[rows, b, config[:, :, b]] for b in range(B))

        def loglik(u: np.ndarray) -> np.ndarray:
            return _loglik_full(self.noise, g, u, observed, cohort)

        vectors = click_vectors(k)
        if exhaustive(B, k):
            config = np.broadcast_to(np.stack(np.unravel_index(np.arange(2 ** (B * k)), (2**k,) * B), axis=-1),
                                     (m, 2 ** (B * k), B))
            u = self.replay_product(view, [np.broadcast_to(vectors & mask[:, b, None, :], (m, 2**k, k))
                                           for b in range(B)], messages)
            return _log_odds(config, joint_prior(config) + loglik(u), k)
        if (k + 1) ** B <= MAX_JOINT:
            j = np.stack(np.unravel_index(np.arange((k + 1) ** B), (k + 1,) * B), axis=-1)   # (E, B)
            config = np.stack([prefix_idx[:, b, j[:, b]] for b in range(B)], axis=-1)       # (m, E, B)
            u = self.replay_product(view, [prefixes[:, b] for b in range(B)], messages)
            post = np.where((j[None] <= shown[:, None, :]).all(-1), joint_prior(config) + loglik(u), -np.inf)
        else:
            config, post = self._prefix_beam(view, messages, observed, prefix_idx, shown, olsr_idx, prior,
                                             lambda c, u: joint_prior(c) + loglik(u))
        seen_idx, seen_post = [config], [post]
        best = np.argmax(post, axis=1)
        state = config[np.arange(m), best]                                               # (m, B) vector indices
        for _ in range(SWEEPS):
            before = state.copy()
            for b in range(B):
                choices = [np.broadcast_to(vectors & mask[:, b, None, :], (m, len(vectors), k)) if c == b
                           else ((state[:, c, None, None] & bits) > 0) for c in range(B)]
                cand = np.repeat(state[:, None, :], len(vectors), axis=1)
                cand[:, :, b] = np.arange(len(vectors))
                ll = loglik(self.replay_product(view, choices, messages))
                state[:, b] = np.argmax(prior[:, b] + ll, axis=1)                      # the list's conditional MAP
                seen_idx.append(cand)
                seen_post.append(joint_prior(cand) + ll)
            if np.array_equal(before, state):
                break
        return _log_odds(np.concatenate(seen_idx, 1), np.concatenate(seen_post, 1), k)

    def _prefix_beam(self, view: ServerView, messages: np.ndarray, observed: np.ndarray, prefix_idx: np.ndarray,
                     shown: np.ndarray, olsr_idx: np.ndarray, prior: np.ndarray,
                     score: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """The OLSR-prefix search when (k+1)^B exceeds ``MAX_JOINT``: a beam over the lists in
        order. Each of the ``BEAM`` kept partial configurations (lists before b) is extended by
        the k + 1 prefixes of list b. Every extension, completed by OLSR's decisions on the lists
        after b, is replayed and scored (``score`` of the (m, E, B) vector indices and raw updates)
        and joins the evaluated set; the ``BEAM`` kept are the best by ``_partial_fit`` (the
        message's residual off the later lists' span), which the unknown later lists cannot
        distort. Returns every configuration evaluated (m, E, B) and its log posterior (m, E)."""
        m, B, k1 = prefix_idx.shape
        k = k1 - 1
        partial = np.zeros((m, 1, 0), dtype=np.int64)
        seen_idx, seen_post = [], []
        rows = np.arange(m)[:, None]
        for b in range(B):
            S = partial.shape[1]
            ext = np.concatenate([np.repeat(partial, k1, axis=1),
                                  np.tile(prefix_idx[:, b], (1, S))[:, :, None]], axis=2)   # (m, S (k+1), b+1)
            full = np.concatenate([ext, np.broadcast_to(olsr_idx[:, None, b + 1:], (m, S * k1, B - b - 1))], axis=2)
            u = self.replay(view, (full[..., None] >> np.arange(k)) & 1 == 1, messages)
            valid = np.tile(np.arange(k1), S)[None, :] <= shown[:, b, None]
            post = np.where(valid, score(full, u), -np.inf)
            seen_idx.append(full)
            seen_post.append(post)
            if b == B - 1:
                break
            early = self.replay(view, (ext[..., None] >> np.arange(k)) & 1 == 1, messages)
            fit = sum(prior[rows, c, ext[:, :, c]] for c in range(b + 1)) + self._partial_fit(view, messages, b, early,
                                                                                             observed)
            keep = np.argsort(-np.where(valid, fit, -np.inf), axis=1, kind="stable")[:, :BEAM]
            partial = np.take_along_axis(ext, keep[:, :, None], axis=1)
        return np.concatenate(seen_idx, 1), np.concatenate(seen_post, 1)

    def _partial_fit(self, view: ServerView, messages: np.ndarray, b: int, early: np.ndarray, observed: np.ndarray
                     ) -> np.ndarray:
        """Gaussian log-fit (m, E) of partial configurations of lists 0..b, raw updates ``early``
        (m, E, P): the residual ``observed - early`` projected off the span of the later lists'
        shown documents' score gradients at the global model and of the global model itself.
        For the linear ranker every later PDGD step lies in that span whatever the clicks, so the
        true partial configuration leaves only the projected noise; the clipping scale is a free
        factor (fitted by least squares) when the client clips. The noise std is the noise
        model's (Laplace and Gamma differences by their std, exact match by its width)."""
        g = np.asarray(view.global_params, dtype=np.float64)
        later = view.interactions.shown[messages, b + 1:].reshape(len(messages), -1)
        X = view.documents.features[np.maximum(later, 0)]
        X[later < 0] = 0.0
        A = np.concatenate([view.ranker.grad(g, X), np.broadcast_to(g, (len(messages), 1, len(g)))], axis=1)
        U, sv, _ = np.linalg.svd(np.swapaxes(A, 1, 2), full_matrices=False)             # (m, P, r)
        U = U * (sv > 1e-10 * np.maximum(sv.max(-1, keepdims=True), 1e-300))[:, None, :]

        def off_span(x: np.ndarray) -> np.ndarray:                                      # x (m, ..., P)
            flat = x.reshape(len(x), -1, x.shape[-1])
            return (flat - (flat @ U) @ np.swapaxes(U, 1, 2)).reshape(x.shape)

        y, Z = off_span(observed), off_span(early)
        if self.noise.clips:
            zz = (Z * Z).sum(-1)
            scale = np.where(zz > 0, np.einsum("mep,mp->me", Z, y) / np.where(zz > 0, zz, 1.0), 1.0)
            Z = Z * scale[..., None]
        r = y[:, None, :] - Z
        std = {"laplace": np.sqrt(2.0), "gamma-difference": np.sqrt(2.0 / self._cohort(view))}.get(self.noise.kind)
        sigma = self.noise.scale * std if std is not None else _gaussian_std(self.noise, observed)
        sigma = np.broadcast_to(sigma, (len(observed),))[:, None]
        return -(r * r).sum(-1) / (2 * sigma * sigma)

    # -- FOLtR-ES metric messages: exact per interaction ----------------------------------
    def _guess_metric(self, view: ServerView) -> Guess:
        metric = np.asarray(view.messages.metric, dtype=np.float64)          # (n, B)
        shown = view.interactions.shown
        n, B, k = shown.shape
        if k > MAX_K:
            raise FltrError(f"--attack bayes: enumerates at most {MAX_K} shown documents per list, got k = {k}")
        flat = shown.reshape(n * B, k)
        vectors, prior = self._candidates(view, flat)
        first = np.where(vectors.any(-1), np.argmax(vectors, axis=-1), -1)
        value = (first >= 0) / (np.maximum(first, 0) + 1.0)             # MaxRR of each candidate (C,)
        received = metric.reshape(-1)[:, None]
        same = np.isclose(received, value[None, :], rtol=1e-9, atol=1e-12)
        if self.noise.kind == "rr":
            p, size = self.noise.scale, len(self.noise.values)
            loglik = np.where(same, np.log(p), np.log((1.0 - p) / (size - 1)))
        elif self.noise.kind == "none":
            loglik = np.where(same, 0.0, -np.inf)
        else:
            raise FltrError(f"--attack bayes: defense {self.noise.defense!r} does not apply to metric values")
        logpost = prior + loglik
        if np.isneginf(logpost).all(axis=1).any():      # a value no candidate explains: fall back to the prior
            logpost = np.where(np.isneginf(logpost).all(axis=1, keepdims=True), prior, logpost)
        odds = posterior_log_odds(logpost, vectors).reshape(n, B, k)
        mask = shown >= 0
        return Guess(attack=self.name, score=np.where(mask, odds, np.nan), decision=(odds > 0) & mask)


def _loglik_full(noise: NoiseModel, g: np.ndarray, u: np.ndarray, observed: np.ndarray, cohort: int) -> np.ndarray:
    """Log-likelihood (m, C) of observed updates (m, P) given raw candidate updates (m, C, P)."""
    if noise.clips:
        u = _clip_full(noise.clips, g, u)
    r = observed[:, None, :] - u
    if noise.kind in ("none", "gaussian"):
        std = _gaussian_std(noise, observed)[:, None]
        return -(r * r).sum(-1) / (2 * std * std)
    floor = GAMMA_FLOOR * np.maximum(np.abs(observed + g).max(-1), 1e-300)[:, None, None]
    return _coordinate_loglik(noise, r, cohort, floor)


def exhaustive(B: int, k: int) -> bool:
    """Whether messages of B lists of k slots are enumerated exactly (2^(Bk) <= MAX_JOINT)."""
    return 2 ** (B * k) <= MAX_JOINT


def _log_odds(config: np.ndarray, logpost: np.ndarray, k: int) -> np.ndarray:
    """Posterior click log-odds (m, B, k) normalized over the distinct evaluated configurations
    ``config`` (m, E, B) (per-list click-vector indices; repeats counted once) with log
    posteriors ``logpost`` (m, E) (``posterior_log_odds`` per list position)."""
    m, E, B = config.shape
    order = np.lexsort(tuple(config[:, :, b] for b in range(B)), axis=-1)
    config = np.take_along_axis(config, order[:, :, None], axis=1)
    logpost = np.take_along_axis(logpost, order, axis=1)
    repeat = np.zeros((m, E), dtype=bool)
    repeat[:, 1:] = (config[:, 1:] == config[:, :-1]).all(-1)
    logpost = np.where(repeat, -np.inf, logpost)
    clicks = (config[..., None] >> np.arange(k)) & 1 == 1                                # (m, E, B, k)
    with np.errstate(invalid="ignore"):
        on = logsumexp(np.where(clicks, logpost[:, :, None, None], -np.inf), axis=1)
        off = logsumexp(np.where(clicks, -np.inf, logpost[:, :, None, None]), axis=1)
    odds = np.nan_to_num(on - off, nan=0.0, posinf=LOG_ODDS_BOUND, neginf=-LOG_ODDS_BOUND)
    return np.clip(odds, -LOG_ODDS_BOUND, LOG_ODDS_BOUND)


def _score_many(ranker: Any, params: np.ndarray, X: np.ndarray) -> np.ndarray:
    """Scores (m, C, D) of each message's rows X (m, D, F) under C models each (m, C, P)."""
    X = X.astype(np.float64)
    if ranker.name == "linear":
        return np.einsum("mcf,mdf->mcd", params, X)
    W, b, v = ranker.unpack(params)                                           # (m, C, H, F), (m, C, H)
    z = np.einsum("mchf,mdf->mcdh", W, X) + b[:, :, None, :]
    return np.einsum("mcdh,mch->mcd", np.maximum(z, 0.0), v)


def _vjp_many(ranker: Any, params: np.ndarray, X: np.ndarray, coef: np.ndarray) -> np.ndarray:
    """``sum_docs coef * df/dparams`` (m, C, P) for models (m, C, P), rows X (m, k, F), coef (m, C, k)."""
    X = X.astype(np.float64)
    if ranker.name == "linear":
        return coef @ X
    W, b, v = ranker.unpack(params)
    z = np.einsum("mchf,mkf->mckh", W, X) + b[:, :, None, :]
    gz = coef[..., None] * (z > 0) * v[:, :, None, :]                       # (m, C, k, H)
    dW = np.einsum("mckh,mkf->mchf", gz, X)
    m, C = coef.shape[:2]
    return np.concatenate([dW.reshape(m, C, -1), gz.sum(2), np.einsum("mck,mckh->mch", coef, np.maximum(z, 0.0))],
                          axis=-1)
