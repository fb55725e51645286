"""The federation loop: rounds of client steps, defenses, aggregation, interception (DESIGN.md).

One round (``run_round``): the cohort runs the algorithm's vectorized client step; the
client-side defenses transform the messages; the aggregator (default: n_c-weighted FedAvg)
combines them; the round is packaged as a ``ServerView`` under the threat model plus the
separate ``GroundTruth``; the algorithm's server step reads only the view.

``train`` repeats rounds, samples each round's queries for the whole cohort, hands every
``RoundBatch`` to the interceptors and records the learning curves: offline nDCG@10 of the
global model on a held-out split, FPDGD Eq. 17 online performance of what users were shown.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import numpy as np
from threadpoolctl import threadpool_limits

from fltr_audit.engine import metrics, threads
from fltr_audit.engine.aggregation import FedAvg
from fltr_audit.engine.cohorts import Participations, cohort
from fltr_audit.constraints import Interval, ParameterError, check
from fltr_audit.engine.data.dataset import Dataset
from fltr_audit.errors import FltrError
from fltr_audit.engine.interfaces import Aggregator, Algorithm, ClientDefense, ClientOutput, Interceptor
from fltr_audit.engine.messages import SHUFFLED, THREAT_MODELS, RoundBatch, ServerView
from fltr_audit.engine.population import (
    NonIID, check_buildable, counter_uniform, query_sets, skewed_queries, weighted_cohort, with_population_clicks,
)
from fltr_audit.engine.randomness import stream
from fltr_audit.engine.rankers import EVAL_BLOCK, EVAL_MODELS
from fltr_audit.engine.threads import thread_count, thread_map
from fltr_audit.engine.round_parts import RoundParts

if TYPE_CHECKING:  # pandas is imported by train() only: a Flower ClientApp process (a round step) never needs it
    import pandas as pd

GAMMA = 0.9995  # FPDGD Eq. 17 discount, following PDGD
EVAL_CHUNK = 128 * EVAL_BLOCK  # rows per offline-evaluation task (whole blocks: the same grid of rows for any threads)


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


def offline_ndcgs(ranker: Any, models: np.ndarray, data: Dataset, k: int = 10) -> list[float]:
    """Mean nDCG@k of each model (r, P) over the judged queries of ``data``.

    The split is scored by ``ranker.score_float32_models`` (float32 for the linear ranker,
    ``rankers.EVAL_MODELS`` models per pass over the features) in chunks of ``EVAL_CHUNK`` rows on
    the thread pool. A model's scores depend on the model and the split only -- not on the
    other models, the chunks' threads or the number of threads -- so each value equals
    ``offline_ndcg`` of that model alone.
    """
    models = np.asarray(models, dtype=np.float64)
    scores = np.empty((len(models), data.n_docs))

    def score_chunk(s: int) -> None:
        scores[:, s:s + EVAL_CHUNK] = ranker.score_float32_models(models, data.features[s:s + EVAL_CHUNK])

    thread_map(score_chunk, range(0, data.n_docs, EVAL_CHUNK), rows=data.n_docs * len(models))
    return [metrics.mean_ndcg(row, data, k) for row in scores]


def offline_ndcg(ranker: Any, params: np.ndarray, data: Dataset, k: int = 10) -> float:
    """Mean nDCG@k of the model ``params`` over the judged queries of ``data`` (``offline_ndcgs``)."""
    return offline_ndcgs(ranker, np.asarray(params, dtype=np.float64)[None], data, k)[0]


_EVALUATORS: dict[int, ThreadPoolExecutor] = {}  # per process id: the one thread evaluating while rounds train


class _OfflineEvaluations:
    """The curve rows of ``train`` waiting for their offline nDCG@10, handed to ``on_round`` in order.

    The models of ``rankers.EVAL_MODELS`` evaluated rounds are scored in one pass over the split
    (``offline_ndcgs``) on a background thread while the next rounds train. With one thread
    (``threads.thread_count() == 1``, e.g. inside a campaign's worker process) or a split below
    ``threads.PARALLEL_ROWS`` rows (a thread costs more than it saves) the pass runs at once.
    Either way each value is that of its model alone.
    """

    def __init__(self, ranker: Any, data: Dataset | None, on_round: Callable[[int, dict], None] | None):
        self.ranker, self.data, self.on_round = ranker, data, on_round
        self.rows: list[tuple[int, dict, Future | None, int]] = []  # round, row, its pass, its model's index
        self.models: list[np.ndarray] = []  # the models of the pass being gathered
        self.gathering: Future = Future()

    def add(self, r: int, row: dict, params: np.ndarray | None) -> None:
        """Round ``r``'s ``row``; ``params`` to evaluate (None: not evaluated this round)."""
        if params is None or self.data is None:
            self.rows.append((r, row, None, -1))
        else:
            self.rows.append((r, row, self.gathering, len(self.models)))
            self.models.append(np.array(params, dtype=np.float64))
            if len(self.models) == EVAL_MODELS:
                self._start()
        self._report(wait=False)

    def close(self) -> None:
        """Evaluate what is gathered and report every row."""
        self._start()
        self._report(wait=True)

    def _start(self) -> None:
        if not self.models:
            return
        job, models, self.models, self.gathering = self.gathering, np.stack(self.models), [], Future()
        if thread_count() == 1 or self.data.n_docs < threads.PARALLEL_ROWS:
            job.set_result(offline_ndcgs(self.ranker, models, self.data))
            return
        pid = os.getpid()
        if pid not in _EVALUATORS:
            _EVALUATORS[pid] = ThreadPoolExecutor(1, thread_name_prefix="fltr-audit-eval")
        _EVALUATORS[pid].submit(offline_ndcgs, self.ranker, models, self.data).add_done_callback(
            lambda done: job.set_exception(done.exception()) if done.exception() else job.set_result(done.result()))

    def _report(self, wait: bool) -> None:
        while self.rows:
            r, row, job, i = self.rows[0]
            if job is not None:
                if not (wait or job.done()) or job is self.gathering:
                    return
                row["offline_ndcg10"] = job.result()[i]
            self.rows.pop(0)
            if self.on_round is not None:
                self.on_round(r, row)


def check_threat_model(threat_model: str) -> None:
    if threat_model not in THREAT_MODELS:
        raise ParameterError("threat_model", f"unknown threat model {threat_model!r} "
                                             f"(choose from {', '.join(THREAT_MODELS)})")


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
              client_defenses: Sequence[ClientDefense] = (), aggregator: Aggregator | None = None,
              threat_model: str = "server", deterministic: bool = False,
              observer: Callable[[RoundParts], None] | None = None
              ) -> tuple[np.ndarray, Any, RoundBatch, ClientOutput]:
    """One round along the whole path: client step -> defenses -> aggregation -> server step.

    Randomness: ``stream(seed, "client", r)`` drives the clients' private choices,
    ``stream(seed, "public", r)`` what their messages reveal, ``stream(seed, "defense", r)``
    the defenses and ``stream(seed, "aggregate", r)`` the aggregator.

    Returns
    -------
    params, state : the server's next global model and optimizer state
    batch : RoundBatch -- the ServerView under ``threat_model`` and the GroundTruth
    output : ClientOutput -- the cohort's output before defenses
    """
    check_threat_model(threat_model)
    client_ids = np.asarray(client_ids, dtype=np.int64)
    out = algorithm.client_step(params, data, queries, client_ids, stream(seed, "client", round_index),
                                stream(seed, "public", round_index), deterministic)
    messages = out.messages
    defense_rng = stream(seed, "defense", round_index)
    for defense in client_defenses:
        messages = defense.apply(messages, params, defense_rng)
    aggregator = aggregator or FedAvg()
    if observer is not None:  # reads the round, changes nothing (fltr_audit.engine.round_parts)
        observer(RoundParts(int(round_index), seed, params, out.messages, messages, client_ids, client_defenses,
                            aggregator))
    extra = {"global_params": params} if getattr(aggregator, "reads_global_model", False) else {}
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


