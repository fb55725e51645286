"""Interceptors on the channel: recording chosen rounds to disk for later attacks.

The recording is written in the open recording format (``fltr_audit.store.recording``,
docs/recording-format.md) as the rounds pass, so memory stays bounded however long the run.
"""

from __future__ import annotations

import os
from typing import Callable

from fltr_audit import __version__
from fltr_audit.constraints import ParameterError
from fltr_audit.engine.messages import RoundBatch
from fltr_audit.store.recording import RecordingHeader, RecordingWriter


def check_record_rounds(spec: str | None, total: int, out: object) -> None:
    """Refuse ``--record-rounds`` that selects no round of ``total`` or has no ``--out`` to record into."""
    if spec is None:
        return
    parse_rounds(spec, total)
    if out is None:
        raise ParameterError("record_rounds", "the recording is written into --out's folder; give --out")


def parse_rounds(spec: str, total: int | None = None) -> Callable[[int], bool]:
    """``"1,50,100"`` (those rounds) or ``"every:K"`` (rounds K, 2K, ...) -> predicate on a round.

    With ``total`` (the run's rounds), a round beyond it, or a step that selects none, is an error."""
    text = spec.strip()
    try:
        if text.startswith("every:"):
            step = int(text[len("every:"):])
            if step < 1:
                raise ValueError
        else:
            kept = {int(v) for v in text.split(",")}  # an empty item ("1,,2") is a ValueError
            if min(kept) < 1:
                raise ValueError
    except ValueError:
        raise ParameterError("record_rounds", f"expected rounds like '1,50,100' or 'every:10', got {spec!r}") from None
    if text.startswith("every:"):
        if total is not None and step > total:
            raise ParameterError("record_rounds", f"{spec} records none of the {total} rounds")
        return lambda r: r % step == 0
    if total is not None and max(kept) > total:
        raise ParameterError("record_rounds", f"{spec}: round {max(kept)} is beyond the {total} rounds")
    return lambda r: r in kept


class RecordingInterceptor:
    """Keeps the rounds selected by ``rounds`` (see ``parse_rounds``) in the recording folder ``path``,
    declaring the run's ``algorithm`` and ``defense`` in its manifest."""

    def __init__(self, path: str | os.PathLike, rounds: str = "every:1", *, algorithm: str = "unknown",
                 defense: str = "none"):
        self.keep = parse_rounds(rounds)
        self.writer = RecordingWriter(path, RecordingHeader(producer=f"fltr-audit {__version__}",
                                                            algorithm=algorithm, defense=defense))

    def __call__(self, batch: RoundBatch) -> None:
        if self.keep(batch.view.round):
            self.writer.write(batch)
