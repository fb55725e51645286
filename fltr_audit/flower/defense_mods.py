"""The project's client defenses Flower lacks (``dp-distributed``, ``rr``, any ``ClientDefense``) as
Flower client mods: ``DefenseMod(parse_defense("dp-distributed(eps=4.5)").client[0], cohort=n)``.

The mod applies the defense to the reply's arrays (flattened, as the engine's message vector) with
the model served as the global model, then writes them back in their shapes. Randomness:
``stream(seed, "defense", round, client)`` -- one stream per client, since a Flower client cannot
draw the engine's cohort-wide defense stream. A defense whose noise depends on the cohort size
(``dp-distributed``'s Gamma shares, variance 2 lambda^2 / n) gets it from ``cohort``: the row is
processed inside a cohort of that many identical rows and the first is kept.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
from flwr.app import Array, ArrayRecord, Context, Message, MessageType

from fltr_audit.flower.convert import client_id, flat, served_round
from fltr_audit.engine.messages import Messages
from fltr_audit.engine.randomness import stream


class DefenseMod:
    """``mod(msg, context, call_next)`` applying ``defense`` (a ``ClientDefense`` on vectors)."""

    def __init__(self, defense: Any, *, cohort: int = 1, seed: int = 0, reply_holds: str = "weights"):
        self.defense, self.cohort, self.seed, self.reply_holds = defense, int(cohort), int(seed), reply_holds

    def __call__(self, msg: Message, context: Context, call_next: Callable[[Message, Context], Message]) -> Message:
        if msg.metadata.message_type != MessageType.TRAIN:
            return call_next(msg, context)
        served, round_ = served_round(msg.content)
        reply = call_next(msg, context)
        key = next(iter(reply.content.array_records), None)
        if reply.has_error() or key is None or served is None:
            return reply
        record = reply.content.array_records[key]
        vector = flat(record)
        client = client_id(msg, context)
        rows = np.repeat(vector[None, :], self.cohort, axis=0)
        messages = Messages(n_interactions=np.ones(self.cohort, dtype=np.int64), vector=rows,
                            vector_kind=self.reply_holds)
        out = self.defense.apply(messages, flat(served), stream(self.seed, "defense", round_, client)).vector[0]
        arrays, at = {}, 0
        for name, array in record.items():
            shape, dtype = array.numpy().shape, array.numpy().dtype
            size = int(np.prod(shape))
            arrays[name] = Array(out[at:at + size].reshape(shape).astype(dtype))
            at += size
        reply.content[key] = ArrayRecord(arrays)
        return reply
