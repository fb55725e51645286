"""Offline evaluation of global models while a run trains: nDCG@k of models on a held-out split
(``offline_ndcgs``), scored in float32 chunks on the thread pool, and the queue of curve rows
waiting for their value (``OfflineEvaluations``)."""

from __future__ import annotations

import os
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable

import numpy as np

from fltr_audit.engine import metrics, threads
from fltr_audit.engine.data.dataset import Dataset
from fltr_audit.engine.rankers import EVAL_BLOCK, EVAL_MODELS
from fltr_audit.engine.threads import thread_count, thread_map

EVAL_CHUNK = 128 * EVAL_BLOCK  # rows per offline-evaluation task (whole blocks: the same grid of rows for any threads)


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


class OfflineEvaluations:
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
