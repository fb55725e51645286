"""The public entry to data: a spec string to the splits of one fold, and ``data info``."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from urllib.parse import parse_qsl

import numpy as np

from fltr_audit.engine.data.cache import cached_read, cached_synthetic
from fltr_audit.engine.data.dataset import Dataset, Splits
from fltr_audit.engine.data.letor import read_letor
from fltr_audit.engine.data.normalize import (
    check_normalization, drop_single_label as _drop, query_minmax, zscore, zscore_stats,
)
from fltr_audit.engine.data.synthetic import GENERATOR_VERSION, fold_split, generate, profile
from fltr_audit.constraints import POSITIVE_INT, Interval, ParameterError, check
from fltr_audit.errors import FltrError

SPLITS = ("train", "vali", "test")
FOLD = (Interval(int, 1, 5),)
"""A LETOR fold: 1 .. 5."""
_SUFFIXES = (".txt", ".txt.gz", ".gz", "")


def load_splits(
    spec: str | os.PathLike,
    fold: int = 1,
    normalization: str = "none",
    drop_single_label: bool = False,
    queries: int | None = None,
    seed: int = 0,
    *,
    cache: bool = True,
) -> Splits:
    """Load fold ``fold`` of the data set named by ``spec``.

    Parameters
    ----------
    spec : str
        One of

        * a folder with ``Fold1`` .. ``Fold5``, each holding ``train``, ``vali`` and ``test``
          (``.txt`` or ``.txt.gz``) — the MQ2007 / MQ2008 / MSLR-WEB layout;
        * a folder holding ``train``, ``vali`` and ``test`` directly (only fold 1);
        * a single LETOR file: its queries are cut in five parts in file order and rotated
          as LETOR does (fold k: train S_k..S_k+2, vali S_k+3, test S_k+4);
        * ``synthetic:PROFILE`` (``mq2007``, ``mq2008``, ``mslr10k``, ``yahoo``, ``istella``),
          generated in memory with ``seed`` and split the same way. The size is the
          ``queries`` argument or ``synthetic:PROFILE?queries=N`` (for options such as
          ``--data`` that take only a spec); the default is the profile's own
          (``mq2008``: 784 queries, like the real set).
    fold : int
        1..5.
    normalization : {"none", "query-minmax", "zscore"}
        See :mod:`fltr_audit.engine.data.normalize` (zscore statistics come from the train split).
    drop_single_label : bool
        Drop queries whose documents all share one label, from every split, before
        normalizing (FedIPS).
    queries : int, optional
        Synthetic: the number of queries generated. Files: keep at most this many queries
        of each split (the first ones in file order), for quick runs.
    seed : int
        Seed of synthetic data (files ignore it).
    cache : bool
        Use the binary cache of parsed files (:mod:`fltr_audit.engine.data.cache`).

    Returns
    -------
    Splits
        ``train``, ``vali``, ``test`` with a common ``n_levels`` (largest label of the three
        plus one, or the profile's levels) and feature count.
    """
    spec = str(spec)
    check_normalization(normalization)
    check("fold", fold, FOLD)
    check("queries", queries, (POSITIVE_INT[0], None))
    # every array below is this call's own (fresh, or a copy-on-write mapping): normalized in place
    if spec.startswith("synthetic:"):
        name, n = _synthetic_spec(spec, queries)
        splits = fold_split(_synthetic(name, n, seed, cache), int(fold))
    else:
        splits = _file_splits(spec, int(fold), cache)
        if queries is not None:
            splits = Splits(*(_head(s, int(queries)) for s in _parts(splits)), fold=splits.fold)
    if drop_single_label:
        splits = Splits(*(_drop(s) for s in _parts(splits)), fold=splits.fold)
    if normalization == "query-minmax":
        splits = Splits(*(query_minmax(s, inplace=True) for s in _parts(splits)), fold=splits.fold)
    elif normalization == "zscore":
        mean, std = zscore_stats(splits.train)
        splits = Splits(*(zscore(s, mean, std, inplace=True) for s in _parts(splits)), fold=splits.fold)
    return splits


def _synthetic(name: str, queries: int | None, seed: int, cache: bool) -> Dataset:
    """The synthetic set, from the cache when it is large (:func:`cached_synthetic`)."""
    if not cache:
        return generate(name, queries, seed)
    p = profile(name)
    n_bytes = int((p.default_queries if queries is None else queries) * p.docs_mean * p.n_features * 4)
    return cached_synthetic(name, queries, seed, lambda: generate(name, queries, seed), n_bytes,
                            GENERATOR_VERSION)


def _parts(splits: Splits) -> tuple[Dataset, Dataset, Dataset]:
    return splits.train, splits.vali, splits.test


def _head(ds: Dataset, n: int) -> Dataset:
    return ds if ds.n_queries <= n else ds.subset(np.arange(n))


def _synthetic_spec(spec: str, queries: int | None) -> tuple[str, int | None]:
    name, _, query = spec[len("synthetic:"):].partition("?")
    n = queries
    for key, value in parse_qsl(query, keep_blank_values=True):
        if key != "queries":
            raise ParameterError("data", f"{spec}: unknown option {key!r} (only queries=N)")
        try:
            from_spec = int(value)
        except ValueError:
            raise ParameterError("data", f"{spec}: queries must be an integer, got {value!r}") from None
        if n is not None and int(n) != from_spec:
            raise ParameterError("data", f"{spec}: asks for {from_spec} queries, which conflicts with queries={n}")
        n = from_spec
    return name, n


def _find(folder: Path, stem: str) -> Path | None:
    """``folder/stem{.txt,.txt.gz,.gz,}``: the first that exists; FltrError if it is not a file."""
    for suffix in _SUFFIXES:
        candidate = folder / f"{stem}{suffix}"
        if candidate.is_file():
            return candidate
        if candidate.exists() and suffix:
            raise FltrError(f"{candidate}: not a regular file (a folder?), expected LETOR text")
    return None


def _read(path: Path, cache: bool) -> Dataset:
    return cached_read(path, read_letor) if cache else read_letor(path)


def _layout(spec: str) -> tuple[str, Path]:
    """``("folds" | "splits" | "file", path)`` of a path spec; FltrError if unusable."""
    path = Path(spec).expanduser()
    if not path.exists():
        raise FltrError(f"{spec}: no such file or directory")
    if path.is_file():
        return "file", path
    if any((path / f"Fold{k}").is_dir() for k in range(1, 6)):
        return "folds", path
    if all(_find(path, s) for s in SPLITS):
        return "splits", path
    raise FltrError(f"{spec}: neither Fold1..Fold5 folders nor train/vali/test files inside")


def _split_files(folder: Path) -> list[Path]:
    files = [_find(folder, s) for s in SPLITS]
    missing = [s for s, f in zip(SPLITS, files) if f is None]
    if missing:
        raise FltrError(f"{folder}: no {', '.join(missing)} file (.txt or .txt.gz)")
    return files  # type: ignore[return-value]


def _file_splits(spec: str, fold: int, cache: bool) -> Splits:
    kind, path = _layout(spec)
    if kind == "file":
        return fold_split(_read(path, cache), fold)
    files = fold_files(spec, fold)
    return _harmonize([_read(f, cache) for f in files], files, fold)


def fold_files(spec: str, fold: int) -> list[Path]:
    """The LETOR files ``load_splits(spec, fold)`` reads for the path ``spec`` (one file, or the
    fold's train, vali and test files); FltrError or ParameterError as ``load_splits``."""
    kind, path = _layout(spec)
    if kind == "file":
        return [path]
    if kind == "splits" and fold != 1:
        raise ParameterError("fold", f"{spec} holds one split (train/vali/test), so its only fold is 1")
    if kind == "folds" and not (path / f"Fold{fold}").is_dir():
        raise ParameterError("fold", f"{spec} has no Fold{fold} folder")
    return _split_files(path if kind == "splits" else path / f"Fold{fold}")


def _harmonize(parts: list[Dataset], files: list[Path], fold: int) -> Splits:
    """Check the three splits have one feature count and give them one ``n_levels``."""
    width = max(p.n_features for p in parts)
    for part, f in zip(parts, files):
        if part.n_features != width:
            raise FltrError(f"{f}: {part.n_features} features, another split has {width}")
    levels = max(p.n_levels for p in parts)
    return Splits(*(replace(p, n_levels=levels) for p in parts), fold=fold)


def data_info(spec: str | os.PathLike, *, cache: bool = True) -> dict:
    """Sizes of a data set and of the splits of each of its folds (``fltr-audit data info``).

    The totals are those of the data set: for a 5-fold folder, the union of fold 1's
    train, vali and test (each fold holds every query once); ``queries_once_per_fold`` says
    whether that holds in every fold.
    """
    spec = str(spec)
    if spec.startswith("synthetic:"):
        kind, folds = "synthetic", list(range(1, 6))
    else:
        kind, path = _layout(spec)
        folds = [1] if kind == "splits" else list(range(1, 6))
        missing = [f"Fold{k}" for k in folds if kind == "folds" and not (path / f"Fold{k}").is_dir()]
        if missing:  # the totals and "every query once per fold" speak of all five folds
            raise FltrError(f"{spec}: a 5-fold folder without {', '.join(missing)}")
    per_fold = []
    once = True
    whole = None
    for k in folds:
        splits = load_splits(spec, fold=k, cache=cache)
        parts = _parts(splits)
        qids = np.concatenate([p.qids for p in parts])
        once = once and len(np.unique(qids)) == len(qids)
        per_fold.append({"fold": k, **{s: _summary(p) for s, p in zip(SPLITS, parts)}})
        if whole is None:
            whole = _concat(parts)
    assert whole is not None
    return {
        "spec": spec,
        "layout": kind,
        **_summary(whole),
        "levels": whole.n_levels,
        "queries_once_per_fold": bool(once),
        "folds": per_fold,
    }


def _concat(parts: tuple[Dataset, ...]) -> Dataset:
    counts = np.concatenate([p.docs_per_query for p in parts])
    return Dataset(
        features=np.concatenate([p.features for p in parts]),
        labels=np.concatenate([p.labels for p in parts]),
        query_ptr=np.r_[0, np.cumsum(counts)].astype(np.int64),
        qids=np.concatenate([p.qids for p in parts]),
        n_levels=parts[0].n_levels,
        name=parts[0].name,
    )


def _summary(ds: Dataset) -> dict:
    counts = ds.docs_per_query
    hist = np.bincount(ds.labels.astype(np.int64), minlength=ds.n_levels)
    return {
        "queries": ds.n_queries,
        "documents": ds.n_docs,
        "features": ds.n_features,
        "docs_per_query": {
            "min": int(counts.min()) if len(counts) else 0,
            "mean": float(counts.mean()) if len(counts) else 0.0,
            "max": int(counts.max()) if len(counts) else 0,
        },
        "labels": {str(level): int(c) for level, c in enumerate(hist)},
    }
