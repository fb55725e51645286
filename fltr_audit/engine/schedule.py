"""Who takes part in which round, and which queries they issue (``federation.train``'s schedule).

Without a population and IID users, the same ``clients`` users (ids ``0 .. clients - 1``) take
part in every round, each issuing B queries drawn for the whole cohort from
``stream(seed, "queries", r)`` (without replacement within the round unless ``replace``).

With a ``population`` of N persistent users, round r's cohort is ``clients`` users drawn
uniformly without replacement (``stream(seed, "cohort", r)``, as ``engine.cohorts`` recomputes it
for the accounting, without materialising the population), each issuing the next queries of its own
stream (``user_queries``); the participations are kept for the users who took part only
(``engine.cohorts.Participations``: nothing per user of a population of 10^9). A
non-IID setting (``engine.population``) shapes who takes part (``data-quantity``: weighted
cohorts) and which queries users issue (``label-skew``: home query sets).
"""

from __future__ import annotations

import numpy as np

from fltr_audit.constraints import ParameterError
from fltr_audit.engine.cohorts import Participations, cohort
from fltr_audit.engine.data.dataset import Dataset
from fltr_audit.engine.population import (check_buildable, counter_uniform, query_sets, skewed_queries,
                                          weighted_cohort)
from fltr_audit.engine.randomness import stream
from fltr_audit.engine.training import TrainSettings


def sample_queries(n_queries: int, clients: int, queries_per_client: int, rng: np.random.Generator,
                   replace: bool = False) -> np.ndarray:
    """The cohort's queries for one round, (clients, B): without replacement within the round.

    With ``replace`` the queries are drawn with replacement (allowed when a round needs
    more queries than the split has).
    """
    if replace:
        return rng.integers(0, n_queries, size=(clients, queries_per_client), dtype=np.int64)
    check_without_replacement(n_queries, clients, queries_per_client)
    need = clients * queries_per_client
    return rng.choice(n_queries, size=need, replace=False).astype(np.int64).reshape(clients, queries_per_client)


def check_without_replacement(n_queries: int, clients: int, queries_per_client: int) -> None:
    need = clients * queries_per_client
    if need > n_queries:
        raise ParameterError("queries_per_client", f"{clients} clients x {queries_per_client} queries = {need} "
                                                   f"exceed the {n_queries} training queries of a round without "
                                                   "replacement (sample with replacement: replace)")


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


class RoundSchedule:
    """The cohorts and queries of a run's rounds, drawn round by round (``next_round``), and the
    participations they realized (``participation``)."""

    def __init__(self, settings: TrainSettings, train_data: Dataset):
        if train_data.n_queries < 1:
            raise ParameterError("data", "the training split has no queries")
        self.settings, self.n_queries = settings, train_data.n_queries
        non_iid = settings.non_iid
        check_buildable(non_iid, self.n_queries)
        self.fixed_cohort = settings.population is None and non_iid.setting == "iid"
        if self.fixed_cohort and not settings.replace:
            check_without_replacement(self.n_queries, settings.clients, settings.queries_per_client)
        self.home_sets = (query_sets(train_data.labels, train_data.query_ptr, non_iid.sets)
                          if non_iid.setting == "label-skew" else None)
        self.client_ids = np.arange(settings.clients, dtype=np.int64)
        self.visits = Participations(settings.users)  # the participations so far of the users who took part

    def next_round(self, r: int) -> tuple[np.ndarray, np.ndarray]:
        """Round ``r``'s (client ids, queries (clients, B)); call once per round, in order."""
        s = self.settings
        if self.fixed_cohort:
            return self.client_ids, sample_queries(self.n_queries, s.clients, s.queries_per_client,
                                                   stream(s.seed, "queries", r), s.replace)
        if s.non_iid.setting == "data-quantity":
            self.client_ids = weighted_cohort(s.users, s.clients, s.non_iid.alpha, stream(s.seed, "cohort", r))
        elif s.population is not None:
            self.client_ids = cohort(s.seed, r, s.clients, s.population)
        visits = self.visits.of(self.client_ids)
        if self.home_sets is not None:
            queries = skewed_queries(s.seed, s.non_iid, self.client_ids, visits, s.queries_per_client,
                                     *self.home_sets)
        else:
            queries = user_queries(s.seed, self.client_ids, visits, s.queries_per_client, self.n_queries)
        self.visits.add(self.client_ids)
        return self.client_ids, queries

    def participation(self) -> dict:
        """The run config's participation figures (empty for a fixed IID cohort)."""
        s = self.settings
        counts = {"rounds_participated_max": self.visits.max(), "rounds_participated_mean": self.visits.mean()}
        out: dict = {}
        if s.population is not None:
            out.update(population=int(s.population), sampling_rate=s.clients / s.population, **counts)
        if s.non_iid.setting != "iid":
            out.update(non_iid=s.non_iid.name, **counts)
        return out
