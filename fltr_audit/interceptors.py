"""Interceptors on the channel: recording chosen rounds to disk for later attacks.

A recording is a directory: one ``batch-NNNNNN.npz`` (compressed) per kept round, written
as the round passes (memory stays bounded however long the run), plus one
``documents-N.npz`` per distinct split the views point to, written once. Ground truth is
stored in the same file under ``truth_*`` keys and comes back as the separate
``GroundTruth`` of each ``RoundBatch``.
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from fltr_audit.atomic import write_with
from fltr_audit.data.dataset import Dataset
from fltr_audit.errors import FltrError
from fltr_audit.messages import GroundTruth, Interactions, Messages, RoundBatch, ServerView
from fltr_audit.rankers import LinearRanker, MLPRanker


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
        raise FltrError(f"--record-rounds: expected rounds like '1,50,100' or 'every:10', got {spec!r}") from None
    if text.startswith("every:"):
        if total is not None and step > total:
            raise FltrError(f"--record-rounds {spec}: records no round of --rounds {total}")
        return lambda r: r % step == 0
    if total is not None and max(kept) > total:
        raise FltrError(f"--record-rounds {spec}: round {max(kept)} is beyond --rounds {total}")
    return lambda r: r in kept


class RecordingInterceptor:
    """Keeps the rounds selected by ``rounds`` (see ``parse_rounds``) in the directory ``path``."""

    def __init__(self, path: str | os.PathLike, rounds: str = "every:1"):
        self.path = Path(path)
        self.keep = parse_rounds(rounds)
        self.path.mkdir(parents=True, exist_ok=True)
        if any(self.path.glob("batch-*.npz")):
            raise FltrError(f"--record-rounds: {self.path} already holds a recording")
        self._documents: dict[int, str] = {}
        self._count = 0

    def _documents_file(self, data: Dataset | None) -> str:
        if data is None:
            return ""
        if id(data) not in self._documents:
            name = f"documents-{len(self._documents)}.npz"
            arrays = {"features": data.features, "labels": data.labels, "query_ptr": data.query_ptr,
                      "qids": data.qids, "n_levels": data.n_levels, "name": data.name}
            if data.doc_ids is not None:
                arrays["doc_ids"] = data.doc_ids.astype(str)
            write_with(self.path / name, lambda fh: np.savez_compressed(fh, **arrays))
            self._documents[id(data)] = name
        return self._documents[id(data)]

    def __call__(self, batch: RoundBatch) -> None:
        view, truth = batch.view, batch.truth
        if not self.keep(view.round):
            return
        ranker = view.ranker
        arrays: dict = {
            "round": view.round, "threat_model": view.threat_model, "global_params": view.global_params,
            "ranker": ranker.name, "n_features": ranker.n_features, "hidden": getattr(ranker, "hidden", 0),
            "participants": view.participants, "dropouts": view.dropouts,
            "documents": self._documents_file(view.documents),
            "truth_clicks": truth.clicks, "truth_client_ids": truth.client_ids,
        }
        if view.aggregate is not None:
            arrays["aggregate"] = view.aggregate
            arrays["aggregate_kind"] = view.aggregate_kind
        if view.interactions is not None:
            arrays["queries"] = view.interactions.queries
            arrays["shown"] = view.interactions.shown
        m = view.messages
        if m is not None:
            arrays["msg_n_interactions"] = m.n_interactions
            arrays["msg_vector_kind"] = m.vector_kind
            for key in ("vector", "seed", "metric"):
                if getattr(m, key) is not None:
                    arrays[f"msg_{key}"] = getattr(m, key)
        for key, value in truth.private.items():
            arrays[f"truth_private_{key}"] = value
        write_with(self.path / f"batch-{self._count:06d}.npz", lambda fh: np.savez_compressed(fh, **arrays))
        self._count += 1


_BATCH_KEYS = ("round", "threat_model", "global_params", "ranker", "n_features", "hidden", "participants",
               "dropouts", "documents", "truth_clicks", "truth_client_ids")
_DOCUMENT_KEYS = ("features", "labels", "query_ptr", "qids", "n_levels", "name")


def _read_npz(path: Path, required: tuple[str, ...]) -> dict:
    """Every array of the ``.npz`` at ``path``; FltrError naming the file when it is missing,
    empty, truncated, not an ``.npz`` of plain arrays, or lacks a ``required`` key."""
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {key: z[key] for key in z.files}
    except FileNotFoundError:
        raise FltrError(f"{path}: missing from the recording") from None
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, KeyError) as exc:
        reason = " ".join(str(exc).split()) or type(exc).__name__
        raise FltrError(f"{path}: not a readable recording file, empty or truncated ({reason[:120]})") from None
    missing = [key for key in required if key not in arrays]
    if missing:
        raise FltrError(f"{path}: not a recording file, missing {', '.join(missing)}")
    return arrays


def _load_documents(path: Path) -> Dataset:
    z = _read_npz(path, _DOCUMENT_KEYS)
    return Dataset(features=z["features"], labels=z["labels"], query_ptr=z["query_ptr"], qids=z["qids"],
                   n_levels=int(z["n_levels"]), name=str(z["name"]), doc_ids=z.get("doc_ids"))


def load_recording(path: str | os.PathLike) -> Iterator[RoundBatch]:
    """The recorded rounds of ``path`` as ``RoundBatch`` objects, in recording order."""
    root = Path(path)
    if not root.is_dir():
        raise FltrError(f"{root}: not a recording directory")
    documents: dict[str, Dataset] = {}
    for file in sorted(root.glob("batch-*.npz")):
        a = _read_npz(file, _BATCH_KEYS)
        hidden = int(a["hidden"])
        ranker = (MLPRanker(int(a["n_features"]), hidden) if str(a["ranker"]) == "mlp"
                  else LinearRanker(int(a["n_features"])))
        doc_file = str(a["documents"])
        if doc_file and doc_file not in documents:
            documents[doc_file] = _load_documents(root / doc_file)
        messages = None
        if "msg_n_interactions" in a:
            messages = Messages(n_interactions=a["msg_n_interactions"], vector=a.get("msg_vector"),
                                vector_kind=str(a["msg_vector_kind"]), seed=a.get("msg_seed"),
                                metric=a.get("msg_metric"))
        view = ServerView(
            round=int(a["round"]), threat_model=str(a["threat_model"]), global_params=a["global_params"],
            ranker=ranker, participants=a["participants"], dropouts=a["dropouts"], messages=messages,
            aggregate=a.get("aggregate"), aggregate_kind=str(a.get("aggregate_kind", "weights")),
            interactions=Interactions(a["queries"], a["shown"]) if "shown" in a else None,
            documents=documents.get(doc_file),
        )
        private = {key[len("truth_private_"):]: v for key, v in a.items() if key.startswith("truth_private_")}
        yield RoundBatch(view=view, truth=GroundTruth(clicks=a["truth_clicks"], client_ids=a["truth_client_ids"],
                                                      private=private))
