"""The probe protocol of Pham's click-guessing experiment (Pham, Section 4.1).

Every query of a split is issued by a fresh client holding the model under attack; the
client ranks deterministically (top 10 by score, no sampling), clicks by the algorithm's
click model, makes one local update per query and sends its message after its B queries
(B = 1 in Pham's setting). Clients are grouped into cohorts that travel the same
defense / aggregation / interception path as training; the model itself never changes.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from fltr_audit.data.dataset import Dataset
from fltr_audit.errors import FltrError
from fltr_audit.federation import run_round
from fltr_audit.interfaces import Aggregator, Algorithm, ClientDefense
from fltr_audit.messages import RoundBatch


def probe(algorithm: Algorithm, params: np.ndarray, data: Dataset, *, seed: int, queries_per_client: int = 1,
          cohort_size: int = 100, client_defenses: Sequence[ClientDefense] = (),
          aggregator: Aggregator | None = None, threat_model: str = "server") -> list[RoundBatch]:
    """Probe ``params`` with every query of ``data`` in order; one ``RoundBatch`` per cohort.

    Client ``c`` issues queries ``c*B .. c*B + B - 1``; when the number of queries is not a
    multiple of B, the remaining queries go to one last client in a cohort of its own
    (with fewer local updates). Cohort ``i`` (1-based) uses the round streams of index
    ``i`` under ``seed``.
    """
    for option, value in (("--queries-per-client", queries_per_client), ("--probe-cohort", cohort_size)):
        if int(value) != value or value < 1:
            raise FltrError(f"{option}: must be a positive integer, got {value}")
    if data.n_queries < 1:
        raise FltrError("--data: the probed split has no queries")
    params = np.asarray(params, dtype=np.float64)
    state = algorithm.init_server_state(params)
    B = int(queries_per_client)
    full = data.n_queries // B
    groups = [(np.arange(full * B, dtype=np.int64).reshape(full, B), np.arange(full, dtype=np.int64))]
    if data.n_queries % B:
        groups.append((np.arange(full * B, data.n_queries, dtype=np.int64)[None, :], np.array([full], dtype=np.int64)))
    batches: list[RoundBatch] = []
    for queries, ids in groups:
        for start in range(0, len(ids), cohort_size):
            _, _, batch, _ = run_round(algorithm, params, state, data, queries[start:start + cohort_size],
                                       ids[start:start + cohort_size], len(batches) + 1, seed,
                                       client_defenses=client_defenses, aggregator=aggregator,
                                       threat_model=threat_model, deterministic=True)
            batches.append(batch)
    return batches
