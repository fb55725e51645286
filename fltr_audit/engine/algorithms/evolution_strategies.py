"""The arithmetic of FOLtR-ES's evolution strategies (Kharitonov 2019, §3): the perturbation a
seed names (client and server alike), the ES gradient estimate (Eq. 4-6), and the published
client's flawed seeding with the cascade clicks it draws from it."""

from __future__ import annotations

import numpy as np
from scipy.special import ndtri

from fltr_audit.engine.kernels.foltr_es import perturbation_uniforms
from fltr_audit.engine.threads import row_parts, thread_map


def perturbations(seeds: np.ndarray, n_params: int) -> np.ndarray:
    """The standard normal perturbation ``v_s`` of each seed, shape (n, n_params) float64.

    A counter-based generator keyed by the seed alone: coordinate ``j`` of ``v_s`` is the
    inverse normal CDF of the top 53 bits of ``splitmix64(splitmix64(s) + (j + 1) * golden)``
    (the SplitMix64 sequence started at the mixed seed). Client and server call this same
    function, so the server regenerates exactly the client's ``v_s`` from the seed, and the
    whole cohort's matrix comes out of one compiled pass and one ``ndtri`` (in parts of the
    cohort on the thread pool; each value depends on its seed and coordinate only) -- far
    faster than building 2,000 seeded ``numpy`` Generators per round.
    """
    seeds = np.ascontiguousarray(seeds, dtype=np.uint64)
    out = np.empty((len(seeds), int(n_params)))

    def fill(part: slice) -> None:
        perturbation_uniforms(seeds[part], out[part])     # compiled: kernels.foltr_es
        ndtri(out[part], out=out[part])

    thread_map(fill, row_parts(len(seeds)), rows=out.size)
    return out


def flawed_client_draws(seeds: np.ndarray, n_queries: int, B: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """What a flawed-seeding client draws from ``Generator(PCG64(seed))``.

    The published client reseeds its generator with the seed it sends; ours mimics that by
    drawing, per client, its ``B`` queries (uniform over the split) and then the click
    uniforms ``(B, k, 2)`` (examination-click and stop draws of the cascade) from a
    generator seeded with that seed. One generator per client: a loop over the cohort,
    inherent to per-seed generators (this mode exists to show the leak, not for speed).

    Returns
    -------
    queries : ndarray of int64, shape (n, B)
    uniforms : ndarray of float64, shape (n, B, k, 2)
    """
    seeds = np.asarray(seeds, dtype=np.uint64)
    queries = np.empty((len(seeds), B), dtype=np.int64)
    uniforms = np.empty((len(seeds), B, k, 2))
    for c, s in enumerate(seeds):
        gen = np.random.Generator(np.random.PCG64(int(s)))
        queries[c] = gen.integers(0, n_queries, size=B)
        uniforms[c] = gen.random((B, k, 2))
    return queries, uniforms


def cascade_clicks(labels_shown: np.ndarray, click_model, uniforms: np.ndarray) -> np.ndarray:
    """Cascade (CCM) clicks from given uniforms: the flawed client's and its replay's clicks.

    Examine top-down; position ``i`` is clicked when examined and ``u[i, 0] < P(c | r_i)``;
    after a click the user stops when ``u[i, 1] < P(s | r_i)`` (FOLtR-ES §5, Table 1).
    ``labels_shown`` is int (..., k) with -1 on empty slots; ``uniforms`` is (..., k, 2).
    """
    labels_shown = np.asarray(labels_shown)
    empty = labels_shown < 0
    lab = np.where(empty, 0, labels_shown)
    p_click = np.where(empty, 0.0, np.asarray(click_model.click_prob)[lab])
    p_stop = np.asarray(click_model.stop_prob)[lab]
    clicks = np.zeros(labels_shown.shape, dtype=bool)
    examined = np.ones(labels_shown.shape[:-1], dtype=bool)
    for i in range(labels_shown.shape[-1]):
        click = examined & (uniforms[..., i, 0] < p_click[..., i])
        clicks[..., i] = click
        examined &= ~(click & (uniforms[..., i, 1] < p_stop[..., i]))
    return clicks


def es_gradient(V: np.ndarray, metric: np.ndarray, sigma: float, antithetic: bool) -> np.ndarray:
    """The ES gradient estimate of FOLtR-ES Eq. 4-6 from the cohort's perturbations and metrics.

    Without antithetic variates ``g = mean_c f_c v_c / sigma`` with ``f_c`` the mean metric of
    client c's B interactions; with them ``g = mean_c (f+_c - f-_c) / 2 * v_c / sigma`` with
    ``f+`` / ``f-`` the means over the first / last B/2 interactions (for odd B the first
    ``ceil(B/2)``: each side's mean stays unbiased). A message of a single interaction (B = 1,
    the setting of the paper's privacy analysis and of the probe protocol) has no second side
    and uses the plain estimate.

    Parameters
    ----------
    V : ndarray, shape (n, P)
        The clients' perturbations ``v_s``.
    metric : ndarray, shape (n, B)
        Per-interaction metric values (possibly privatized).
    """
    w = es_weights(metric, antithetic)
    return (w @ V) / (len(w) * sigma)


def es_weights(metric: np.ndarray, antithetic: bool) -> np.ndarray:
    """Each client's weight ``f_c`` (or ``(f+_c - f-_c) / 2``) of its perturbation in ``es_gradient``, (n,)."""
    metric = np.asarray(metric, dtype=np.float64)
    if antithetic and metric.shape[1] > 1:
        half = (metric.shape[1] + 1) // 2
        return (metric[:, :half].mean(axis=1) - metric[:, half:].mean(axis=1)) / 2.0
    return metric.mean(axis=1)