def sample_queries(n_queries: int, clients: int, queries_per_client: int, rng: np.random.Generator,
                   replace: bool = False) -> np.ndarray:
    """The cohort's queries for one round, (clients, B): without replacement within the round.

    With ``replace`` the queries are drawn with replacement (allowed when a round needs
    more queries than the split has).
    """
    if replace:
        return rng.integers(0, n_queries, size=(clients, queries_per_client), dtype=np.int64)
    _check_without_replacement(n_queries, clients, queries_per_client)
    need = clients * queries_per_client
    return rng.choice(n_queries, size=need, replace=False).astype(np.int64).reshape(clients, queries_per_client)


def _check_without_replacement(n_queries: int, clients: int, queries_per_client: int) -> None:
    need = clients * queries_per_client
    if need > n_queries:
        raise ParameterError("queries_per_client", f"{clients} clients x {queries_per_client} queries = {need} "
                                                   f"exceed the {n_queries} training queries of a round without "
                                                   "replacement (sample with replacement: replace)")


BUDGET_LIMITS = {"clients": 1_000_000, "queries_per_client": 10_000, "rounds": 1_000_000, "eval_every": 1_000_000}
"""Largest accepted sizes (checked before anything is allocated)."""
def user_queries(seed: int, users: np.ndarray, visits: np.ndarray, queries_per_client: int,
                 n_queries: int) -> np.ndarray:
    """Each persistent user's own query stream: on its ``visits``-th round (0-based) user ``u``
    issues queries ``floor(U(seed, u, visit, b) * n_queries)``, b < B, with U the counter-based
    uniform of :func:`fltr_audit.engine.population.counter_uniform`, so a user's queries depend only on
    the seed, the user and how often it took part -- vectorized over the cohort, drawn with replacement."""
    u = np.asarray(users, dtype=np.uint64)[:, None]
    v = np.asarray(visits, dtype=np.uint64)[:, None]
    b = np.arange(queries_per_client, dtype=np.uint64)[None, :]
    uniform = counter_uniform(seed, u, v, b)
    return np.minimum((uniform * n_queries).astype(np.int64), n_queries - 1)


