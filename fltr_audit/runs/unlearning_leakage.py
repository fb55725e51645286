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
    (their lists and clicks) and, of the ``kept`` rounds, the whole view restricted to them."""

    users: np.ndarray
    kept: frozenset = frozenset()
    lists: dict = field(default_factory=dict)
    batches: list = field(default_factory=list)

    def __call__(self, batch: RoundBatch) -> None:
        view, truth = batch.view, batch.truth
        rows = np.flatnonzero(np.isin(truth.client_ids, self.users))
        if not len(rows) or view.interactions is None:
            return
        for row in rows:
            user = int(truth.client_ids[row])
            self.lists.setdefault(user, []).append((view.interactions.queries[row], view.interactions.shown[row],
                                                    truth.clicks[row]))
        if view.round in self.kept and view.messages is not None:
            self.batches.append(_rows_of(batch, rows))


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
    by_count: dict[int, list[int]] = {}
    for user in sorted(record.lists):
        by_count.setdefault(len(record.lists[user]), []).append(user)
    batches = []
    for j, count in enumerate(sorted(by_count)):
        users = by_count[count]
        parts = [record.lists[u] for u in users]
        queries = np.stack([np.concatenate([p[0] for p in part]) for part in parts])
        shown = np.stack([np.concatenate([p[1] for p in part]) for part in parts])
        clicks = np.stack([np.concatenate([p[2] for p in part]) for part in parts])
        vector = np.broadcast_to(before if kind == "weights" else before - after, (len(users), len(before))).copy()
        messages = Messages(n_interactions=np.full(len(users), queries.shape[1]), vector=vector, vector_kind=kind)
        ids = np.asarray(users, dtype=np.int64)
        view = ServerView(round=j, threat_model="server", global_params=np.asarray(after, dtype=np.float64),
                          ranker=algorithm.ranker, participants=ids, dropouts=np.empty(0, dtype=np.int64),
                          messages=messages, aggregate=None, interactions=Interactions(queries=queries, shown=shown),
                          documents=data, aggregate_kind=kind)
        batches.append(RoundBatch(view, GroundTruth(clicks=clicks, client_ids=ids)))
    return batches


def attack_rows(spec: RunSpec, algorithm: Any, stack: Any, batches: list[RoundBatch], data: Any,
                threat: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every default attack of the algorithm on ``batches``, scored against the real and the
    counterfactual clicks: the ``attacks`` rows and the ``per_query`` rows, labelled ``threat``."""
    from fltr_audit.engine.algorithms.registry import algorithm_spec

    seed = spec.audit_seed(f"unlearning-{threat}") >> 1  # 63 bits: a valid seed
    cf = [algorithm.redraw_clicks(b.truth, b.view.interactions, data, COUNTERFACTUAL_DRAWS,
                                  stream(seed, "unlearning-counterfactual", j)) for j, b in enumerate(batches)]
    cell = {"run_key": "unlearning", "click_model": spec.algorithm.train_click_model, "defense": stack.name,
            "threat_model": threat, "probe_cohort": 0}
    rows, lists = [], []
    for name in algorithm_spec(spec.algorithm.name).default_attacks:
        attack = make_attack(name, **attack_params(name, spec, algorithm, stack))
        scored = [evaluate(attack.guess(b.view), b, counterfactual=c, min_shown=spec.probe.min_shown,
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
