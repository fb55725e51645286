"""Rankers that score documents under per-client parameter batches (DESIGN.md, Ranker).

Parameters are flat float64 vectors. ``params`` is either (P,) -- one model -- or (n, P) --
one model per client. ``X`` holds feature rows (float32): with (P,) params any shape
(..., F); with (n, P) params shape (n, ..., F), the leading axis matching the clients.
Scores and gradients are float64 (features are cast block-wise, never the whole matrix),
except ``score_float32`` and ``score_blocks``, the hot path of FPDGD's ranking and of offline
evaluation: the linear ranker's are float32 features times the weights rounded to float32,
summed in float32 (``docs/commands/bench.md``, "Numerics"); the MLP's are ``score``'s.

Two models, as in FOLtR-ES (Section 6, "Models"):

* ``LinearRanker``: ``f(x) = w . x`` without bias, ``P = F``.
* ``MLPRanker``: ``f(x) = v . relu(W x + b)`` with ``H = 10`` hidden ReLU units.
  Flat layout: ``[W (H*F, row-major: W[h, f] at h*F + f), b (H), v (H)]``,
  ``P = H*F + 2H``. The output layer has no bias: a constant shift of every score changes
  no ranking, no Plackett-Luce probability and no PDGD gradient, so it would only be a dead
  coordinate. ReLU's derivative at 0 is taken as 0.
"""

from __future__ import annotations

import numpy as np

from fltr_audit.constraints import Interval, ParameterError, check
from fltr_audit.engine.kernels import kernel_array
from fltr_audit.engine.kernels.pdgd import linear_gradients
from fltr_audit.engine.kernels.ranking import block_scores

RANKERS = ("linear", "mlp")
_BLOCK = 4096  # rows cast to float64 at a time when scoring one model on many rows (stays in cache)
FLOAT32_MAX_SCORE = 1e30  # float32 scores beyond this (or not finite) are computed again in float64
EVAL_MODELS = 8  # models scored together by ``score_float32_models`` (one fixed-width BLAS product)
EVAL_BLOCK = 224  # rows per such product: 224 x 136 x 8 < 65536 x 4, OpenBLAS's smallest multithreaded sgemm


def _check(params: np.ndarray, X: np.ndarray, n_params: int, n_features: int) -> bool:
    """Validate shapes; return True when ``params`` is a per-client batch."""
    if params.shape[-1] != n_params or params.ndim not in (1, 2):
        raise ValueError(f"params must have shape (P,) or (n, P) with P = {n_params}, got {params.shape}")
    if X.shape[-1] != n_features:
        raise ValueError(f"features must end in {n_features} columns, got shape {X.shape}")
    if params.ndim == 2 and (X.ndim < 2 or X.shape[0] != params.shape[0]):
        raise ValueError(f"with (n, P) params, X needs shape (n, ..., F); got {X.shape} for n = {params.shape[0]}")
    return params.ndim == 2


def _check_blocks(params: np.ndarray, X: np.ndarray, starts: np.ndarray, counts: np.ndarray, n_params: int,
                  n_features: int, out: np.ndarray | None) -> tuple[list[int], list[int]]:
    """Validate ``score_blocks`` arguments; return starts and counts as Python ints."""
    if params.ndim != 2 or params.shape[1] != n_params:
        raise ValueError(f"params must have shape (n, P) with P = {n_params}, got {params.shape}")
    if X.ndim != 2 or X.shape[1] != n_features:
        raise ValueError(f"features must have shape (rows, {n_features}), got {X.shape}")
    starts, counts = np.asarray(starts, dtype=np.int64), np.asarray(counts, dtype=np.int64)
    if starts.shape != (len(params),) or counts.shape != (len(params),):
        raise ValueError(f"starts and counts need shape ({len(params)},), got {starts.shape} and {counts.shape}")
    if len(params) and (counts.min() < 0 or starts.min() < 0 or (starts + counts).max() > X.shape[0]):
        raise ValueError("blocks must lie inside the rows of X")
    if out is not None and (out.dtype != np.float64 or out.ndim != 2 or not out.flags.c_contiguous
                            or out.shape[0] != len(params) or out.shape[1] < counts.max(initial=0)):
        raise ValueError(f"out must be C-contiguous float64 of shape ({len(params)}, >= {counts.max(initial=0)}), "
                         f"got {out.dtype} {out.shape}")
    return starts.tolist(), counts.tolist()


