"""What crosses the channel in one round, split into what the server sees and what it must not.

A round of the federation produces, for a cohort of ``n`` clients that each issued ``B``
queries and were shown ``k`` documents per query:

* ``Messages`` -- the client payloads, one row per client (after client-side defenses);
* ``Interactions`` -- which queries were issued and which documents were shown;
* ``GroundTruth`` -- the clicks and other private data, read only by scoring;
* ``ServerView`` -- what a threat model lets the server see; the only input of an attack.

Document positions are row indices into the ``Dataset`` of the split the clients
searched; a shown slot that is empty (a query with fewer than ``k`` documents) holds -1.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal, Mapping, get_args

import numpy as np

from fltr_audit.engine.data.dataset import Dataset

VectorKind = Literal["weights", "update"]
"""What a message's parameter vector holds: full local weights or ``w_local - w_global``."""
MessageKind = Literal["weights", "update", "seed+metric", "none"]
"""What an algorithm's client sends (``none``: centralized or supervised baselines)."""
ThreatModel = Literal["server", "server-blind", "server-malicious", "server (shuffled)"]
"""The threat models a ``ServerView`` can have (DESIGN.md, Threat models)."""
THREAT_MODELS: tuple[str, ...] = get_args(ThreatModel)
SHUFFLED = "server (shuffled)"
"""The view behind an anonymous shuffler: the cohort's messages without their senders'
identities, in an order independent of the clients' (set by a shuffling aggregator)."""


@dataclass(frozen=True)
class Messages:
    """The payloads of one cohort, one row per client.

    Attributes
    ----------
    n_interactions : ndarray of int, shape (n,)
        n_c, the number of interactions behind each message (FedAvg weights).
    vector : ndarray of float64, shape (n, P), or None
        A parameter-sized vector: the full local weights (FPDGD) or the update
        ``w_local - w_global`` (FedIPS); which one is said by ``vector_kind``.
    vector_kind : {"weights", "update"}
    seed : ndarray of uint64, shape (n,), or None
        FOLtR-ES: the public seed of each client's perturbation.
    metric : ndarray of float64, shape (n, B), or None
        FOLtR-ES: the (possibly privatized) metric value of each interaction; the first
        B/2 columns belong to +sigma v_s, the last B/2 to -sigma v_s when antithetic.
    """

    n_interactions: np.ndarray
    vector: np.ndarray | None = None
    vector_kind: VectorKind = "weights"
    seed: np.ndarray | None = None
    metric: np.ndarray | None = None

    @property
    def n_clients(self) -> int:
        return int(len(self.n_interactions))

    def replace(self, **changes: Any) -> "Messages":
        """A copy with ``changes`` applied (what a defense returns)."""
        return dataclasses.replace(self, **changes)

    def updates(self, global_params: np.ndarray) -> np.ndarray:
        """The vector as an update relative to the global model, shape (n, P)."""
        if self.vector is None:
            raise ValueError("these messages carry no parameter vector")
        return self.vector - global_params if self.vector_kind == "weights" else self.vector

    def weights(self, global_params: np.ndarray) -> np.ndarray:
        """The vector as the clients' full local weights, shape (n, P)."""
        if self.vector is None:
            raise ValueError("these messages carry no parameter vector")
        return self.vector if self.vector_kind == "weights" else self.vector + global_params

    def with_updates(self, updates: np.ndarray, global_params: np.ndarray) -> "Messages":
        """The same messages with the vector replaced by ``updates`` (in the original kind)."""
        vector = updates + global_params if self.vector_kind == "weights" else updates
        return self.replace(vector=vector)

    def with_weights(self, weights: np.ndarray, global_params: np.ndarray) -> "Messages":
        """The same messages with the vector replaced by full ``weights`` (in the original kind)."""
        vector = weights if self.vector_kind == "weights" else weights - global_params
        return self.replace(vector=vector)