def check_population(population: int | None, clients: int) -> None:
    check("population", population, (Interval(int, clients, None), None),
          f"the cohort of {clients} clients is sampled from it each round")


def check_budget(clients: int, queries_per_client: int, rounds: int, eval_every: int) -> None:
    for name, value in (("clients", clients), ("queries_per_client", queries_per_client),
                        ("rounds", rounds), ("eval_every", eval_every)):
        check(name, value, (Interval(int, 1, BUDGET_LIMITS[name]),))


def train(algorithm: Algorithm, train_data: Dataset, *, clients: int, queries_per_client: int, rounds: int, seed: int,
          eval_data: Dataset | None = None, eval_every: int = 1,
          evaluators: Mapping[str, Callable[[np.ndarray], float]] | None = None,
          client_defenses: Sequence[ClientDefense] = (), aggregator: Aggregator | None = None,
          interceptors: Sequence[Interceptor] = (), threat_model: str = "server",
          on_round: Callable[[int, dict], None] | None = None, replace: bool = False,
          population: int | None = None, non_iid: NonIID | None = None,
          observer: Callable[[RoundParts], None] | None = None) -> TrainResult:
    """Train ``algorithm`` for ``rounds`` rounds of ``clients`` clients x ``queries_per_client`` queries.

    The same ``clients`` simulated users (ids ``0 .. clients - 1``) take part in every
    round (FPDGD Alg. 2), each issuing B queries drawn for the whole cohort from
    ``stream(seed, "queries", r)``. Offline nDCG@10 of the global model on ``eval_data`` and
    the ``evaluators`` are computed after rounds ``eval_every, 2 eval_every, ...`` and the
    last round. ``on_round(r, row)`` is called for each round, in order, with its curve row once its
    offline nDCG is known: the models of ``EVAL_MODELS`` evaluated rounds are scored in one pass over
    ``eval_data`` on a background thread while the next rounds train (``_OfflineEvaluations``).

    With a ``population`` of N persistent users, each round's cohort is instead ``clients`` users
    drawn uniformly without replacement from ``0 .. N - 1`` (``stream(seed, "cohort", r)``), each
    issuing the next queries of its own stream (``user_queries``); every user then takes part in
    a fraction ``clients / N`` of the rounds on average (the sampling rate of the accounting).
    ``observer``, if given, reads every round's parts (``fltr_audit.engine.round_parts``) and changes nothing.

    A ``non_iid`` setting (:mod:`fltr_audit.engine.population`; Wang & Zuccon SIGIR 2022) shapes who takes
    part (``data-quantity``: weighted cohorts), which queries users issue (``label-skew``: home
    query sets) or how each user clicks (``document-preference``, ``click-preference``); without a
    ``population`` its users are the ``clients`` users taking part in every round.

    BLAS runs single-threaded during training: the per-client products are too small to
    gain from threads (``bench fpdgd``: 1.6x faster on 2 cores), and the sums then come out
    in the same order on any machine. Instead, independent parts of a round (groups of
    clients, parts of the evaluation split) run on ``thread_map``'s threads, each calling
    BLAS exactly as one thread would, so the curves do not depend on the number of threads.
    """
    check_budget(clients, queries_per_client, rounds, eval_every)
    check_threat_model(threat_model)
    check_population(population, clients)
    if train_data.n_queries < 1:
        raise ParameterError("data", "the training split has no queries")
    non_iid = non_iid or NonIID()
    iid = non_iid.setting == "iid"
    check_buildable(non_iid, train_data.n_queries)
    if not replace and population is None and iid:
        _check_without_replacement(train_data.n_queries, clients, queries_per_client)
    algorithm = with_population_clicks(algorithm, non_iid, seed)
    users = population or clients
    home_sets = (query_sets(train_data.labels, train_data.query_ptr, non_iid.sets)
                   if non_iid.setting == "label-skew" else None)
    aggregator = aggregator or FedAvg()
    evaluators = dict(evaluators or {})
    start = time.perf_counter()
    params = algorithm.init_params(stream(seed, "init"))
    state = algorithm.init_server_state(params)
    client_ids = np.arange(clients, dtype=np.int64)
    visits = Participations(users)  # the users' participations so far (only those who took part are stored)
    rows: list[dict] = []
    online, t_eval, n_interactions = 0.0, 0, 0
    offline = _OfflineEvaluations(algorithm.ranker, eval_data, on_round)

    with threadpool_limits(limits=1, user_api="blas"):
        for r in range(1, rounds + 1):
            if population is None and iid:
                queries = sample_queries(train_data.n_queries, clients, queries_per_client,
                                         stream(seed, "queries", r), replace)
            else:
                if non_iid.setting == "data-quantity":
                    client_ids = weighted_cohort(users, clients, non_iid.alpha, stream(seed, "cohort", r))
                elif population is not None:
                    client_ids = cohort(seed, r, clients, population)
                if home_sets is not None:
                    queries = skewed_queries(seed, non_iid, client_ids, visits.of(client_ids), queries_per_client,
                                             *home_sets)
                else:
                    queries = user_queries(seed, client_ids, visits.of(client_ids), queries_per_client,
                                           train_data.n_queries)
                visits.add(client_ids)
            params, state, batch, out = run_round(algorithm, params, state, train_data, queries, client_ids, r, seed,
                                                  client_defenses=client_defenses, aggregator=aggregator,
                                                  threat_model=threat_model, observer=observer)
            if not np.isfinite(params).all():
                stack = "+".join([d.name for d in client_defenses] + [aggregator.name]) or "none"
                raise FltrError(f"round {r}: the global model became NaN or infinite under the defense "
                                f"{stack!r} (noise or clipping too large for float64)")
            for interceptor in interceptors:
                interceptor(batch)
            seq = np.asarray(out.shown_ndcg, dtype=np.float64).ravel()
            online += metrics.online_performance(seq, GAMMA) * GAMMA ** t_eval
            t_eval += int((~np.isnan(seq)).sum())
            n_interactions += int(out.messages.n_interactions.sum())
            judged = seq[~np.isnan(seq)]
            row = {"round": r, "offline_ndcg10": np.nan, "online_ndcg": online,
                   "shown_ndcg": float(judged.mean()) if len(judged) else np.nan}
            row.update({key: float(v) for key, v in out.round_metrics.items()})
            evaluate = r % eval_every == 0 or r == rounds
            for name, fn in evaluators.items():
                row[name] = float(fn(params)) if evaluate else np.nan
            rows.append(row)
            offline.add(r, row, params if evaluate else None)
        offline.close()
    config = {
        **getattr(algorithm, "config", {"algorithm": algorithm.name}),
        "train_data": train_data.name, "eval_data": None if eval_data is None else eval_data.name,
        "clients": clients, "queries_per_client": queries_per_client, "rounds": rounds, "seed": seed,
        "eval_every": eval_every, "threat_model": threat_model, "replace": replace,
        "client_defenses": [d.name for d in client_defenses], "aggregator": aggregator.name,
        "online_gamma": GAMMA,
    }
    if population is not None:
        config.update(population=int(population), sampling_rate=clients / population,
                      rounds_participated_max=visits.max(), rounds_participated_mean=visits.mean())
    if not iid:
        config.update(non_iid=non_iid.name, rounds_participated_max=visits.max(),
                      rounds_participated_mean=visits.mean())
    import pandas as pd

    return TrainResult(params=np.asarray(params, dtype=np.float64), curves=pd.DataFrame(rows), config=config,
                       seconds=time.perf_counter() - start, n_interactions=n_interactions)