def _rows(X: np.ndarray, batched: bool) -> np.ndarray:
    """X as (n, m, F) when batched, else (m, F)."""
    F = X.shape[-1]
    return X.reshape(X.shape[0], -1, F) if batched else X.reshape(-1, F)


def _out_of_float32_range(scores: np.ndarray) -> np.ndarray | None:
    """Positions of float32 scores that are not finite or beyond ``FLOAT32_MAX_SCORE``; None if none."""
    if len(scores) and np.isfinite(scores).all() and np.abs(scores).max() <= FLOAT32_MAX_SCORE:
        return None
    bad = np.flatnonzero(~(np.abs(scores) <= FLOAT32_MAX_SCORE))
    return bad if len(bad) else None


def blas_ready(R: np.ndarray) -> bool:
    """Whether BLAS reads the rows ``R`` in place: float32, aligned and C-contiguous (numpy's
    non-BLAS loop, taken otherwise, rounds differently)."""
    return R.dtype == np.float32 and R.flags.aligned and R.flags.c_contiguous


def float32_rows(R: np.ndarray) -> np.ndarray:
    """``R`` itself when ``blas_ready``, else an aligned float32 copy, so a product's bits never
    depend on the rows' address or dtype."""
    return R if blas_ready(R) else np.array(R, dtype=np.float32, order="C")


def _float32_scores(R: np.ndarray, models: np.ndarray) -> np.ndarray:
    """``models @ R.T`` (r, m) for float32 rows ``R`` (m, F) and models (r, F): float32 products
    summed in float32 by one BLAS ``sgemm`` per ``EVAL_BLOCK`` rows and ``EVAL_MODELS`` models.

    The product always has ``EVAL_MODELS`` columns (unused ones zero) and so few rows that
    OpenBLAS never splits it across threads: a model's scores then do not depend on the other
    models scored with it, its column, the BLAS threads or the rows' address; a row's may
    depend on its place in the ``EVAL_BLOCK``-row grid of ``R`` (sgemm rounds the last rows of
    a block apart), which is fixed for a given split.
    ``docs/commands/bench.md`` ("Numerics") gives the agreement with float64. Rows whose
    float32 score is not finite or beyond ``FLOAT32_MAX_SCORE`` (a huge model) are scored
    in float64 instead.
    """
    r, m = len(models), R.shape[0]
    out = np.empty((r, m))
    product = np.empty((m, EVAL_MODELS), dtype=np.float32)
    for g in range(0, r, EVAL_MODELS):
        part = models[g:g + EVAL_MODELS]
        W = np.zeros((R.shape[1], EVAL_MODELS), dtype=np.float32)
        W[:, :len(part)] = part.T
        for s in range(0, m, EVAL_BLOCK):
            np.matmul(float32_rows(R[s:s + EVAL_BLOCK]), W, out=product[s:s + EVAL_BLOCK])
        for j, w in enumerate(part):
            out[g + j] = product[:, j]
            bad = _out_of_float32_range(product[:, j])
            if bad is not None:
                out[g + j, bad] = np.einsum("ij,j->i", R[bad].astype(np.float64), w)
    return out


