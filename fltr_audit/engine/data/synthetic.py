"""Synthetic learning-to-rank data shaped like the public sets, with learnable labels.

Each profile matches its real set in the number of features, the number of relevance
levels, the distribution of documents per query (a log-normal clipped to the real minimum
and maximum; median and mean near the real ones) and the label skew (the share of each
level). The numbers come from the data sets' documentation and the papers in
``shared/papers``; MQ2008's were measured on the distributed folds (median 8, mean 19.4,
5..121 documents, 80.7 / 13.2 / 6.1 % labels, 28 % of queries without a relevant document).

The hidden model: each document has ``k`` latent factors ``z``; its features are noisy
linear mixtures of ``z`` (so features are correlated, as BM25 variants are), and its
relevance score is ``z @ u + noise`` plus a per-query offset (some queries have no relevant
document at all). Labels are the score cut at the quantiles that give the profile's label
shares. A linear ranker on the features can therefore learn to rank. ``mq2007``, ``mq2008``
and ``yahoo`` features are scaled to [0, 1] within each query (as the distributed
"QueryLevelNorm" files are); ``mslr10k`` and ``istella`` features are positive and
heavy-tailed like raw counts and scores. Features are rounded to 6 decimals, so the LETOR
text written by :func:`fltr_audit.engine.data.letor_write.format_letor` reads back bit-identically.

Splits follow the LETOR layout: the queries are cut into five parts S1..S5 in order and
fold ``k`` trains on S_k, S_k+1, S_k+2, validates on S_k+3 and tests on S_k+4 (mod 5),
i.e. 60 / 20 / 20 % of the queries.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fltr_audit.engine.data.blocks import BLOCK_ROWS, query_blocks
from fltr_audit.engine.data.dataset import Dataset, Splits
from fltr_audit.constraints import Interval, ParameterError, check
from fltr_audit.engine.data.normalize import minmax_rows
from fltr_audit.errors import FltrError
from fltr_audit.engine.randomness import stream


@dataclass(frozen=True)
class Profile:
    """The shape of one public data set."""

    n_features: int
    label_shares: tuple[float, ...]  # share of documents at each relevance level
    docs_min: int
    docs_median: float
    docs_mean: float  # of the log-normal before clipping (MQ2008: 22 so that the clipped mean is ~19)
    docs_max: int
    default_queries: int  # small enough for a 2-minute demo
    query_spread: float  # std of the per-query relevance offset (queries with no relevant doc)
    unit_scale: bool  # features scaled to [0, 1] per query, else positive raw values

    @property
    def n_levels(self) -> int:
        return len(self.label_shares)


PROFILES: dict[str, Profile] = {
    # MQ2007: 1,692 queries, 69,623 docs (41 per query, 6..147), 46 features, 3 levels.
    "mq2007": Profile(46, (0.74, 0.20, 0.06), 6, 40, 41.1, 147, 1692, 1.0, True),
    # MQ2008: 784 queries, 15,211 docs (19.4 per query, 5..121), 46 features, 3 levels.
    "mq2008": Profile(46, (0.807, 0.132, 0.061), 5, 8, 22.0, 121, 784, 0.8, True),
    # MSLR-WEB10K: 10,000 queries, 1,200,192 docs (120 per query, 1..908), 136 features,
    # labels 52.0 / 32.5 / 13.4 / 1.7 / 0.7 %. Default 2,000 queries (the demo's budget).
    "mslr10k": Profile(136, (0.520, 0.325, 0.134, 0.014, 0.007), 1, 110, 120, 908, 2000, 0.8, False),
    # Yahoo! LTR set 1: 29,921 queries, 709,877 docs (23.7 per query, 1..139), 700 feature
    # ids, labels about 26 / 36 / 28 / 8 / 2 %.
    "yahoo": Profile(700, (0.26, 0.36, 0.28, 0.08, 0.02), 1, 19, 23.7, 139, 1000, 0.5, True),
    # Istella-S: 33,018 queries, 3,408,630 docs (103 per query), 220 features, labels
    # strongly skewed to 0 (about 89 / 3.5 / 4.5 / 2 / 1 %).
    "istella": Profile(220, (0.89, 0.035, 0.045, 0.02, 0.01), 3, 100, 103.2, 250, 500, 1.0, False),
}

GENERATOR_VERSION = "2"
"""Changes when the same name, size and seed give other data (2: factor sums without BLAS)."""
_LATENT = 8  # latent factors behind the features and the relevance
MAX_FEATURE_CELLS = 2**29
"""Largest synthetic feature matrix (documents x features, float32: 2 GiB); bounds ``queries``."""


def max_queries(name: str) -> int:
    """The most queries profile ``name`` generates within :data:`MAX_FEATURE_CELLS` (at its mean
    documents per query)."""
    p = profile(name)
    return int(MAX_FEATURE_CELLS / (p.docs_mean * p.n_features))


def profile(name: str) -> Profile:
    """The profile called ``name``; FltrError naming the choices otherwise."""
    if name not in PROFILES:
        raise FltrError(f"unknown synthetic profile {name!r} (choose {', '.join(PROFILES)})")
    return PROFILES[name]


def docs_per_query(p: Profile, n_queries: int, rng: np.random.Generator) -> np.ndarray:
    """Clipped log-normal document counts with the profile's median and (unclipped) mean."""
    sigma = np.sqrt(2.0 * np.log(max(p.docs_mean / p.docs_median, 1.0)))
    counts = np.rint(p.docs_median * np.exp(sigma * rng.standard_normal(n_queries)))
    return np.clip(counts, p.docs_min, p.docs_max).astype(np.int64)


