"""A server-side strategy wrapper recording what the server sees, in the open recording format.

``RecordingStrategy(FedAvg(...), "recording/")`` records every reply the server receives
(``sees="messages"``: what an honest-but-curious server reads) or only the model the strategy
aggregated from them (``sees="aggregate"``: what a server behind secure aggregation reads). It
wraps any Message-API ``Strategy`` -- Flower's DP wrappers included -- and is itself a Strategy.
The whole federation is one recording; each kept round is one batch. Replies carrying an error
are not recorded; their reasons are kept in ``errors``.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Iterable

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Message, MetricRecord
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Strategy

from fltr_audit.engine.data.dataset import Dataset
from fltr_audit.flower.convert import SHOWN, flat, only_array_record, reply_messages, unpack
from fltr_audit.engine.messages import GroundTruth, Interactions, RoundBatch, ServerView
from fltr_audit.engine.rankers import LinearRanker
from fltr_audit.store.recording import RecordingHeader, RecordingWriter

Truth = Callable[[int, np.ndarray, np.ndarray], np.ndarray]
"""``truth(round, served_params, participants) -> clicks (n, B, k)``: the evaluator's ground truth."""


class RecordingStrategy(Strategy):
    """Records the rounds ``rounds`` (None: all) of ``strategy`` in ``folder``; see the module."""

    def __init__(self, strategy: Strategy, folder: str | os.PathLike, *, sees: str = "messages",
                 rounds: set[int] | None = None, algorithm: str = "unknown", defense: str = "none",
                 ranker: Any = None, documents: Dataset | Callable[[], Dataset] | None = None,
                 truth: Truth | None = None, reply_holds: str = "weights"):
        if sees not in ("messages", "aggregate"):
            raise ValueError(f"sees must be 'messages' or 'aggregate', got {sees!r}")
        if sees == "aggregate" and reply_holds == "seed+metric":
            raise ValueError("sees='aggregate' records nothing of seed+metric messages (no aggregate of them)")
        self.strategy, self.sees, self.rounds = strategy, sees, rounds
        self.writer = RecordingWriter(folder, RecordingHeader(
            producer=f"fltr_audit.flower RecordingStrategy ({type(strategy).__name__}, sees {sees})",
            algorithm=algorithm, defense=defense))
        self.ranker, self.documents, self.truth = ranker, documents, truth
        self.reply_holds = reply_holds
        """What the replies' arrays are: ``weights``, ``update`` or ``seed+metric`` (``RecordingMod``)."""
        self.errors: list[str] = []
        self._served: dict[int, np.ndarray] = {}

    def configure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                        grid: Grid) -> Iterable[Message]:
        self._served[server_round] = flat(arrays)
        return self.strategy.configure_train(server_round, arrays, config, grid)

    def aggregate_train(self, server_round: int, replies: Iterable[Message]
                        ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        replies = list(replies)
        self.errors += [f"node {m.metadata.src_node_id}: {m.error.reason}" for m in replies if m.has_error()]
        arrays, metrics = self.strategy.aggregate_train(server_round, replies)
        ok = [m for m in replies if not m.has_error() and only_array_record(m.content) is not None]
        if ok and arrays is not None and (self.rounds is None or server_round in self.rounds):
            self._write(server_round, ok, flat(arrays))
        return arrays, metrics

    def _write(self, round_: int, replies: list[Message], next_model: np.ndarray) -> None:
        """One batch. The aggregate recorded is the model the strategy returned (weights), its step
        from the served model (update messages: the mean update times the server's learning rate), or
        none (seed+metric messages: the server's Adam step is no aggregate of them)."""
        served = self._served.pop(round_)
        aggregate = {"weights": next_model, "update": next_model - served}.get(self.reply_holds)

        def client(m: Message) -> int:
            shown = m.content.config_records.get(SHOWN)
            return int(shown["client"]) if shown is not None and "client" in shown else m.metadata.src_node_id

        replies = sorted(replies, key=client)  # rows in client order, whatever order the replies arrived in
        shown = [m.content.config_records.get(SHOWN) for m in replies]
        participants = np.array([client(m) for m in replies], dtype=np.int64)
        documents = self.documents() if callable(self.documents) else self.documents
        interactions = None
        if documents is not None and all(s is not None for s in shown):
            interactions = Interactions(np.concatenate([unpack(s, "queries") for s in shown]),
                                        np.concatenate([unpack(s, "shown") for s in shown]))
        if self.truth is not None and interactions is not None:
            clicks = np.asarray(self.truth(round_, served, participants), dtype=bool)
        else:
            interactions, clicks = None, np.zeros((len(replies), 0, 0), dtype=bool)
        messages = reply_messages([m.content for m in replies], self.reply_holds) if self.sees == "messages" else None
        view = ServerView(round=round_, threat_model="server" if interactions is not None else "server-blind",
                          global_params=served, ranker=self.ranker or LinearRanker(len(served)),
                          participants=participants, dropouts=np.empty(0, dtype=np.int64), messages=messages,
                          aggregate=aggregate, aggregate_kind="update" if self.reply_holds == "update" else "weights",
                          interactions=interactions,
                          documents=documents if interactions is not None else None)
        self.writer.write(RoundBatch(view=view, truth=GroundTruth(clicks=clicks, client_ids=participants)))

    def configure_evaluate(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                           grid: Grid) -> Iterable[Message]:
        return self.strategy.configure_evaluate(server_round, arrays, config, grid)

    def aggregate_evaluate(self, server_round: int, replies: Iterable[Message]) -> MetricRecord | None:
        return self.strategy.aggregate_evaluate(server_round, replies)

    def summary(self) -> None:
        self.strategy.summary()
