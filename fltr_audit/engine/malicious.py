"""Threat model ``server-malicious``: the server manipulates what it serves in the probed round
(RAIFLE, Pham et al. NDSS 2025, "adversarial data manipulation") so that secure aggregation no
longer hides one target client's update.

Every probe client is the target of one round of its own probe cohort (the same members as
the honest probe's cohort, the target listed first). Two manipulations:

* ``isolate`` -- feature isolation: the target's documents keep their features; every other
  member is served its candidates with all-zero feature rows. All of a member's shown
  documents then have identical features, so its PDGD gradient ``sum_i coef_i df/dtheta(x_i)``
  is ``(sum_i coef_i) df/dtheta(0) = 0`` (every pair weight is added once and subtracted once),
  for the linear and the MLP ranker alike: the cohort aggregate carries the target's update
  alone (divided by the cohort's n_c). The others' clicks still follow their documents'
  relevance, but they see the first k candidates in the data's order (all scores tie).
* ``inconsistent`` -- model inconsistency, where the protocol does not bind the global model
  to the round: the target gets the true model, the others a copy whose output layer is scaled
  by ``SATURATION`` (for the linear ranker, the whole weight vector). Scores scale, the
  rankings do not change (no cost to the others' result lists), but every PDGD pair weight
  ``rho sigma(d) sigma(-d)`` of the others vanishes at score gaps ``|d| >> 1``, so their updates
  are (numerically) zero; the server subtracts the models it served from the aggregate.

What a manipulation costs the other members is measured as the mean nDCG@10 of their shown
lists in the manipulated round against the same round served honestly.

The view (``ServerView``) of such a round: ``threat_model="server-malicious"``, the target
first in ``participants``, the cohort aggregate (or the target's message alone when the
aggregator shows messages), ``served_params`` (each member's model, the target's equal to
``global_params``), and the target's shown lists only; the ground truth is the target's clicks.
``attacks.view.client_updates`` turns it into the target's update.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from fltr_audit.base.means import nanmean
from fltr_audit.engine.aggregation import FedAvg
from fltr_audit.constraints import Interval, ParameterError, check
from fltr_audit.engine.algorithms.registry import manipulable_names
from fltr_audit.engine.data.dataset import Dataset
from fltr_audit.engine.interfaces import Aggregator, ClientDefense
from fltr_audit.engine.messages import GroundTruth, Interactions, RoundBatch, ServerView
from fltr_audit.engine.randomness import stream

MANIPULATIONS = ("isolate", "inconsistent")
SATURATION = 1e6
"""Scale of the model served to the non-targets under ``inconsistent``."""


@dataclass(frozen=True)
class MaliciousRound:
    """One manipulated round: the target's batch and the cost to the other members."""

    batch: RoundBatch
    others_ndcg_honest: float
    others_ndcg_served: float


def check_supported(algorithm: Any, manipulation: str) -> None:
    """ParameterError naming ``threat_model`` unless the manipulation applies to the algorithm."""

    name = getattr(algorithm, "name", type(algorithm).__name__)
    if name not in manipulable_names():  # declared on the algorithm's spec (server_manipulable)
        raise ParameterError("threat_model", f"server-malicious: supported for {', '.join(manipulable_names())} "
                                             f"(vector messages of PDGD steps), not {name}")
    if manipulation not in MANIPULATIONS:
        raise ParameterError("manipulation", f"unknown manipulation {manipulation!r} (choose from {', '.join(MANIPULATIONS)})")


def saturated(ranker: Any, params: np.ndarray, factor: float = SATURATION) -> np.ndarray:
    """``params`` with the output scaled by ``factor`` (same rankings, scores times ``factor``;
    ``ranker.scaled_output``)."""
    return ranker.scaled_output(params, factor)


def _zeroed_rows(data: Dataset, queries: np.ndarray) -> np.ndarray:
    """Dataset rows of the given queries."""
    starts, counts = data.query_ptr[queries], data.docs_per_query[queries]
    return np.concatenate([np.arange(s, s + c) for s, c in zip(starts.tolist(), counts.tolist())]) \
        if len(queries) else np.empty(0, dtype=np.int64)


