"""The probe protocol of Pham's click-guessing experiment (Pham, Section 4.1).

Every query of a split is issued by a fresh client holding the model under attack; the
client ranks deterministically (top 10 by score, no sampling), clicks by the algorithm's
click model, makes one local update per query and sends its message after its B queries
(B = 1 in Pham's setting). Clients are grouped into cohorts that travel the same
defense / aggregation / interception path as training; the model itself never changes.

Sample size: up to ``passes`` probe rounds issue every query of the split again, by new clients
with new clicks (independent round streams), until the caller has ``enough`` lists. The
shown list of a query is the same in every pass (deterministic ranking); under zero leakage the
lists of one query are still uncorrelated (each pass draws its clicks independently), so the
level of a test over lists holds.

Small cohorts: an aggregator that declares ``min_cohort`` (secure aggregation: 2, since an
aggregate of one client is that client's message) never gets fewer clients -- a last cohort
smaller than that is merged into the cohort before it; a remainder client that cannot be
merged (it holds fewer than B queries) is left out and counted. An aggregator that loses so
many clients that the cohort cannot be aggregated raises ``CohortLost``: that cohort is
dropped and counted, the probe goes on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from fltr_audit.constraints import Interval, ParameterError, check
from fltr_audit.engine.data.dataset import Dataset
from fltr_audit.errors import CohortLost
from fltr_audit.engine.federation import run_round
from fltr_audit.engine.interfaces import Aggregator, Algorithm, ClientDefense
from fltr_audit.engine.messages import RoundBatch
from fltr_audit.engine.aggregation import RoundDefenses


MAX_PROBE_ROUNDS = 50
"""Passes over the probe split at most, when a number of lists is asked for (``--probe-lists``)."""


@dataclass(frozen=True)
class ProbeResult:
    """The probe's rounds and what it could not probe.

    Attributes
    ----------
    batches : one ``RoundBatch`` per aggregated cohort
    cohorts_lost : cohorts the aggregator aborted (``CohortLost``, e.g. dropouts below threshold)
    queries_left_out : queries of a remainder client too small to form or join a cohort
    """

    batches: list[RoundBatch]
    cohorts_lost: int = 0
    queries_left_out: int = 0


def cohort_bounds(n_clients: int, cohort_size: int, min_cohort: int = 1) -> list[tuple[int, int]]:
    """``(start, stop)`` of each cohort of ``n_clients`` in order, ``cohort_size`` each; a last
    cohort smaller than ``min_cohort`` joins the one before it (when there is one)."""
    bounds = [(s, min(s + cohort_size, n_clients)) for s in range(0, n_clients, cohort_size)]
    if len(bounds) > 1 and bounds[-1][1] - bounds[-1][0] < min_cohort:
        (start, _), (_, stop) = bounds[-2], bounds[-1]
        bounds[-2:] = [(start, stop)]
    return bounds


def probe_cohorts(algorithm: Algorithm, params: np.ndarray, data: Dataset, *, seed: int,
                  queries_per_client: int = 1, cohort_size: int = 100, client_defenses: Sequence[ClientDefense] = (),
                  aggregator: Aggregator | None = None, threat_model: str = "server", passes: int = 1,
                  enough: Callable[[list[RoundBatch]], bool] | None = None) -> ProbeResult:
    """Probe ``params`` with every query of ``data`` in order, pass after pass (at most
    ``passes``; fewer once ``enough(batches)`` holds after a pass); one ``RoundBatch`` per cohort.

    In each pass client ``c`` issues queries ``c*B .. c*B + B - 1``; when the number of queries
    is not a multiple of B, the remaining queries go to one last client in a cohort of its own
    (with fewer local updates). Cohort ``i`` (1-based, counted over the passes) uses the round
    streams of index ``i`` under ``seed``, so every pass draws new clicks.
    """
    for parameter, value in (("queries_per_client", queries_per_client), ("cohort_size", cohort_size),
                             ("passes", passes)):
        check(parameter, value, (Interval(int, 1, None),))
    if data.n_queries < 1:
        raise ParameterError("data", "the probed split has no queries")
    params = np.asarray(params, dtype=np.float64)
    state = algorithm.init_server_state(params)
    B = int(queries_per_client)
    need = 1 if aggregator is None else int(aggregator.min_cohort)
    full = data.n_queries // B
    groups = [(np.arange(full * B, dtype=np.int64).reshape(full, B), np.arange(full, dtype=np.int64))]
    left_out = 0
    if data.n_queries % B:
        if need <= 1:
            groups.append((np.arange(full * B, data.n_queries, dtype=np.int64)[None, :],
                           np.array([full], dtype=np.int64)))
        else:
            left_out = data.n_queries - full * B      # one client of fewer queries cannot join a cohort
    batches: list[RoundBatch] = []
    lost = index = 0
    for done in range(int(passes)):
        first_id = done * (full + 1)                  # fresh clients every pass
        for queries, ids in groups:
            for start, stop in cohort_bounds(len(ids), int(cohort_size), need):
                index += 1
                if stop - start < need:
                    left_out += int(queries[start:stop].size)
                    continue
                try:
                    _, _, batch, _ = run_round(algorithm, params, state, data, queries[start:stop],
                                               ids[start:stop] + first_id, index, seed, threat_model=threat_model,
                                               deterministic=True,
                                               defenses=RoundDefenses(client=tuple(client_defenses),
                                                                      aggregator=aggregator))
                except CohortLost:
                    lost += 1
                    continue
                batches.append(batch)
        if enough is not None and enough(batches):
            break
    return ProbeResult(batches, cohorts_lost=lost, queries_left_out=left_out)


def probe(algorithm: Algorithm, params: np.ndarray, data: Dataset, **options) -> list[RoundBatch]:
    """The batches of ``probe_cohorts`` (same options)."""
    return probe_cohorts(algorithm, params, data, **options).batches
