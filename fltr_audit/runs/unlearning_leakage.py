"""Click recovery from unlearning itself (issue 41, item 3): the project's click attacks run on what
unlearning shows the server, scored against the counterfactual as usual (``attacks.scoring``), with
a leakage verdict (``reports.leakage``). Two new threat models:

* ``server (before/after difference)`` -- the server that unlearned sees the model before and after.
  Each forgotten user (not a canary) becomes one message: the model after as the global model and
  the model before as the client's weights (their difference is the update an attack reads), with
  every list the user was shown in training (its participations' lists, one after the other) and its
  real clicks. An attack guesses those clicks from that one difference, as it would from a message.
* ``server (kept updates)`` -- the updates the server kept for unlearning (FedEraser's every
  ``interval`` rounds, PGA's last round): the forgotten users' messages of the kept rounds, attacked
  as the rounds they were (the server held them after the users asked to be forgotten).

The counterfactual clicks are the algorithm's click model redrawn on the same lists
(``Algorithm.redraw_clicks``, ``stream(seed, "unlearning-counterfactual", j)``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from attacks.registry import attack_spec, make_attack
from attacks.scoring import Slots, evaluate, summarize
from fltr_audit.engine.algorithms.registry import algorithm_spec
from fltr_audit.engine.messages import GroundTruth, Interactions, Messages, RoundBatch, ServerView
from fltr_audit.engine.randomness import stream
from fltr_audit.runs.probe_rounds import attack_params
from fltr_audit.spec.run import RunSpec
from reports.leakage import leakage_table, leakage_verdicts

DIFFERENCE = "server (before/after difference)"
KEPT = "server (kept updates)"
COUNTERFACTUAL_DRAWS = 20


@dataclass
class ForgottenRounds:
    """The interceptor that keeps, for scoring, the forgotten users' rows of every training round
    (ids, queries, shown lists, clicks; one block per round) and, of the ``kept`` rounds, the whole
    view restricted to them."""

    users: np.ndarray
    kept: frozenset = frozenset()
    blocks: list = field(default_factory=list)
    batches: list = field(default_factory=list)

    def __call__(self, batch: RoundBatch) -> None:
        view, truth = batch.view, batch.truth
        rows = np.flatnonzero(np.isin(truth.client_ids, self.users))
        if not len(rows) or view.interactions is None:
            return
        self.blocks.append((truth.client_ids[rows], view.interactions.queries[rows], view.interactions.shown[rows],
                            truth.clicks[rows]))
        if view.round in self.kept and view.messages is not None:
            self.batches.append(_rows_of(batch, rows))

    def lists(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Every kept participation, in round order: user ids (p,), queries (p, B), shown (p, B, k),
        clicks (p, B, k)."""
        return tuple(np.concatenate([b[i] for b in self.blocks]) for i in range(4))


def _rows_of(batch: RoundBatch, rows: np.ndarray) -> RoundBatch:
    """The round restricted to the clients at ``rows`` (their messages, lists and clicks)."""
    view, truth, m = batch.view, batch.truth, batch.view.messages
    messages = Messages(n_interactions=m.n_interactions[rows], vector=m.vector[rows], vector_kind=m.vector_kind)
    inter = Interactions(queries=view.interactions.queries[rows], shown=view.interactions.shown[rows])
    sub = ServerView(round=view.round, threat_model="server", global_params=view.global_params, ranker=view.ranker,
                     participants=view.participants[rows], dropouts=view.dropouts, messages=messages,
                     aggregate=None, interactions=inter, documents=view.documents, aggregate_kind=m.vector_kind)
    return RoundBatch(sub, GroundTruth(clicks=truth.clicks[rows], client_ids=truth.client_ids[rows]))