class LinearRanker:
    """Linear scoring ``f(x) = w . x`` without bias (FOLtR-ES, FPDGD, FedIPS Eq. 12)."""

    name = "linear"
    linear = True  # scores are w . x: df/dw = x whatever w (a vjp needs no model), and the
    # compiled dot-product kernels of FOLtR-ES apply

    def __init__(self, n_features: int):
        check("n_features", n_features, (Interval(int, 1, None),))
        self.n_features = int(n_features)
        self.n_params = self.n_features

    def init_params(self, rng: np.random.Generator | None = None) -> np.ndarray:
        """Zeros (FOLtR-ES and PDGD both start the linear model at zero); ``rng`` is unused."""
        return np.zeros(self.n_params)

    def score(self, params: np.ndarray, X: np.ndarray) -> np.ndarray:
        """Scores of every row of ``X``, shape ``X.shape[:-1]``."""
        params = np.asarray(params, dtype=np.float64)
        batched = _check(params, X, self.n_params, self.n_features)
        R = _rows(X, batched)
        if batched:
            out = np.matmul(R.astype(np.float64), params[:, :, None])[..., 0]
        else:
            out = np.empty(R.shape[0])
            for s in range(0, R.shape[0], _BLOCK):
                out[s:s + _BLOCK] = R[s:s + _BLOCK].astype(np.float64) @ params
        return out.reshape(X.shape[:-1])

    def score_float32(self, params: np.ndarray, X: np.ndarray) -> np.ndarray:
        """Scores of the rows of ``X`` (m, F) under one model (P,), the fast path of offline
        evaluation: ``score_float32_models`` of that one model (the same bits)."""
        params = np.asarray(params, dtype=np.float64)
        if params.ndim != 1:
            raise ValueError(f"score_float32 takes one model (P,); got {params.shape}")
        return self.score_float32_models(params[None], X)[0]

    def score_float32_models(self, models: np.ndarray, X: np.ndarray) -> np.ndarray:
        """Scores (r, m) of the rows of ``X`` (m, F) under each of the models (r, P): float32
        products summed in float32, ``EVAL_MODELS`` models per pass over ``X`` (offline
        evaluation of several rounds reads the split once).

        A model's scores do not depend on the other models, the BLAS threads or the address of
        ``X`` (``_float32_scores``); they agree with ``score`` to about 1e-6 relative
        (``docs/commands/bench.md``, "Numerics").
        """
        models = np.asarray(models, dtype=np.float64)
        if models.ndim != 2 or models.shape[1] != self.n_params or X.ndim != 2 or X.shape[1] != self.n_features:
            raise ValueError(f"score_float32_models takes models (r, {self.n_params}) and rows (m, {self.n_features}); "
                             f"got {models.shape} and {X.shape}")
        return _float32_scores(X, models)

    def score_blocks(self, params: np.ndarray, X: np.ndarray, starts: np.ndarray, counts: np.ndarray,
                     out: np.ndarray | None = None) -> np.ndarray:
        """Scores of contiguous row blocks, block i = ``X[starts[i]:starts[i] + counts[i]]`` under ``params[i]``.

        The fast path of FPDGD's ranking (``bench fpdgd``) and of the Bayes attack's replay: a
        compiled loop (``kernels.ranking.block_scores``) takes each row's float32 dot product with
        ``float32(params[i])``, summed in float32. A row's score depends on the row and its model
        only -- not on its place in the block, the other blocks, the threads or the address of
        ``X``; it agrees with ``score`` to about 1e-6 relative (``docs/commands/bench.md``,
        "Numerics"). Not-finite or huge float32 scores are computed again in float64.

        Returns
        -------
        ndarray (sum(counts),), the blocks' scores one after the other; or, with ``out`` of
        shape (n, width >= max(counts)), ``out`` with block i's scores in ``out[i, :counts[i]]``.
        """
        params = kernel_array(params, np.float64)
        _check_blocks(params, X, starts, counts, self.n_params, self.n_features, out)
        starts, counts = np.asarray(starts, dtype=np.int64), np.asarray(counts, dtype=np.int64)
        if not blas_ready(X):  # only the blocks' rows, as one aligned float32 array
            first = np.cumsum(counts) - counts
            X = np.array(X[np.repeat(starts - first, counts) + np.arange(counts.sum())], dtype=np.float32)
            starts = first
        scores = out if out is not None else np.empty((len(counts), counts.max(initial=0)))
        block_scores(X, starts, counts, params.astype(np.float32), params, FLOAT32_MAX_SCORE, scores)
        if out is not None:
            return out
        return scores[np.arange(scores.shape[1])[None, :] < counts[:, None]]

    def vjp(self, params: np.ndarray, X: np.ndarray, coef: np.ndarray) -> np.ndarray:
        """``sum_docs coef * df/dparams``: (P,) or (n, P)."""
        params = np.asarray(params, dtype=np.float64)
        batched = _check(params, X, self.n_params, self.n_features)
        R = _rows(X, batched).astype(np.float64)
        c = np.asarray(coef, dtype=np.float64).reshape(R.shape[:-1])
        return np.einsum("nm,nmf->nf", c, R) if batched else c @ R

    def vjp_rows(self, params: np.ndarray, X: np.ndarray, rows: np.ndarray, coef: np.ndarray) -> np.ndarray:
        """``vjp`` of list i over the rows ``X[rows[i]]`` (n, k), (n, P): a compiled loop that reads
        only the rows whose coefficient is nonzero (``kernels.pdgd.linear_gradients``)."""
        rows = kernel_array(rows, np.int64)
        out = np.empty((rows.shape[0], self.n_params))
        linear_gradients(X, rows, kernel_array(coef, np.float64), out)
        return out

    def scaled_output(self, params: np.ndarray, factor: float) -> np.ndarray:
        """The model whose scores are ``factor`` times those of ``params`` (the same rankings): ``factor w``."""
        return np.array(params, dtype=np.float64) * factor

    def grad(self, params: np.ndarray, X: np.ndarray) -> np.ndarray:
        """Per-document gradient ``df/dparams = x``, shape ``X.shape[:-1] + (P,)``."""
        params = np.asarray(params, dtype=np.float64)
        _check(params, X, self.n_params, self.n_features)
        return np.asarray(X, dtype=np.float64).copy()


