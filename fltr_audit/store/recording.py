"""The open recording format, version 1: what the server saw in each recorded round
(docs/recording-format.md, docs/recording.schema.json).

A recording is a folder::

    manifest.json               format, version, producer, algorithm, defense, ranker, documents, rounds
    batch-000001.npz            the server's view of one round: plain .npy arrays, no pickles
    truth-000001.npz            the round's ground truth (clicks); attacks never read it
    documents-0.npz             the documents the shown lists index (features, labels, query_ptr, qids)

Any producer may write it (this engine's ``train --record-rounds``, the Flower recording mod
and strategy wrapper in ``fltr_audit.flower``, or a program of its own); ``read_recording``
reads it back as ``RoundBatch`` objects. Reading never trusts the files
(``fltr_audit.base.untrusted_npz``): every ``.npy`` header of a file is read first, its dtypes and
shapes checked against the format, and the file's arrays, as held after widening, against
``MAX_FILE_BYTES`` and the machine's available memory, before a byte of data is decompressed;
float arrays holding NaN or infinite values are refused, and a file serves one round only.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from fltr_audit.base.atomic import write_file, write_with
from fltr_audit.constraints import ParameterError
from fltr_audit.engine.data.dataset import Dataset
from fltr_audit.errors import FltrError
from fltr_audit.engine.messages import THREAT_MODELS, GroundTruth, Interactions, Messages, RoundBatch, ServerView
from fltr_audit.engine.rankers import LinearRanker, MLPRanker
from fltr_audit.base.untrusted_npz import Rule, read_npz

FORMAT = "fltr-audit-recording"
VERSION = 1
MANIFEST = "manifest.json"
MAX_FILE_BYTES = 256 * 2**20
"""Largest total of the arrays of one file as held in memory (after widening: int8 declared,
int64 held costs 8 bytes an element); larger declarations are refused unread."""
MAX_MANIFEST_BYTES = 16 * 2**20
MESSAGE_KINDS = ("weights", "update", "seed+metric", "none")

# name -> (dtype kinds accepted, dtype held as, number of dimensions)
_ROUND_ARRAYS = {
    "global_params": Rule("f", np.float64, 1), "participants": Rule("iu", np.int64, 1),
    "dropouts": Rule("iu", np.int64, 1), "served_params": Rule("f", np.float64, 2),
    "n_interactions": Rule("iu", np.int64, 1), "vector": Rule("f", np.float64, 2), "seed": Rule("iu", np.uint64, 1),
    "metric": Rule("f", np.float64, 2), "aggregate": Rule("f", np.float64, 1), "queries": Rule("iu", np.int64, 2),
    "shown": Rule("iu", np.int64, 3),
}
_TRUTH_ARRAYS = {"clicks": Rule("bui", np.bool_, 3), "client_ids": Rule("iu", np.int64, 1)}
_DOCUMENT_ARRAYS = {"features": Rule("f", np.float32, 2), "labels": Rule("iu", np.int8, 1),
                    "query_ptr": Rule("iu", np.int64, 1), "qids": Rule("iu", np.int64, 1)}
_PRIVATE = {"private_": Rule("fbiu", None, None)}  # truth "private_*": any numeric array

# ----------------------------------------------------------------------------------------- writing

@dataclass(frozen=True)
class RecordingHeader:
    """What a recording says about the run as a whole (the manifest's top-level fields)."""

    producer: str
    algorithm: str
    defense: str


class RecordingWriter:
    """Writes rounds into the recording folder ``path`` as they pass; the manifest is rewritten
    (atomically) after each round, so the folder is a valid recording at every moment."""

    def __init__(self, path: str | os.PathLike, header: RecordingHeader):
        self.path = Path(path)
        self.header = header
        self.path.mkdir(parents=True, exist_ok=True)
        if (self.path / MANIFEST).exists() or any(self.path.glob("batch-*.npz")):
            raise ParameterError("record_rounds", f"{self.path} already holds a recording")
        self._documents: list[dict] = []
        self._documents_of: dict[int, int] = {}
        self._rounds: list[dict] = []
        self._ranker: dict | None = None

    def _documents_index(self, data: Dataset | None) -> int | None:
        if data is None:
            return None
        if id(data) not in self._documents_of:
            index = len(self._documents)
            name = f"documents-{index}.npz"
            arrays = {"features": data.features, "labels": data.labels, "query_ptr": data.query_ptr,
                      "qids": data.qids}
            write_with(self.path / name, lambda fh: np.savez_compressed(fh, **arrays))
            self._documents.append({"file": name, "name": data.name, "n_levels": int(data.n_levels)})
            self._documents_of[id(data)] = index
        return self._documents_of[id(data)]

    def write(self, batch: RoundBatch) -> None:
        view, truth = batch.view, batch.truth
        ranker = {"kind": view.ranker.name, "n_features": int(view.ranker.n_features),
                  "hidden": int(getattr(view.ranker, "hidden", 0))}
        self._ranker = self._ranker or ranker
        arrays: dict[str, Any] = {"global_params": view.global_params, "participants": view.participants,
                                  "dropouts": view.dropouts}
        if view.served_params is not None:
            arrays["served_params"] = view.served_params
        if view.aggregate is not None:
            arrays["aggregate"] = view.aggregate
        if view.interactions is not None:
            arrays["queries"], arrays["shown"] = view.interactions.queries, view.interactions.shown
        m = view.messages
        kind = "none"
        if m is not None:
            arrays["n_interactions"] = m.n_interactions
            kind = m.vector_kind if m.vector is not None else "seed+metric"
            for key in ("vector", "seed", "metric"):
                if getattr(m, key) is not None:
                    arrays[key] = getattr(m, key)
        truth_arrays = {"clicks": truth.clicks, "client_ids": truth.client_ids,
                        **{f"private_{k}": v for k, v in truth.private.items()}}
        number = len(self._rounds) + 1
        name, truth_name = f"batch-{number:06d}.npz", f"truth-{number:06d}.npz"
        write_with(self.path / truth_name, lambda fh: np.savez_compressed(fh, **truth_arrays))
        write_with(self.path / name, lambda fh: np.savez_compressed(fh, **arrays))
        self._rounds.append({"round": int(view.round), "file": name, "truth": truth_name,
                             "threat_model": view.threat_model, "messages": kind,
                             "aggregate_kind": view.aggregate_kind,
                             "documents": self._documents_index(view.documents)})
        self._write_manifest()

    def _write_manifest(self) -> None:
        manifest = {"format": FORMAT, "version": VERSION, "producer": self.header.producer,
                    "algorithm": self.header.algorithm, "defense": self.header.defense, "ranker": self._ranker,
                    "documents": self._documents, "rounds": self._rounds}
        write_file(self.path / MANIFEST, json.dumps(manifest, indent=1) + "\n")


# ----------------------------------------------------------------------------------------- reading

@dataclass(frozen=True)
class Manifest:
    """A recording's ``manifest.json``, checked (docs/recording.schema.json)."""

    producer: str
    algorithm: str
    defense: str
    ranker: dict
    documents: list[dict]
    rounds: list[dict]


def _field(obj: Any, key: str, types: type | tuple, where: str, source: Path) -> Any:
    if not isinstance(obj, dict) or key not in obj:
        raise FltrError(f"{source}: missing field {where}{key}")
    value = obj[key]
    if isinstance(value, bool) or not isinstance(value, types):
        raise FltrError(f"{source}: field {where}{key} has the wrong type ({type(value).__name__})")
    return value


def read_manifest(root: Path) -> Manifest:
    """The checked manifest of the recording folder ``root``: one-line FltrError naming the field."""
    source = root / MANIFEST
    if not source.is_file():
        if any(root.glob("batch-*.npz")):  # what train --record-rounds wrote before the manifest
            raise FltrError(f"{root}: a recording of format version 0 (batch-*.npz, no {MANIFEST}), which this "
                            f"version no longer reads; record the run again")
        raise FltrError(f"{root}: not a recording (no {MANIFEST})")
    if source.stat().st_size > MAX_MANIFEST_BYTES:
        raise FltrError(f"{source}: larger than {MAX_MANIFEST_BYTES:,} bytes, not a manifest")
    try:
        doc = json.loads(source.read_bytes())
    except (ValueError, RecursionError) as exc:
        raise FltrError(f"{source}: not valid JSON ({' '.join(str(exc).split())[:100]})") from None
    if not isinstance(doc, dict):
        raise FltrError(f"{source}: not a JSON object")
    if _field(doc, "format", str, "", source) != FORMAT:
        raise FltrError(f"{source}: field format is {doc['format']!r}, not {FORMAT!r}")
    version = _field(doc, "version", int, "", source)
    if version > VERSION:
        raise FltrError(f"{source}: field version is {version}, newer than this fltr-audit reads ({VERSION})")
    if version < 1:
        raise FltrError(f"{source}: field version is {version}, not a version of the format")
    ranker = _field(doc, "ranker", dict, "", source)
    kind = _field(ranker, "kind", str, "ranker.", source)
    if kind not in ("linear", "mlp"):
        raise FltrError(f"{source}: field ranker.kind is {kind!r}, not linear or mlp")
    for key in ("n_features", "hidden"):
        if not 0 <= _field(ranker, key, int, "ranker.", source) <= 100_000:
            raise FltrError(f"{source}: field ranker.{key} out of range")
    documents = _field(doc, "documents", list, "", source)
    named: dict[str, str] = {}  # each file serves one purpose: the work is bounded by the files there are
    for i, entry in enumerate(documents):
        _check_file(_field(entry, "file", str, f"documents[{i}].", source), f"documents[{i}].file", source, named)
        _field(entry, "name", str, f"documents[{i}].", source)
        _field(entry, "n_levels", int, f"documents[{i}].", source)
    rounds = _field(doc, "rounds", list, "", source)
    for i, entry in enumerate(rounds):
        at = f"rounds[{i}]."
        _field(entry, "round", int, at, source)
        _check_file(_field(entry, "file", str, at, source), at + "file", source, named)
        _check_file(_field(entry, "truth", str, at, source), at + "truth", source, named)
        if _field(entry, "threat_model", str, at, source) not in THREAT_MODELS:
            raise FltrError(f"{source}: field {at}threat_model is {entry['threat_model']!r}, not one of "
                            f"{', '.join(THREAT_MODELS)}")
        if _field(entry, "messages", str, at, source) not in MESSAGE_KINDS:
            raise FltrError(f"{source}: field {at}messages is {entry['messages']!r}, not one of "
                            f"{', '.join(MESSAGE_KINDS)}")
        if _field(entry, "aggregate_kind", str, at, source) not in ("weights", "update"):
            raise FltrError(f"{source}: field {at}aggregate_kind must be weights or update")
        index = _field(entry, "documents", (int, type(None)), at, source)
        if index is not None and not 0 <= index < len(documents):
            raise FltrError(f"{source}: field {at}documents = {index} names no entry of documents")
    return Manifest(producer=_field(doc, "producer", str, "", source), algorithm=_field(doc, "algorithm", str, "", source),
                    defense=_field(doc, "defense", str, "", source), ranker=ranker, documents=documents, rounds=rounds)


def _check_file(name: str, field_name: str, source: Path, named: dict[str, str]) -> None:
    """A file named in the manifest stays inside the recording folder and is named once (``named``:
    the files named so far, by real path, with the field that named each)."""
    parts = Path(name).parts
    if not name or Path(name).is_absolute() or ".." in parts:
        raise FltrError(f"{source}: field {field_name} = {name!r} is not a file inside the recording")
    real = os.path.realpath(source.parent / name)
    if real in named:
        raise FltrError(f"{source}: field {field_name} = {name!r} names the file of {named[real]} again "
                        "(a file serves one round, or one documents entry)")
    named[real] = field_name


def _shape_error(file: Path, name: str, shape: tuple, expected: str) -> FltrError:
    return FltrError(f"{file}: array {name!r} has shape {shape}, expected {expected}")


def _round_batch(root: Path, entry: dict, ranker: Any, documents: Dataset | None) -> RoundBatch:
    """One round, every shape checked against the others and the ranker."""
    file, truth_file = root / entry["file"], root / entry["truth"]
    a = read_npz(file, _ROUND_ARRAYS, ("global_params", "participants", "dropouts"), budget=MAX_FILE_BYTES)
    t = read_npz(truth_file, _TRUTH_ARRAYS, ("clicks", "client_ids"), _PRIVATE, budget=MAX_FILE_BYTES)
    P = ranker.n_params
    if a["global_params"].shape != (P,):
        raise _shape_error(file, "global_params", a["global_params"].shape, f"({P},), the ranker's parameters")
    n = len(a["participants"])
    kind = entry["messages"]
    for name, shape in (("served_params", (n, P)), ("vector", (n, P)), ("n_interactions", (n,)), ("seed", (n,)),
                        ("aggregate", (P,))):
        if name in a and a[name].shape != shape:
            raise _shape_error(file, name, a[name].shape, str(shape))
    needed = {"weights": ("n_interactions", "vector"), "update": ("n_interactions", "vector"),
              "seed+metric": ("n_interactions", "seed", "metric"), "none": ("aggregate",)}[kind]
    for name in needed:
        if name not in a:
            raise FltrError(f"{file}: missing array {name!r} (rounds[].messages is {kind!r})")
    if "metric" in a and len(a["metric"]) != n:
        raise _shape_error(file, "metric", a["metric"].shape, f"({n}, B)")
    interactions = None
    if ("shown" in a) != ("queries" in a):
        raise FltrError(f"{file}: missing array {'queries' if 'shown' in a else 'shown'!r}")
    if "shown" in a:
        q, s = a["queries"], a["shown"]
        if q.shape[0] != n or s.shape[:2] != q.shape:
            raise _shape_error(file, "shown", s.shape, f"({n}, B, k) with queries of shape (n, B) = {q.shape}")
        if documents is None:
            raise FltrError(f"{root / MANIFEST}: round {entry['round']} has shown lists but no documents entry")
        if q.size and not (0 <= q.min() and q.max() < documents.n_queries):
            raise FltrError(f"{file}: array 'queries' indexes queries outside the documents file")
        if s.size and not (-1 <= s.min() and s.max() < documents.n_docs):
            raise FltrError(f"{file}: array 'shown' indexes rows outside the documents file")
        interactions = Interactions(q, s)
    clicks = t["clicks"]
    if len(t["client_ids"]) != n or clicks.shape[0] != n or (interactions is not None
                                                              and clicks.shape != interactions.shown.shape):
        raise _shape_error(truth_file, "clicks", clicks.shape, "(n, B, k) as the round's shown lists")
    messages = None
    if kind != "none":
        messages = Messages(n_interactions=a["n_interactions"], vector=a.get("vector"),
                            vector_kind=kind if kind in ("weights", "update") else "weights",
                            seed=a.get("seed"), metric=a.get("metric"))
    view = ServerView(round=entry["round"], threat_model=entry["threat_model"], global_params=a["global_params"],
                      ranker=ranker, participants=a["participants"], dropouts=a["dropouts"], messages=messages,
                      aggregate=a.get("aggregate"), interactions=interactions,
                      documents=documents if interactions is not None else None,
                      aggregate_kind=entry["aggregate_kind"], served_params=a.get("served_params"))
    private = {k[len("private_"):]: v for k, v in t.items() if k.startswith("private_")}
    return RoundBatch(view=view, truth=GroundTruth(clicks=clicks, client_ids=t["client_ids"], private=private))


def _documents(root: Path, entry: dict, n_features: int) -> Dataset:
    file = root / entry["file"]
    d = read_npz(file, _DOCUMENT_ARRAYS, tuple(_DOCUMENT_ARRAYS), budget=MAX_FILE_BYTES)
    features, ptr = d["features"], d["query_ptr"]
    if features.shape[1] != n_features:
        raise _shape_error(file, "features", features.shape, f"(n_docs, {n_features}) as manifest ranker.n_features")
    if (len(ptr) != len(d["qids"]) + 1 or len(d["labels"]) != len(features) or ptr[0] != 0
            or ptr[-1] != len(features) or (np.diff(ptr) < 0).any()):
        raise FltrError(f"{file}: arrays 'query_ptr', 'qids', 'labels' and 'features' do not fit together")
    return Dataset(features=features, labels=d["labels"], query_ptr=ptr, qids=d["qids"], n_levels=entry["n_levels"],
                   name=entry["name"])


def read_recording(path: str | os.PathLike) -> Iterator[RoundBatch]:
    """The recorded rounds of the folder ``path`` as ``RoundBatch`` objects, in manifest order."""
    root = Path(path)
    if not root.is_dir():
        raise FltrError(f"{root}: not a recording directory")
    manifest = read_manifest(root)
    r = manifest.ranker
    ranker = MLPRanker(r["n_features"], r["hidden"]) if r["kind"] == "mlp" else LinearRanker(r["n_features"])
    loaded: dict[int, Dataset] = {}
    for entry in manifest.rounds:
        index = entry["documents"]
        if index is not None and index not in loaded:
            loaded[index] = _documents(root, manifest.documents[index], r["n_features"])
        yield _round_batch(root, entry, ranker, loaded.get(index))


def recording_folders(path: str | os.PathLike) -> list[Path]:
    """``path`` itself when it holds a recording, else its sub-folders that do (one per client,
    as the Flower recording mod writes), sorted; FltrError when there is none."""
    root = Path(path)
    if not root.is_dir():
        raise FltrError(f"{root}: not a recording directory")
    if (root / MANIFEST).exists() or any(root.glob("batch-*.npz")):
        return [root]
    found = sorted(p for p in root.iterdir() if p.is_dir() and (p / MANIFEST).is_file())
    if not found:
        raise FltrError(f"{root}: not a recording (no {MANIFEST}, here or in a sub-folder)")
    return found
