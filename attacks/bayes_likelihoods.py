"""The Bayes attacks' likelihood ``log p(observed update | candidate)``, per
``NoiseModel.kind``; the replayed update is first clipped exactly as the client clips
(``NoiseModel.clips`` in order):

* ``none``: an exact-match test, written as a Gaussian of standard deviation
  ``EXACT_RTOL * ||observed update||`` (floating-point replay error is ~1e-15 relative);
* ``laplace`` / ``gaussian``: their densities per coordinate;
* ``gamma-difference``: one client's share of ``dp-distributed`` (Gamma(1/n, lambda) minus
  Gamma(1/n, lambda)). Its exact density is a Bessel-K (symmetric variance-gamma) density,
  ``|x|^(a-1/2) K_(a-1/2)(|x|/lambda)`` with a = 1/n. We use the approximation
  ``log f(x) ~ (2a - 1) log|x| - |x| / lambda`` (exact exponent at x -> 0, exponential tail
  at large |x|, off by ``a log|x|`` in between), with |x| floored at ``GAMMA_FLOOR`` times
  the message's largest weight (shares underflow to exactly 0; replay error is ~1e-16).

(``rr``, randomized FOLtR-ES metric values, is a transition table: ``Bayes._guess_metric``.)
For one shown list, L2 clipping and Gaussian or no noise, the likelihood of every candidate
is evaluated in the k-dimensional coefficient space (``_gram_loglik``), in parameter space
otherwise.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from attacks.bayes_geometry import candidate_coefficients
from attacks.bayes_noise import ClipStep, NoiseModel

EXACT_RTOL = 1e-10
"""Standard deviation of the exact-match test relative to the observed update's norm."""
GAMMA_FLOOR = 1e-12
"""Floor of |residual| in the Gamma-difference log-density, relative to the largest |weight|."""
CHUNK_ELEMENTS = 1 << 22
"""Candidate-by-parameter elements materialized at once on the parameter-space path."""


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


def gaussian_std(noise: NoiseModel, observed: np.ndarray) -> np.ndarray:
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
            std = gaussian_std(noise, observed[part])[:, None]
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
    std = gaussian_std(noise, observed)[:, None]
    return -np.maximum(rr, 0.0) / (2 * std * std)



def loglik_full(noise: NoiseModel, g: np.ndarray, u: np.ndarray, observed: np.ndarray, cohort: int) -> np.ndarray:
    """Log-likelihood (m, C) of observed updates (m, P) given raw candidate updates (m, C, P)."""
    if noise.clips:
        u = _clip_full(noise.clips, g, u)
    r = observed[:, None, :] - u
    if noise.kind in ("none", "gaussian"):
        std = gaussian_std(noise, observed)[:, None]
        return -(r * r).sum(-1) / (2 * std * std)
    floor = GAMMA_FLOOR * np.maximum(np.abs(observed + g).max(-1), 1e-300)[:, None, None]
    return _coordinate_loglik(noise, r, cohort, floor)


def partial_fit_loglik(noise: NoiseModel, view: Any, messages: np.ndarray, b: int, early: np.ndarray,
                       observed: np.ndarray, cohort: int) -> np.ndarray:
    """Gaussian log-fit (m, E) of partial configurations of lists 0..b, raw updates ``early``
    (m, E, P): the residual ``observed - early`` projected off the span of the later lists'
    shown documents' score gradients at the global model and of the global model itself.
    For the linear ranker every later PDGD step lies in that span whatever the clicks, so the
    true partial configuration leaves only the projected noise; the clipping scale is a free
    factor (fitted by least squares) when the client clips. The noise std is the noise
    model's (Laplace and Gamma differences of a cohort of ``cohort`` by their std, exact match by
    its width)."""
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
    if noise.clips:
        zz = (Z * Z).sum(-1)
        scale = np.where(zz > 0, np.einsum("mep,mp->me", Z, y) / np.where(zz > 0, zz, 1.0), 1.0)
        Z = Z * scale[..., None]
    r = y[:, None, :] - Z
    std = {"laplace": np.sqrt(2.0), "gamma-difference": np.sqrt(2.0 / cohort)}.get(noise.kind)
    sigma = noise.scale * std if std is not None else gaussian_std(noise, observed)
    sigma = np.broadcast_to(sigma, (len(observed),))[:, None]
    return -(r * r).sum(-1) / (2 * sigma * sigma)