@dataclass(frozen=True)
class Interactions:
    """What each client searched and was shown.

    Attributes
    ----------
    queries : ndarray of int64, shape (n, B)
        Query indices into the split's ``Dataset``.
    shown : ndarray of int64, shape (n, B, k)
        Row indices of the shown documents, top first; -1 marks an empty slot.
    """

    queries: np.ndarray
    shown: np.ndarray

    @property
    def mask(self) -> np.ndarray:
        """True where a document was shown, shape (n, B, k)."""
        return self.shown >= 0


@dataclass(frozen=True)
class GroundTruth:
    """The private side of a round: only scoring reads it.

    Attributes
    ----------
    clicks : ndarray of bool, shape (n, B, k)
        The simulated clicks on each shown slot (False on empty slots).
    client_ids : ndarray of int64, shape (n,)
    private : mapping of str to ndarray
        Further private per-client data an attack might try to recover (for example
        FOLtR-ES's unprivatized metric values or FedIPS users' position-bias factors).
    """

    clicks: np.ndarray
    client_ids: np.ndarray
    private: Mapping[str, np.ndarray] = field(default_factory=dict)


@dataclass(frozen=True)
class ServerView:
    """What the server sees of one round under a threat model (DESIGN.md, Threat models).

    Attributes
    ----------
    round : int
    threat_model : {"server", "server-blind", "server-malicious", "server (shuffled)"}
        Under ``server-malicious`` (``fltr_audit.engine.malicious``) the first participant is the
        target and ``interactions`` holds the target's lists only.
    global_params : ndarray of float64, shape (P,)
        The global model the cohort started from.
    ranker : object
        The public model architecture (see ``fltr_audit.engine.rankers``).
    participants : ndarray of int64
        Client ids of the cohort.
    dropouts : ndarray of int64
        Client ids that dropped out (secure aggregation).
    messages : Messages or None
        Each client's message; None when secure aggregation hides them. Under
        ``server (shuffled)`` row i is *some* participant's message: the rows are in an order
        independent of ``participants`` and ``interactions`` (an attack must link them first).
    aggregate : ndarray of float64, shape (P,), or None
        The n_c-weighted mean of the cohort's vectors, where messages carry vectors.
    interactions : Interactions or None
        Queries and shown lists; None under ``server-blind``.
    documents : Dataset or None
        The split whose rows ``interactions`` index (the server owns the documents);
        None under ``server-blind``.
    aggregate_kind : {"weights", "update"}
        What ``aggregate`` averages (the messages' ``vector_kind``); attacks need it when
        secure aggregation hides the messages.
    served_params : ndarray (n, P) or None
        ``server-malicious`` only: the model the server served each member (participants'
        order, the target first); None when every member got ``global_params``.
    """

    round: int
    threat_model: ThreatModel
    global_params: np.ndarray
    ranker: Any
    participants: np.ndarray
    dropouts: np.ndarray
    messages: Messages | None
    aggregate: np.ndarray | None
    interactions: Interactions | None
    documents: Dataset | None
    aggregate_kind: VectorKind = "weights"
    served_params: np.ndarray | None = None

    def blind(self) -> "ServerView":
        """The same round under the ``server-blind`` threat model."""
        return dataclasses.replace(self, threat_model="server-blind", interactions=None, documents=None)


@dataclass(frozen=True)
class Guess:
    """One attack's guess for every shown slot of a round.

    Attributes
    ----------
    attack : str
    score : ndarray of float64, shape (n, B, k)
        Higher means "more likely clicked"; NaN on empty slots.
    decision : ndarray of bool, shape (n, B, k)
        The 0/1 guess; False on empty slots.
    degenerate : int
        How many of the attack's fits were degenerate (e.g. a rank-deficient regression solved
        by the pseudo-inverse); 0 for attacks that fit nothing.
    """

    attack: str
    score: np.ndarray
    decision: np.ndarray
    degenerate: int = 0


@dataclass(frozen=True)
class RoundBatch:
    """One intercepted round: the server's view and, kept apart, the ground truth."""

    view: ServerView
    truth: GroundTruth