def difference_batches(record: ForgottenRounds, before: np.ndarray, after: np.ndarray, algorithm: Any, data: Any,
                       kind: str) -> list[RoundBatch]:
    """The before/after difference as one message per forgotten user (module docstring), one batch per
    number of participations (so no list is padded); empty when no forgotten user took part."""
    if not record.blocks:
        return []
    ids, queries, shown, clicks = record.lists()
    order = np.argsort(ids, kind="stable")  # each user's participations together, in round order
    users, first, count = np.unique(ids[order], return_index=True, return_counts=True)
    vector = before if kind == "weights" else before - after
    batches = []
    for j, c in enumerate(np.unique(count)):
        members = users[count == c]
        rows = order[(first[count == c][:, None] + np.arange(c)[None, :]).ravel()]
        n, b = len(members), c * queries.shape[1]
        messages = Messages(n_interactions=np.full(n, b), vector=np.tile(vector, (n, 1)), vector_kind=kind)
        inter = Interactions(queries=queries[rows].reshape(n, b), shown=shown[rows].reshape(n, b, -1))
        view = ServerView(round=j, threat_model="server", global_params=np.asarray(after, dtype=np.float64),
                          ranker=algorithm.ranker, participants=members, dropouts=np.empty(0, dtype=np.int64),
                          messages=messages, aggregate=None, interactions=inter, documents=data, aggregate_kind=kind)
        batches.append(RoundBatch(view, GroundTruth(clicks=clicks[rows].reshape(n, b, -1), client_ids=members)))
    return batches


def attack_rows(spec: RunSpec, algorithm: Any, stack: Any, batches: list[RoundBatch], data: Any,
                threat: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every default attack of the algorithm on ``batches``, scored against the real and the
    counterfactual clicks on the lists the probe settings keep (full lists of the algorithm's length
    at most): the ``attacks`` rows and the ``per_query`` rows, labelled ``threat``."""

    seed = spec.audit_seed(f"unlearning-{threat}") >> 1  # 63 bits: a valid seed
    cf = [algorithm.redraw_clicks(b.truth, b.view.interactions, data, COUNTERFACTUAL_DRAWS,
                                  stream(seed, "unlearning-counterfactual", j)) for j, b in enumerate(batches)]
    cell = {"run_key": "unlearning", "click_model": spec.algorithm.train_click_model, "defense": stack.name,
            "threat_model": threat, "probe_cohort": 0}
    rows, lists = [], []
    for name in algorithm_spec(spec.algorithm.name).default_attacks:
        attack = make_attack(name, **attack_params(name, spec, algorithm, stack))
        scored = [evaluate(attack.guess(b.view), b, counterfactual=c, min_shown=min(spec.probe.min_shown, algorithm.k),
                           require_click=spec.probe.require_click) for b, c in zip(batches, cf)]
        per_query = pd.concat([e.per_query for e in scored], ignore_index=True)
        slots = Slots.concat([e.slots for e in scored])
        for row in summarize(per_query, slots=slots):
            rows.append({**cell, "attack": name, "reference": attack_spec(name).reference, **row})
        lists.append(per_query.assign(**cell, attack=name))
    return pd.DataFrame(rows), pd.concat(lists, ignore_index=True)


@dataclass(frozen=True)
class LeakageVerdict:
    """The leakage verdict of one threat model: the deciding attack, its leakage (AUC real -
    counterfactual) and simultaneous upper bound, and the lists scored."""

    verdict: str
    attack: str
    leakage: float
    ci_high: float
    lists: int


NOTHING = LeakageVerdict("nothing to attack", "", float("nan"), float("nan"), 0)


def leakage_verdict(spec: RunSpec, algorithm: Any, stack: Any, batches: list[RoundBatch], data: Any,
                    threat: str) -> LeakageVerdict:
    """``leaks`` / ``no measurable leakage`` / ``inconclusive`` of the attacks on ``batches``
    (``reports.leakage.leakage_verdicts`` over the algorithm's informed attacks); NOTHING without batches."""
    if not batches:
        return NOTHING
    attacks, per_query = attack_rows(spec, algorithm, stack, batches, data, threat)
    table = leakage_table({"attacks": attacks, "per_query": per_query}, ["threat_model"])
    verdicts = leakage_verdicts(table, ["threat_model"])
    if verdicts.empty:
        return NOTHING
    v = verdicts.iloc[0]
    return LeakageVerdict(str(v["leakage_verdict"]), str(v.get("headline_attack") or ""),
                          float(v.get("leakage", np.nan)), float(v.get("leakage_ci_high", np.nan)),
                          int(v.get("n_lists", 0) or 0))