def malicious_probe(algorithm: Any, params: np.ndarray, data: Dataset, *, seed: int, manipulation: str = "isolate",
                    queries_per_client: int = 1, cohort_size: int = 100,
                    client_defenses: Sequence[ClientDefense] = (), aggregator: Aggregator | None = None
                    ) -> list[MaliciousRound]:
    """Probe ``params`` as ``fltr_audit.engine.probe.probe`` does, but with one manipulated round per
    probe client as the target (module docstring). Round ``r`` (1-based, one per target) uses the
    streams ``stream(seed, "malicious-...", r)``; the honest round of a target's cohort is run once
    per cohort for the cost."""
    check_supported(algorithm, manipulation)
    params = np.asarray(params, dtype=np.float64)
    aggregator = aggregator or FedAvg()
    check("queries_per_client", queries_per_client, (Interval(int, 1, None),))
    check("cohort_size", cohort_size, (Interval(int, 1, None),))
    B = int(queries_per_client)
    full = data.n_queries // B
    queries = np.arange(full * B, dtype=np.int64).reshape(full, B)
    if full == 0:
        raise ParameterError("probe.queries_per_client", "the probed split has fewer queries than one message needs")
    rounds: list[MaliciousRound] = []
    n_params = len(params)
    for c0 in range(0, full, cohort_size):
        cohort = queries[c0:c0 + cohort_size]
        ids = np.arange(c0, c0 + len(cohort), dtype=np.int64)
        honest = algorithm.client_step(params, data, cohort, ids, stream(seed, "malicious-client", c0),
                                       stream(seed, "malicious-public", c0), True)
        honest_ndcg = np.asarray(honest.shown_ndcg, dtype=np.float64).reshape(len(cohort), -1)
        if manipulation == "isolate":
            features = data.features.copy()
            rows = _zeroed_rows(data, cohort.ravel())
            features[rows] = 0.0
            served_data = dataclasses.replace(data, features=features)
        for t in range(len(cohort)):
            r = len(rounds) + 1
            order = np.r_[t, np.delete(np.arange(len(cohort)), t)]          # target first
            q, members = cohort[order], ids[order]
            served = np.repeat(params[None, :], len(q), axis=0)
            data_t = data
            if manipulation == "isolate":
                own = _zeroed_rows(data, q[0])
                features[own] = data.features[own]
                data_t = served_data
            else:
                served[1:] = saturated(algorithm.ranker, params)
            out = algorithm.client_step(served, data_t, q, members, stream(seed, "malicious-client", c0, r),
                                        stream(seed, "malicious-public", c0, r), True)
            if manipulation == "isolate":
                features[own] = 0.0
            messages = out.messages
            rng = stream(seed, "malicious-defense", r)
            for defense in client_defenses:
                messages = defense.apply(messages, served, rng)
            extra = {"global_params": params} if aggregator.reads_global_model else {}
            agg = aggregator.aggregate(messages, members, stream(seed, "malicious-aggregate", r), **extra)
            shown_target = Interactions(queries=q[:1], shown=out.interactions.shown[:1])
            view = ServerView(
                round=r, threat_model="server-malicious", global_params=params.copy(), ranker=algorithm.ranker,
                participants=np.asarray(agg.participants, dtype=np.int64),
                dropouts=np.asarray(agg.dropouts, dtype=np.int64),
                messages=None if agg.messages is None else _first(agg.messages),
                aggregate=agg.mean, aggregate_kind=messages.vector_kind,
                interactions=shown_target, documents=data,
                served_params=served.reshape(len(q), n_params),
            )
            truth = GroundTruth(clicks=out.clicks[:1], client_ids=members[:1])
            others = np.asarray(out.shown_ndcg, dtype=np.float64).reshape(len(q), -1)[1:]
            rounds.append(MaliciousRound(RoundBatch(view, truth), nanmean(honest_ndcg[order][1:]),
                                         nanmean(others)))
    return rounds


def _first(messages: Any) -> Any:
    """The target's (first) message alone."""
    return messages.replace(
        n_interactions=messages.n_interactions[:1],
        **{name: getattr(messages, name)[:1] for name in ("vector", "seed", "metric")
           if getattr(messages, name) is not None})
