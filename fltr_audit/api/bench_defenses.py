"""Speed of secure aggregation (``fltr-audit bench defenses``): the protocol (SecAgg+ degree and the
complete graph) per round, and the ideal mode's overhead over plain FedAvg, alone and within an FPDGD
training round. Measured, never asserted."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from defenses.secagg import IdealSecAgg
from defenses.secagg_protocol import SecAggProtocol
from fltr_audit.base.timing import best_seconds
from fltr_audit.constraints import POSITIVE_INT, Interval, ParameterError, check
from fltr_audit.engine.aggregation import FedAvg, RoundDefenses
from fltr_audit.engine.algorithms.fpdgd import FPDGD
from fltr_audit.engine.clicks import cascade_model
from fltr_audit.engine.data.synthetic import generate
from fltr_audit.engine.federation import run_round
from fltr_audit.engine.messages import Messages
from fltr_audit.engine.randomness import stream
from fltr_audit.engine.rankers import LinearRanker
from fltr_audit.engine.schedule import sample_queries
from fltr_audit.runs.progress import NO_PROGRESS, Progress

SECAGG_TARGET_SECONDS = 5.0
IDEAL_OVERHEAD_TARGET = 0.05


def _training_rounds(aggregators: list, clients: int, repeats: int, seed: int) -> list[float]:
    """Best wall time of one FPDGD round (synthetic mslr10k profile, 136 features, B = 4) with
    each aggregator, the aggregators interleaved so that machine load hits them alike."""
    data = generate("mslr10k", queries=max(500, 4 * clients), seed=seed)
    algo = FPDGD(LinearRanker(data.n_features), cascade_model("informational", data.n_levels))
    params = algo.init_params(stream(seed, "init"))
    queries = sample_queries(data.n_queries, clients, 4, stream(seed, "queries", 1))
    ids = np.arange(clients)
    best = [float("inf")] * len(aggregators)
    for _ in range(repeats):
        for i, agg in enumerate(aggregators):
            best[i] = min(best[i],
                          best_seconds(lambda: run_round(algo, params, None, data, queries, ids, 1, seed,
                                                         defenses=RoundDefenses(aggregator=agg)),
                                       1))
    return best


def bench_defenses(clients: int = 1000, dim: int = 136, degree: int = 20, drop: float = 0.0, full: bool = True,
                   round_clients: int = 100, repeats: int = 5, seed: int = 0,
                   progress: Progress = NO_PROGRESS) -> list[dict[str, Any]]:
    """Rows of seconds per round (best of ``repeats`` for the fast ones); len(protocol runs) + 2 steps."""
    check("clients", clients, (Interval(int, 3, None),))
    for name, value in (("dim", dim), ("round_clients", round_clients), ("repeats", repeats)):
        check(name, value, POSITIVE_INT)
    if degree < 2 or degree % 2 or degree >= clients - 1:
        raise ParameterError("degree", f"must be even, at least 2 and below --clients - 1, got {degree}")
    check("drop", drop, (Interval(float, 0, 1, "left"),))
    rng = np.random.default_rng(seed)
    messages = Messages(n_interactions=np.full(clients, 4), vector=rng.normal(0, 1, (clients, dim)))
    ids = np.arange(clients)
    runs = [(f"secagg-protocol k={degree}", SecAggProtocol(drop=drop, k=degree))]
    if full:
        runs.append(("secagg-protocol complete", SecAggProtocol(drop=drop, k=0)))
    rows = []
    for label, agg in runs:
        start, cpu = time.perf_counter(), time.process_time()
        out = agg.aggregate(messages, ids, np.random.default_rng(seed))
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        rows.append({"measure": label, "clients": clients, "dim": dim, "seconds": seconds, "cpu_seconds": cpu,
                     "target_seconds": SECAGG_TARGET_SECONDS if agg.k else None,
                     "key_agreements": out.stats["key_agreements"],
                     "mask_key_agreements": out.stats["mask_key_agreements"],
                     "mb_up": out.stats["bytes_up"] / 1e6, "mb_down": out.stats["bytes_down"] / 1e6,
                     "dropouts": out.stats["dropouts"], "threshold": out.stats["threshold"]})
        progress.advance()
    plain = best_seconds(lambda: FedAvg().aggregate(messages, ids, np.random.default_rng(seed)), repeats * 20)
    ideal = best_seconds(lambda: IdealSecAgg().aggregate(messages, ids, np.random.default_rng(seed)), repeats * 20)
    rows.append({"measure": "aggregate: secagg vs plain", "clients": clients, "dim": dim,
                 "seconds": ideal, "baseline_seconds": plain, "overhead_seconds": ideal - plain})
    progress.advance()
    round_plain, round_ideal = _training_rounds([FedAvg(), IdealSecAgg()], round_clients, repeats, seed)
    rows.append({"measure": "FPDGD round: secagg vs plain", "clients": round_clients, "dim": 136,
                 "seconds": round_ideal, "baseline_seconds": round_plain,
                 "overhead_fraction": (round_ideal - round_plain) / round_plain,
                 "aggregation_overhead_fraction": (ideal - plain) / round_plain,
                 "target_fraction": IDEAL_OVERHEAD_TARGET})
    progress.advance()
    return rows