class MLPRanker:
    """One hidden layer of ReLU units, ``f(x) = v . relu(W x + b)`` (FOLtR-ES, Section 6).

    See the module docstring for the flat parameter layout.
    """

    name = "mlp"
    linear = False  # see ``LinearRanker.linear``

    def __init__(self, n_features: int, hidden: int = 10):
        check("n_features", n_features, (Interval(int, 1, None),))
        check("hidden", hidden, (Interval(int, 1, None),))
        self.n_features = int(n_features)
        self.hidden = int(hidden)
        self.n_params = self.hidden * self.n_features + 2 * self.hidden

    def init_params(self, rng: np.random.Generator | None = None) -> np.ndarray:
        """Initial parameters.

        Without ``rng``: all zeros, as FOLtR-ES (Section 6: "All parameters of the models are
        initialized with zeros"; ES perturbations break the symmetry). With ``rng`` (for
        gradient-based training such as PDGD, where an all-zero MLP has zero gradient):
        ``W, b ~ U(-1/sqrt(F), 1/sqrt(F))`` and ``v ~ U(-1/sqrt(H), 1/sqrt(H))``, the usual
        fan-in uniform initialization.
        """
        if rng is None:
            return np.zeros(self.n_params)
        H, F = self.hidden, self.n_features
        a, c = 1.0 / np.sqrt(F), 1.0 / np.sqrt(H)
        return np.concatenate([rng.uniform(-a, a, H * F), rng.uniform(-a, a, H), rng.uniform(-c, c, H)])

    def unpack(self, params: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Views ``W (..., H, F)``, ``b (..., H)``, ``v (..., H)`` of flat ``params (..., P)``."""
        H, F = self.hidden, self.n_features
        lead = params.shape[:-1]
        W = params[..., : H * F].reshape(lead + (H, F))
        return W, params[..., H * F: H * F + H], params[..., H * F + H:]

    def _hidden(self, params: np.ndarray, R: np.ndarray, batched: bool) -> np.ndarray:
        """Pre-activations ``W x + b``: (n, m, H) or (m, H)."""
        W, b, _ = self.unpack(params)
        if batched:
            return np.matmul(R.astype(np.float64), np.swapaxes(W, 1, 2)) + b[:, None, :]
        out = np.empty((R.shape[0], self.hidden))
        for s in range(0, R.shape[0], _BLOCK):
            out[s:s + _BLOCK] = R[s:s + _BLOCK].astype(np.float64) @ W.T
        return out + b

    def score(self, params: np.ndarray, X: np.ndarray) -> np.ndarray:
        """Scores of every row of ``X``, shape ``X.shape[:-1]``."""
        params = np.asarray(params, dtype=np.float64)
        batched = _check(params, X, self.n_params, self.n_features)
        z = self._hidden(params, _rows(X, batched), batched)
        v = self.unpack(params)[2]
        out = np.matmul(np.maximum(z, 0.0), v[:, :, None])[..., 0] if batched else np.maximum(z, 0.0) @ v
        return out.reshape(X.shape[:-1])

    def score_float32(self, params: np.ndarray, X: np.ndarray) -> np.ndarray:
        """``score``: the MLP has no float32 path (its hidden layer is not the cost of a round)."""
        return self.score(params, X)

    def score_float32_models(self, models: np.ndarray, X: np.ndarray) -> np.ndarray:
        """``score`` of each model (r, P) on the rows of ``X`` (m, F), shape (r, m)."""
        models = np.asarray(models, dtype=np.float64)
        return np.stack([self.score(p, X) for p in models]) if len(models) else np.empty((0, len(X)))

    def score_blocks(self, params: np.ndarray, X: np.ndarray, starts: np.ndarray, counts: np.ndarray,
                     out: np.ndarray | None = None) -> np.ndarray:
        """Scores of contiguous row blocks, block i = ``X[starts[i]:starts[i] + counts[i]]`` under ``params[i]``.

        Returns
        -------
        As ``LinearRanker.score_blocks`` (``score`` per block, float64).
        """
        params = np.asarray(params, dtype=np.float64)
        starts, counts = _check_blocks(params, X, starts, counts, self.n_params, self.n_features, out)
        flat = np.empty(sum(counts)) if out is None else None
        o = 0
        for i, (p, s, m) in enumerate(zip(params, starts, counts)):
            if out is None:
                flat[o:o + m] = self.score(p, X[s:s + m])
            else:
                out[i, :m] = self.score(p, X[s:s + m])
            o += m
        return flat if out is None else out

    def vjp(self, params: np.ndarray, X: np.ndarray, coef: np.ndarray) -> np.ndarray:
        """``sum_docs coef * df/dparams``: (P,) or (n, P), layout ``[W, b, v]``."""
        params = np.asarray(params, dtype=np.float64)
        batched = _check(params, X, self.n_params, self.n_features)
        R = _rows(X, batched)
        z = self._hidden(params, R, batched)
        v = self.unpack(params)[2]
        c = np.asarray(coef, dtype=np.float64).reshape(z.shape[:-1])
        h = np.maximum(z, 0.0)
        if batched:
            g = c[..., None] * (z > 0) * v[:, None, :]                    # (n, m, H)
            dW = np.matmul(np.swapaxes(g, 1, 2), R.astype(np.float64))    # (n, H, F)
            return np.concatenate([dW.reshape(len(params), -1), g.sum(1), np.einsum("nm,nmh->nh", c, h)], axis=1)
        g = c[:, None] * (z > 0) * v
        dW = g.T @ R.astype(np.float64)
        return np.concatenate([dW.ravel(), g.sum(0), c @ h])

    def vjp_rows(self, params: np.ndarray, X: np.ndarray, rows: np.ndarray, coef: np.ndarray) -> np.ndarray:
        """``vjp`` of list i over the rows ``X[rows[i]]`` (n, k), (n, P)."""
        return self.vjp(params, np.take(X, rows, axis=0), coef)

    def scaled_output(self, params: np.ndarray, factor: float) -> np.ndarray:
        """The model whose scores are ``factor`` times those of ``params`` (the same rankings): the
        output layer v scaled (ReLU is positively homogeneous, so only v need move)."""
        out = np.array(params, dtype=np.float64)
        _, _, v = self.unpack(out)
        v *= factor
        return out

    def grad(self, params: np.ndarray, X: np.ndarray) -> np.ndarray:
        """Per-document gradient, shape ``X.shape[:-1] + (P,)``, layout ``[W, b, v]``."""
        params = np.asarray(params, dtype=np.float64)
        batched = _check(params, X, self.n_params, self.n_features)
        R = _rows(X, batched)
        z = self._hidden(params, R, batched)
        v = self.unpack(params)[2]
        g = (z > 0) * (v[:, None, :] if batched else v)                   # (..., m, H)
        dW = g[..., :, None] * R.astype(np.float64)[..., None, :]          # (..., m, H, F)
        out = np.concatenate([dW.reshape(g.shape[:-1] + (-1,)), g, np.maximum(z, 0.0)], axis=-1)
        return out.reshape(X.shape[:-1] + (self.n_params,))


def make_ranker(name: str, n_features: int) -> LinearRanker | MLPRanker:
    """The ranker called ``name`` ("linear" or "mlp") over ``n_features`` features."""
    if name == "linear":
        return LinearRanker(n_features)
    if name == "mlp":
        return MLPRanker(n_features)
    raise ParameterError("ranker", f"unknown ranker {name!r} (choose from {', '.join(RANKERS)})")
