"""A Flower client mod that records what the server receives, in the open recording format.

Add it first in a ClientApp's mods (the outermost mod sees the reply as it leaves the client,
after every other mod -- LocalDpMod's noise, clipping -- has run)::

    recorder = RecordingMod("recording/")
    app = ClientApp(mods=[recorder, LocalDpMod(...)])

Each train reply becomes a one-round recording in its own folder,
``recording/round-RRRRRR-client-CCCCCC/`` (processes of a simulation or a deployment never share
a file); ``fltr-audit attack recording/`` attacks them all. Recorded: the model served (the one
``ArrayRecord`` of the message, flattened), the reply's arrays (the message), ``num-examples``,
and -- from ClientApps of ours, which attach them -- the shown lists (reply ``ConfigRecord``
``fltr.shown``) and the clicks (``context.state["fltr.truth"]``, written only to the truth file).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable

import numpy as np
from flwr.app import Context, Error, Message, MessageType

from fltr_audit.engine.data.dataset import Dataset
from fltr_audit.flower.convert import (SHOWN, TRUTH, client_id, flat, only_array_record, reply_messages,
                                       served_round, unpack)
from fltr_audit.engine.messages import GroundTruth, Interactions, RoundBatch, ServerView
from fltr_audit.engine.rankers import LinearRanker
from fltr_audit.store.recording import RecordingHeader, RecordingWriter

NO_ARRAYS = 4100
"""Flower error code of a reply the mod cannot record (it carries no arrays)."""


class RecordingMod:
    """``mod(msg, context, call_next)`` recording every train reply under ``folder``.

    Parameters
    ----------
    folder : path
    rounds : set of int or None
        Server rounds to record (``config["server-round"]`` of the message); None: all.
    algorithm, defense : str
        Declared in each recording's manifest.
    ranker : object or None
        The model architecture (``fltr_audit.engine.rankers``); None: a linear model over the flattened
        parameters.
    documents : Dataset, or a function returning one, or None
        The documents the shown lists index (the server owns them); None: nothing shown is recorded.
    reply_holds : {"weights", "update", "seed+metric"}
        What the reply's arrays are: the local model (Flower's convention), an update, or a public
        seed and metric values (``seed`` and ``metric`` arrays, FOLtR-ES).
    """

    def __init__(self, folder: str | os.PathLike, *, rounds: set[int] | None = None, algorithm: str = "unknown",
                 defense: str = "none", ranker: Any = None, documents: Dataset | Callable[[], Dataset] | None = None,
                 reply_holds: str = "weights"):
        self.folder = Path(folder)
        self.rounds = rounds
        self.header = RecordingHeader(producer="fltr_audit.flower RecordingMod", algorithm=algorithm, defense=defense)
        self.ranker = ranker
        self.documents = documents
        self.reply_holds = reply_holds

    def __call__(self, msg: Message, context: Context, call_next: Callable[[Message, Context], Message]) -> Message:
        if msg.metadata.message_type != MessageType.TRAIN:
            return call_next(msg, context)
        served, round_ = served_round(msg.content)
        reply = call_next(msg, context)
        if reply.has_error() or (self.rounds is not None and round_ not in self.rounds):
            return reply
        arrays = only_array_record(reply.content)
        if arrays is None or served is None:
            side = "reply" if arrays is None else "message from the server"
            return Message(Error(code=NO_ARRAYS, reason=f"fltr-audit RecordingMod: the {side} carries no arrays, "
                                                          f"nothing to record (round {round_})"), reply_to=msg)
        client = client_id(msg, context)
        self._write(round_, client, flat(served), reply, context)
        return reply

    def _write(self, round_: int, client: int, served: np.ndarray, reply: Message, context: Context) -> None:
        messages = reply_messages([reply.content], self.reply_holds)
        vector = None if messages.vector is None else messages.vector[0]
        ranker = self.ranker or LinearRanker(len(served))
        documents = self.documents() if callable(self.documents) else self.documents
        shown_record = reply.content.config_records.get(SHOWN)
        truth_record = context.state.config_records.get(TRUTH)
        interactions, clicks = None, np.zeros((1, 0, 0), dtype=bool)
        if documents is not None and shown_record is not None and truth_record is not None:
            interactions = Interactions(unpack(shown_record, "queries"), unpack(shown_record, "shown"))
            clicks = unpack(truth_record, "clicks").astype(bool)
        ids = np.array([client], dtype=np.int64)
        view = ServerView(round=round_, threat_model="server" if interactions is not None else "server-blind",
                          global_params=served, ranker=ranker, participants=ids, dropouts=np.empty(0, np.int64),
                          messages=messages, aggregate=vector,
                          aggregate_kind="update" if self.reply_holds == "update" else "weights",
                          interactions=interactions,
                          documents=documents if interactions is not None else None)
        folder = self.folder / f"round-{round_:06d}-client-{client:06d}"
        if folder.exists():
            folder = folder.with_name(f"{folder.name}-{reply.metadata.message_id[:12] or os.getpid()}")
        RecordingWriter(folder, self.header).write(RoundBatch(view=view, truth=GroundTruth(clicks=clicks,
                                                                                            client_ids=ids)))