def generate(name: str, queries: int | None = None, seed: int = 0) -> Dataset:
    """Generate the whole synthetic data set of profile ``name`` (all five parts).

    Parameters
    ----------
    name : str
        One of :data:`PROFILES`.
    queries : int, optional
        Number of queries (default: the profile's ``default_queries``); at least 5.
    seed : int
        Same seed, same data (bit for bit).
    """
    p = profile(name)
    n_q = p.default_queries if queries is None else int(queries)
    check("queries", n_q, (Interval(int, 5, None),), "five folds need five queries")
    largest = max_queries(name)
    if n_q > largest:
        raise ParameterError("queries", f"synthetic:{name} takes at most {largest:,} queries "
                                        f"(about {MAX_FEATURE_CELLS * 4 / 2**30:.0f} GiB of features), got {n_q:,}")
    shape_rng = stream(seed, f"synthetic-model:{name}")
    rng = stream(seed, f"synthetic-data:{name}")
    d = p.n_features
    loadings = shape_rng.standard_normal((_LATENT, d)).astype(np.float32)
    loadings *= (shape_rng.random(d) < 0.7).astype(np.float32)  # some features are pure noise
    u = shape_rng.standard_normal(_LATENT)
    scale = None if p.unit_scale else (0.3 + 0.4 * shape_rng.random(d)).astype(np.float32)

    counts = docs_per_query(p, n_q, rng)
    n = int(counts.sum())
    ptr = np.r_[0, np.cumsum(counts)].astype(np.int64)
    z = rng.standard_normal((n, _LATENT)).astype(np.float32)
    features = np.empty((n, d), dtype=np.float32)
    for q0, q1 in query_blocks(ptr, BLOCK_ROWS):
        _feature_block(features, z, loadings, scale, ptr[q0:q1 + 1], rng)
    score = latent_mix(z.astype(np.float64), u) + 0.8 * np.sqrt(_LATENT) * rng.standard_normal(n)
    score += np.repeat(p.query_spread * np.sqrt(_LATENT) * rng.standard_normal(n_q), counts)
    cuts = np.quantile(score, np.cumsum(p.label_shares)[:-1])
    labels = np.searchsorted(cuts, score).astype(np.int8)
    return Dataset(
        features=features,
        labels=labels,
        query_ptr=ptr,
        qids=np.arange(1, n_q + 1, dtype=np.int64),
        n_levels=p.n_levels,
        name=f"synthetic:{name}",
    )


def latent_mix(z: np.ndarray, loadings: np.ndarray) -> np.ndarray:
    """``z @ loadings`` summed factor by factor in a fixed order, ``sum_k z[:, k] * loadings[k]``:
    a BLAS product's rounding depends on its thread count and kernel, so the same seed would give
    other data under another executor; elementwise products and sums round the same everywhere."""
    out = np.multiply.outer(z[:, 0], loadings[0])
    term = np.empty_like(out)
    for k in range(1, z.shape[1]):
        np.multiply.outer(z[:, k], loadings[k], out=term)
        out += term
    return out


def _feature_block(features: np.ndarray, z: np.ndarray, loadings: np.ndarray, scale: np.ndarray | None,
                   ptr: np.ndarray, rng: np.random.Generator) -> None:
    """Fill the rows ``ptr[0]:ptr[-1]`` (whole queries) of ``features``: latent mixture plus noise,
    per-query min-max (``scale is None``) or ``exp(x * scale)``, rounded to 6 decimals. The noise
    is drawn block after block from one stream, so the data do not depend on the block size."""
    lo, hi = int(ptr[0]), int(ptr[-1])
    block = latent_mix(z[lo:hi], loadings)
    block += rng.standard_normal((hi - lo, loadings.shape[1]), dtype=np.float32)
    if scale is None:
        minmax_rows(block, ptr - lo, out=block)
    else:
        np.multiply(block, scale, out=block)
        np.exp(block, out=block)
    wide = block.astype(np.float64)
    wide *= 1e6
    np.rint(wide, out=wide)
    wide /= 1e6
    features[lo:hi] = wide


def fold_parts(n_queries: int) -> list[np.ndarray]:
    """The five consecutive query parts S1..S5 (sizes differ by at most one)."""
    return np.array_split(np.arange(n_queries), 5)


def fold_split(ds: Dataset, fold: int) -> Splits:
    """Fold ``fold`` (1..5) of ``ds`` in the LETOR rotation (60 / 20 / 20 % of queries)."""
    parts = fold_parts(ds.n_queries)
    k = fold - 1
    train = np.concatenate([parts[(k + i) % 5] for i in range(3)])
    return Splits(
        train=ds.subset(train),
        vali=ds.subset(parts[(k + 3) % 5]),
        test=ds.subset(parts[(k + 4) % 5]),
        fold=fold,
    )
