"""The CSR-style learning-to-rank data set (DESIGN.md, Core types)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from fltr_audit.constraints import ParameterError


@dataclass(frozen=True)
class Dataset:
    """Queries with their candidate documents, stored row-contiguously per query.

    Attributes
    ----------
    features : ndarray of float32, shape (n_docs, n_features)
        Feature vectors; the rows of query ``i`` are ``query_ptr[i]:query_ptr[i+1]``.
    labels : ndarray of int8, shape (n_docs,)
        Graded relevance labels ``0 .. n_levels - 1``.
    query_ptr : ndarray of int64, shape (n_queries + 1,)
        CSR offsets of each query's rows.
    qids : ndarray of int64, shape (n_queries,)
        The query identifiers of the source file.
    n_levels : int
        Number of relevance levels (3 for MQ2007/MQ2008, 5 for MSLR, Yahoo, Istella).
    name : str
        Where the data came from (a path or ``synthetic:PROFILE``), for reports.
    doc_ids : ndarray of str or None, shape (n_docs,)
        Document identifiers from the source comments, where present.
    """

    features: np.ndarray
    labels: np.ndarray
    query_ptr: np.ndarray
    qids: np.ndarray
    n_levels: int
    name: str = ""
    doc_ids: np.ndarray | None = None

    @property
    def n_queries(self) -> int:
        return len(self.query_ptr) - 1

    @property
    def n_docs(self) -> int:
        return int(self.features.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.features.shape[1])

    @property
    def docs_per_query(self) -> np.ndarray:
        """Number of candidate documents of each query, shape (n_queries,)."""
        return np.diff(self.query_ptr)

    @cached_property
    def padded_rows(self) -> np.ndarray:
        """Row indices of each query's documents padded with -1, shape (n_queries, max_docs).

        The dense layout that vectorized code over queries works on.
        """
        counts = self.docs_per_query
        width = int(counts.max()) if len(counts) else 0
        cols = np.arange(width)
        rows = self.query_ptr[:-1, None] + cols[None, :]
        return np.where(cols[None, :] < counts[:, None], rows, -1)

    def query_rows(self, i: int) -> slice:
        """The row slice of query ``i``."""
        return slice(int(self.query_ptr[i]), int(self.query_ptr[i + 1]))

    def query_range(self, q0: int, q1: int) -> "Dataset":
        """Queries ``q0 .. q1 - 1`` as views of this data set's arrays (nothing copied)."""
        lo, hi = int(self.query_ptr[q0]), int(self.query_ptr[q1])
        return Dataset(
            features=self.features[lo:hi],
            labels=self.labels[lo:hi],
            query_ptr=self.query_ptr[q0:q1 + 1] - lo,
            qids=self.qids[q0:q1],
            n_levels=self.n_levels,
            name=self.name,
            doc_ids=None if self.doc_ids is None else self.doc_ids[lo:hi],
        )

    def subset(self, query_indices: np.ndarray) -> "Dataset":
        """A data set holding only the given queries, in the given order: views of this one's
        arrays when they are consecutive, copies otherwise."""
        query_indices = np.asarray(query_indices, dtype=np.int64)
        if len(query_indices) and (np.diff(query_indices) == 1).all():
            return self.query_range(int(query_indices[0]), int(query_indices[-1]) + 1)
        counts = self.docs_per_query[query_indices]
        ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        starts = self.query_ptr[query_indices]
        rows = np.repeat(starts - ptr[:-1], counts) + np.arange(ptr[-1])
        return Dataset(
            features=self.features[rows],
            labels=self.labels[rows],
            query_ptr=ptr,
            qids=self.qids[query_indices],
            n_levels=self.n_levels,
            name=self.name,
            doc_ids=None if self.doc_ids is None else self.doc_ids[rows],
        )


@dataclass(frozen=True)
class Splits:
    """One fold of a data set: the train, validation and test splits."""

    train: Dataset
    vali: Dataset
    test: Dataset
    fold: int = 1

    def get(self, split: str) -> Dataset:
        """The split named ``train``, ``vali`` or ``test``."""
        if split not in ("train", "vali", "test"):
            raise ParameterError("split", f"unknown split {split!r} (choose train, vali or test)")
        return getattr(self, split)
