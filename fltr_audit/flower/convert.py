"""Between Flower records and the engine's arrays: a model as one flat float64 vector, a client's
message as the reply's arrays (``params``, or ``seed`` + ``metric``), and the shown lists / ground
truth a ClientApp of ours attaches as ``ConfigRecord`` bytes."""

from __future__ import annotations

import numpy as np
from typing import Sequence

from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Message, RecordDict

from fltr_audit.engine.messages import Messages

PARAMS = "params"
"""The one array of the model ``ArrayRecord`` our apps exchange."""
CLIENT = "fltr.client"
"""Train-message config key of our ServerApps: the client the message is for (a SuperNode may serve
several clients, one message each)."""
SHOWN = "fltr.shown"
"""Reply ``ConfigRecord`` of our ClientApps: the queries issued and the documents shown (what the
server, which owns the documents, sees in the ``server`` threat model)."""
TRUTH = "fltr.truth"
"""``context.state`` ``ConfigRecord`` of our ClientApps: the clicks, for scoring only; never sent."""


def flat(record: ArrayRecord) -> np.ndarray:
    """All arrays of ``record`` in key order, flattened and concatenated, as float64."""
    parts = [np.asarray(a.numpy(), dtype=np.float64).ravel() for a in record.values()]
    return np.concatenate(parts) if parts else np.empty(0)


def model_record(params: np.ndarray) -> ArrayRecord:
    return ArrayRecord({PARAMS: Array(np.asarray(params, dtype=np.float64))})


def message_record(messages: Messages, row: int) -> ArrayRecord:
    """Client ``row``'s message as a reply's arrays: ``params`` (weights or update), or ``seed``
    (uint64, one) and ``metric`` (float64, B) for a seed+metric message (FOLtR-ES)."""
    if messages.vector is not None:
        return model_record(messages.vector[row])
    return ArrayRecord({"seed": Array(np.asarray(messages.seed[row:row + 1], dtype=np.uint64)),
                        "metric": Array(np.asarray(messages.metric[row], dtype=np.float64))})


def reply_messages(contents: Sequence[RecordDict], kind: str) -> Messages:
    """The ``Messages`` (kind ``weights``, ``update`` or ``seed+metric``) of replies in the given order:
    each reply's one ``ArrayRecord`` and the ``num-examples`` of its first ``MetricRecord`` (1 without)."""
    n_c = np.array([int(next(iter(c.metric_records.values()), {}).get("num-examples", 1)) for c in contents],
                   dtype=np.int64)
    records = [only_array_record(c) for c in contents]
    if kind == "seed+metric":
        return Messages(n_interactions=n_c, seed=np.concatenate([r["seed"].numpy() for r in records]).astype(np.uint64),
                        metric=np.stack([np.asarray(r["metric"].numpy(), dtype=np.float64) for r in records]))
    return Messages(n_interactions=n_c, vector=np.stack([flat(r) for r in records]), vector_kind=kind)


def only_array_record(content: RecordDict) -> ArrayRecord | None:
    """The reply's one ``ArrayRecord`` (None when it has none)."""
    records = list(content.array_records.values())
    return records[0] if records else None


def served_round(content: RecordDict) -> tuple[ArrayRecord | None, int]:
    """What a train message served (its one ``ArrayRecord``) and its ``server-round`` (0 if absent)."""
    config = next(iter(content.config_records.values()), {})
    return only_array_record(content), int(config.get("server-round", 0))


def pack(**arrays: np.ndarray) -> ConfigRecord:
    """int64 arrays as ``{name: bytes, name.shape: [dims]}``."""
    out: dict = {}
    for name, a in arrays.items():
        a = np.ascontiguousarray(a, dtype=np.int64)
        out[name] = a.tobytes()
        out[f"{name}.shape"] = [int(d) for d in a.shape]
    return ConfigRecord(out)


def unpack(record: ConfigRecord, name: str) -> np.ndarray:
    return np.frombuffer(record[name], dtype=np.int64).reshape(tuple(record[f"{name}.shape"]))


def client_id(msg: Message, context: Context) -> int:
    """The client a train message is for: its config's ``fltr.client`` (our ServerApps name it: a
    SuperNode may serve several clients), else the node's ``partition-id``, else its node id."""
    config = next(iter(msg.content.config_records.values()), {})
    if CLIENT in config:
        return int(config[CLIENT])
    return int(context.node_config.get("partition-id", context.node_id))
