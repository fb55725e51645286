"""The federation loop: rounds of client steps, defenses, aggregation, interception (DESIGN.md).

One round (``run_round``): the cohort runs the algorithm's vectorized client step; the
client-side defenses transform the messages; the aggregator (default: n_c-weighted FedAvg)
combines them; the round is packaged as a ``ServerView`` under the threat model plus the
separate ``GroundTruth``; the algorithm's server step reads only the view.

``train`` repeats rounds on the cohorts and queries of its ``RoundSchedule``, hands every
``RoundBatch`` to the interceptors and records the learning curves: offline nDCG@10 of the
global model on a held-out split (``engine.evaluation``), FPDGD Eq. 17 online performance of
what users were shown.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

import numpy as np
from threadpoolctl import threadpool_limits

from fltr_audit.engine import metrics
from fltr_audit.engine.aggregation import RoundDefenses
from fltr_audit.constraints import ParameterError
from fltr_audit.engine.data.dataset import Dataset
from fltr_audit.errors import FltrError
from fltr_audit.engine.evaluation import OfflineEvaluations
from fltr_audit.engine.interfaces import Algorithm, ClientOutput
from fltr_audit.engine.messages import SHUFFLED, RoundBatch, ServerView
from fltr_audit.engine.poisoning import Poisoning, poisoned_algorithm
from fltr_audit.engine.population import with_population_clicks
from fltr_audit.engine.randomness import stream
from fltr_audit.engine.round_parts import RoundParts
from fltr_audit.engine.schedule import RoundSchedule
from fltr_audit.engine.training import NO_HOOKS, TrainHooks, TrainSettings, check_threat_model

if TYPE_CHECKING:  # pandas is imported by train() only: a Flower ClientApp process (a round step) never needs it
    import pandas as pd

GAMMA = 0.9995  # FPDGD Eq. 17 discount, following PDGD


@dataclass(frozen=True)
class TrainResult:
    """A finished run.

    Attributes
    ----------
    params : ndarray (P,)
        The final global model.
    curves : DataFrame
        One row per round: ``round`` (1-based), ``offline_ndcg10`` (NaN where not
        evaluated), ``online_ndcg`` (Eq. 17 cumulative so far), ``shown_ndcg`` (mean
        nDCG@10 of this round's shown lists), the algorithm's round metrics and the
        evaluators.
    config : dict
        The resolved configuration (JSON-able).
    seconds : float
    n_interactions : int
    """

    params: np.ndarray
    curves: pd.DataFrame
    config: dict
    seconds: float
    n_interactions: int


def _view_threat_model(requested: str, anonymous: bool) -> str:
    """``server (shuffled)`` when a shuffler stripped the messages of their senders' identities
    (``Aggregate.anonymous``); the threat model asked for otherwise."""
    if anonymous and requested in ("server", SHUFFLED):
        return SHUFFLED
    if anonymous or requested == SHUFFLED:
        raise ParameterError("threat_model", f"{SHUFFLED!r} is the view of a shuffling aggregator (defense '...+shuffle') "
                                             f"and only that; got {requested!r} with{'' if anonymous else 'out'} a shuffler")
    return requested


def run_round(algorithm: Any, params: np.ndarray, state: Any, data: Dataset, queries: np.ndarray,
              client_ids: np.ndarray, round_index: int, seed: int, *,
              defenses: RoundDefenses | None = None,
              threat_model: str = "server", deterministic: bool = False,
              observer: Callable[[RoundParts], None] | None = None, poisoning: Poisoning | None = None
              ) -> tuple[np.ndarray, Any, RoundBatch, ClientOutput]:
    """One round along the whole path: client step -> defenses -> aggregation -> server step.

    Randomness: ``stream(seed, "client", r)`` drives the clients' private choices,
    ``stream(seed, "public", r)`` what their messages reveal, ``stream(seed, "defense", r)``
    the defenses and ``stream(seed, "aggregate", r)`` the aggregator. A ``poisoning``
    (``engine.poisoning``) makes some members malicious: their clicks, or their messages after the
    client defenses (``stream(seed, "poison", r)``).

    Returns
    -------
    params, state : the server's next global model and optimizer state
    batch : RoundBatch -- the ServerView under ``threat_model`` and the GroundTruth
    output : ClientOutput -- the cohort's output before defenses
    """
    check_threat_model(threat_model)
    client_ids = np.asarray(client_ids, dtype=np.int64)
    malicious = None if poisoning is None else poisoning.malicious(client_ids, round_index)
    stepper = algorithm if malicious is None else poisoned_algorithm(algorithm, poisoning, client_ids, malicious)
    out = stepper.client_step(params, data, queries, client_ids, stream(seed, "client", round_index),
                              stream(seed, "public", round_index), deterministic)
    messages = out.messages
    defenses = defenses or RoundDefenses()
    defense_rng = stream(seed, "defense", round_index)
    for defense in defenses.client:
        messages = defense.apply(messages, params, defense_rng)
    aggregator = defenses.aggregator
    if malicious is not None:
        if malicious.any():
            messages = poisoning.craft(messages, malicious, params, aggregator, stream(seed, "poison", round_index))
        out = dataclasses.replace(out, private={**out.private, "malicious": malicious},
                                  round_metrics={**out.round_metrics, "malicious_clients": float(malicious.sum())})
    if observer is not None:  # reads the round, changes nothing (fltr_audit.engine.round_parts)
        observer(RoundParts(int(round_index), seed, params, out.messages, messages, client_ids, defenses.client,
                            aggregator))
    extra = {"global_params": params} if aggregator.reads_global_model else {}
    agg = aggregator.aggregate(messages, client_ids, stream(seed, "aggregate", round_index), **extra)
    sees_documents = threat_model in ("server", SHUFFLED)
    view = ServerView(
        round=int(round_index),
        threat_model=_view_threat_model(threat_model, agg.anonymous),
        global_params=np.asarray(params, dtype=np.float64),
        ranker=algorithm.ranker,
        participants=np.asarray(agg.participants, dtype=np.int64),
        dropouts=np.asarray(agg.dropouts, dtype=np.int64),
        messages=agg.messages,
        aggregate=agg.mean,
        aggregate_kind=messages.vector_kind,
        interactions=out.interactions if sees_documents else None,
        documents=data if sees_documents else None,
    )
    batch = RoundBatch(view=view, truth=out.truth(client_ids))
    new_params, new_state = algorithm.server_step(params, state, view)
    return new_params, new_state, batch, out


def present_members(client_ids: np.ndarray, queries: np.ndarray, absent: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The members of a drawn cohort (and their queries) who are not ``absent`` (sorted ids)."""
    if not len(absent):
        return client_ids, queries
    keep = ~np.isin(client_ids, absent, assume_unique=True)
    return client_ids[keep], queries[keep]


def train(algorithm: Algorithm, train_data: Dataset, settings: TrainSettings, *,
          eval_data: Dataset | None = None, defenses: RoundDefenses | None = None,
          hooks: TrainHooks = NO_HOOKS, poisoning: Poisoning | None = None) -> TrainResult:
    """Train ``algorithm`` on ``train_data`` as ``settings`` say, through ``defenses`` (default:
    none, FedAvg), with ``hooks`` reading the run; offline nDCG@10 on ``eval_data``. A ``poisoning``
    (``fltr_audit.engine.poisoning``) makes a fraction of every cohort malicious.

    Each round's cohort and queries come from the ``RoundSchedule`` (``engine.schedule``). The
    curve row of round r is handed to ``hooks.on_round`` in order, once its offline nDCG is known:
    the models of ``EVAL_MODELS`` evaluated rounds are scored in one pass over ``eval_data`` on a
    background thread while the next rounds train (``engine.evaluation``).

    A ``non_iid`` setting (:mod:`fltr_audit.engine.population`; Wang & Zuccon SIGIR 2022) also shapes
    how each user clicks (``document-preference``, ``click-preference``). The ``absent`` users of the
    settings are dropped from the cohorts they are drawn into (``present_members``); a round whose
    whole cohort is absent leaves the model as it was.

    BLAS runs single-threaded during training: the per-client products are too small to
    gain from threads (``bench fpdgd``: 1.6x faster on 2 cores), and the sums then come out
    in the same order on any machine. Instead, independent parts of a round (groups of
    clients, parts of the evaluation split) run on ``thread_map``'s threads, each calling
    BLAS exactly as one thread would, so the curves do not depend on the number of threads.
    """
    s = settings
    defenses = defenses or RoundDefenses()
    schedule = RoundSchedule(s, train_data)
    algorithm = with_population_clicks(algorithm, s.non_iid, s.seed)
    start = time.perf_counter()
    params = algorithm.init_params(stream(s.seed, "init"))
    state = algorithm.init_server_state(params)
    rows: list[dict] = []
    online, t_eval, n_interactions = 0.0, 0, 0
    offline = OfflineEvaluations(algorithm.ranker, eval_data, hooks.on_round)

    absent = np.asarray(s.absent, dtype=np.int64)
    with threadpool_limits(limits=1, user_api="blas"):
        for r in range(1, s.rounds + 1):
            client_ids, queries = present_members(*schedule.next_round(r), absent)
            row = {"round": r, "offline_ndcg10": np.nan, "online_ndcg": online, "shown_ndcg": np.nan}
            if len(client_ids):  # a cohort of absent users only: the round changes nothing
                params, state, batch, out = run_round(algorithm, params, state, train_data, queries, client_ids, r,
                                                      s.seed, defenses=defenses, threat_model=s.threat_model,
                                                      observer=hooks.observer, poisoning=poisoning)
                if not np.isfinite(params).all():
                    raise FltrError(f"round {r}: the global model became NaN or infinite under the defense "
                                    f"{defenses.name!r} (noise or clipping too large for float64)")
                for interceptor in hooks.interceptors:
                    interceptor(batch)
                seq = np.asarray(out.shown_ndcg, dtype=np.float64).ravel()
                online += metrics.online_performance(seq, GAMMA) * GAMMA ** t_eval
                t_eval += int((~np.isnan(seq)).sum())
                n_interactions += int(out.messages.n_interactions.sum())
                judged = seq[~np.isnan(seq)]
                row.update(online_ndcg=online, shown_ndcg=float(judged.mean()) if len(judged) else np.nan)
                row.update({key: float(v) for key, v in out.round_metrics.items()})
            evaluate = r % s.eval_every == 0 or r == s.rounds
            for name, fn in hooks.evaluators.items():
                row[name] = float(fn(params)) if evaluate else np.nan
            rows.append(row)
            offline.add(r, row, params if evaluate else None)
        offline.close()
    config = {
        **getattr(algorithm, "config", {"algorithm": algorithm.name}),
        "train_data": train_data.name, "eval_data": None if eval_data is None else eval_data.name,
        "clients": s.clients, "queries_per_client": s.queries_per_client, "rounds": s.rounds, "seed": s.seed,
        "eval_every": s.eval_every, "threat_model": s.threat_model, "replace": s.replace,
        "client_defenses": [d.name for d in defenses.client], "aggregator": defenses.aggregator.name,
        "online_gamma": GAMMA, **schedule.participation(),
        **({"absent": len(s.absent)} if s.absent else {}),
        **({"poison": poisoning.name} if poisoning is not None else {}),
    }
    # start-up: the engine loads without pandas (0.15 s CPU a process)
    import pandas as pd

    return TrainResult(params=np.asarray(params, dtype=np.float64), curves=pd.DataFrame(rows), config=config,
                       seconds=time.perf_counter() - start, n_interactions=n_interactions)
