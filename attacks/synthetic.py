"""Synthetic intercepted rounds for ``bench attacks`` and tests: PDGD-shaped linear updates
(``synthetic_batch``) and real FPDGD probe steps on random documents (``pdgd_batch``).

Each client issues B queries of k documents with random features in [0, 1); clicks are
random; the update is one linear PDGD-shaped step per query (Pham §4.1): a positive weight on
every clicked document, a negative one on every examined unclicked document (above the last
click, or the one right below it), zero on the rest, plus optional Gaussian noise.
"""

from __future__ import annotations

import numpy as np

from fltr_audit.engine.algorithms.fpdgd import FPDGD, pdgd_cohort
from fltr_audit.engine.clicks import cascade_model
from fltr_audit.engine.data.dataset import Dataset
from fltr_audit.engine.messages import GroundTruth, Interactions, Messages, RoundBatch, ServerView
from fltr_audit.engine.rankers import LinearRanker


def pdgd_like_coefficients(clicks: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Weights of each shown document in a linear PDGD-shaped update, shape of ``clicks`` (..., k)."""
    k = clicks.shape[-1]
    pos = np.arange(k)
    last = np.where(clicks.any(-1), k - 1 - np.argmax(clicks[..., ::-1], axis=-1), -1)
    examined = pos <= (last[..., None] + 1)
    magnitude = rng.uniform(0.5, 1.5, clicks.shape)
    coef = np.where(clicks, magnitude, np.where(examined & clicks.any(-1, keepdims=True), -magnitude, 0.0))
    return coef


def synthetic_batch(
    n_clients: int,
    *,
    queries_per_client: int = 1,
    k: int = 10,
    n_features: int = 136,
    click_rate: float = 0.3,
    noise: float = 0.0,
    seed: int = 0,
) -> RoundBatch:
    """A round of ``n_clients`` FPDGD-style messages (full weights) and their clicks."""
    rng = np.random.default_rng(seed)
    n, B = n_clients, queries_per_client
    n_queries = n * B
    data = Dataset(
        features=rng.random((n_queries * k, n_features), dtype=np.float32),
        labels=np.zeros(n_queries * k, dtype=np.int8),
        query_ptr=np.arange(0, n_queries * k + 1, k, dtype=np.int64),
        qids=np.arange(n_queries, dtype=np.int64),
        n_levels=3,
        name="synthetic:attacks",
    )
    queries = np.arange(n_queries, dtype=np.int64).reshape(n, B)
    shown = (queries[..., None] * k + np.arange(k)).astype(np.int64)
    clicks = rng.random((n, B, k)) < click_rate
    coef = pdgd_like_coefficients(clicks, rng)
    ranker = LinearRanker(n_features)
    global_params = rng.normal(0.0, 0.1, n_features)
    update = ranker.vjp(np.broadcast_to(global_params, (n, n_features)), data.features[shown], coef)
    update = update + noise * rng.normal(size=update.shape)
    messages = Messages(n_interactions=np.full(n, B, dtype=np.int64), vector=global_params + update)
    ids = np.arange(n, dtype=np.int64)
    view = ServerView(
        round=1, threat_model="server", global_params=global_params, ranker=ranker,
        participants=ids, dropouts=np.empty(0, dtype=np.int64), messages=messages,
        aggregate=(global_params + update).mean(axis=0), interactions=Interactions(queries, shown),
        documents=data,
    )
    return RoundBatch(view=view, truth=GroundTruth(clicks=clicks, client_ids=ids))


def pdgd_batch(
    n_clients: int,
    *,
    queries_per_client: int = 1,
    k: int = 10,
    n_features: int = 136,
    candidates: int = 15,
    click_model: str = "navigational",
    lr: float = 0.1,
    noise: float = 0.0,
    seed: int = 0,
) -> tuple[RoundBatch, object]:
    """A probe round of real FPDGD steps (deterministic top k of ``candidates`` random documents
    per query, 3-level labels, cascade clicks, one PDGD step per query) and the algorithm.

    Each message is the client's local weights plus optional Gaussian noise of std ``noise``.
    """

    rng = np.random.default_rng(seed)
    n, B = n_clients, queries_per_client
    n_queries = n * B
    data = Dataset(
        features=rng.random((n_queries * candidates, n_features), dtype=np.float32),
        labels=rng.integers(0, 3, n_queries * candidates).astype(np.int8),
        query_ptr=np.arange(0, n_queries * candidates + 1, candidates, dtype=np.int64),
        qids=np.arange(n_queries, dtype=np.int64),
        n_levels=3,
        name="synthetic:pdgd",
    )
    ranker = LinearRanker(n_features)
    algorithm = FPDGD(ranker, cascade_model(click_model, 3), lr=lr, k=k)
    global_params = rng.normal(0.0, 0.1, n_features)
    queries = np.arange(n_queries, dtype=np.int64).reshape(n, B)
    weights, shown, clicks = pdgd_cohort(ranker, algorithm.click_model, global_params, data, queries, rng, lr=lr, k=k,
                                         deterministic=True, local_updates=True)
    weights = weights + noise * rng.normal(size=weights.shape)
    messages = Messages(n_interactions=np.full(n, B, dtype=np.int64), vector=weights)
    ids = np.arange(n, dtype=np.int64)
    view = ServerView(
        round=1, threat_model="server", global_params=global_params, ranker=ranker,
        participants=ids, dropouts=np.empty(0, dtype=np.int64), messages=messages,
        aggregate=weights.mean(axis=0), interactions=Interactions(queries, shown), documents=data,
    )
    return RoundBatch(view=view, truth=GroundTruth(clicks=clicks, client_ids=ids)), algorithm
