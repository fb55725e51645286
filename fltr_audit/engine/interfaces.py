"""The small protocols the engine defines and the other packages implement (DESIGN.md).

The engine never imports ``attacks``, ``defenses`` or ``reports``; it calls objects that
satisfy these protocols, handed to it by the composition root (``cli``, ``campaign``,
``audit_pipeline``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Mapping, Protocol

import numpy as np

from fltr_audit.base.defense_terms import PrivacyClaim, Privatizes, Sees
from fltr_audit.engine.data.dataset import Dataset
from fltr_audit.engine.messages import GroundTruth, Guess, Interactions, Messages, RoundBatch, ServerView
from fltr_audit.errors import FltrError

class ClientDefense(Protocol):
    """A transform each client applies to its message before it leaves the device.

    ``privatizes`` declares what it transforms: ``"vector"`` (weights or updates) or
    ``"metric"`` (FOLtR-ES metric values, e.g. randomized response); the audit picks its
    test by it.
    """

    name: str
    claim: PrivacyClaim
    privatizes: ClassVar[Privatizes]

    def apply(self, messages: Messages, global_params: np.ndarray, rng: np.random.Generator) -> Messages:
        """Transform the cohort's messages (vectorized over clients); n = messages.n_clients."""
        ...


@dataclass(frozen=True)
class Aggregate:
    """What aggregation hands the server.

    Attributes
    ----------
    mean : ndarray (P,) or None
        The n_c-weighted mean of the surviving clients' vectors (None without vectors).
    participants : ndarray of int64
        Client ids that took part.
    dropouts : ndarray of int64
        Client ids that dropped out before their input was aggregated.
    messages : Messages or None
        The individual messages, or None when the aggregation hides them.
    stats : mapping
        Cost counters (bytes sent, key agreements, ...), for benchmarks.
    anonymous : bool
        True when ``messages`` reach the server without their senders' identities, in an
        order independent of the clients' (a shuffler): the view is ``server (shuffled)``.
    """

    mean: np.ndarray | None
    participants: np.ndarray
    dropouts: np.ndarray
    messages: Messages | None
    stats: Mapping[str, float] = field(default_factory=dict)
    anonymous: bool = False


class AggregatorBase:
    """What an aggregator declares, with the values of one that declares nothing; every aggregator
    subclasses it (a plug-in's is wrapped in one, ``defenses.registration``).

    ``reads_global_model``: it also gets ``global_params=`` (the model the cohort started from),
    e.g. to clip the updates ``vector - global_params`` of weight messages. ``min_cohort``: the
    clients a cohort needs (an instance may set its own); it raises
    ``fltr_audit.errors.CohortLost`` when too few of them survive. ``sees``: what it must see of
    the messages (``Sees``). ``robust_rule``: a Byzantine-robust rule (``defenses.robust``).
    ``zero_cohort_means``: None, or a method ``(update, cohort, trials, rng) -> (trials, dim)`` that
    simulates ``trials`` rounds of a cohort of one ``update`` and ``cohort - 1`` zero updates at once,
    equal in law to one ``aggregate`` per round (the audits' fast path, ``defenses.ddgauss``).
    """

    reads_global_model: ClassVar[bool] = False
    min_cohort: int = 1
    sees: ClassVar[Sees] = "updates"
    robust_rule: ClassVar[bool] = False
    zero_cohort_means: ClassVar[Any] = None

    def check_cohort(self, n: int) -> None:
        """FltrError when cohorts of ``n`` clients are below ``min_cohort`` (checked at the door, before
        anything trains: ``defenses.robust.compose.check_cohort``); an aggregator may say why."""
        if n < self.min_cohort:
            raise FltrError(f"a cohort of {n} client{'' if n == 1 else 's'} is below the {self.min_cohort} it needs")


class Aggregator(Protocol):
    """Combines a cohort's messages into what the server receives; its class subclasses
    ``AggregatorBase`` and declares there what it reads, needs and sees."""

    name: str
    claim: PrivacyClaim
    reads_global_model: ClassVar[bool]
    min_cohort: int
    sees: ClassVar[Sees]
    robust_rule: ClassVar[bool]

    def aggregate(self, messages: Messages, participants: np.ndarray, rng: np.random.Generator) -> Aggregate:
        """The server's update from the cohort's ``messages`` (``participants``: their client ids),
        drawing any noise from ``rng``."""
        ...


class Attack(Protocol):
    """Guesses the clicks behind a round from the server's view alone."""

    name: str

    def guess(self, view: ServerView) -> Guess:
        """Per shown document a score and a 0/1 decision, from what the server sees alone."""
        ...


Interceptor = Callable[[RoundBatch], None]
"""Receives every round's ``RoundBatch`` on the channel."""


@dataclass(frozen=True)
class ClientOutput:
    """What a cohort's local step produced, before defenses.

    Attributes
    ----------
    messages : Messages
    interactions : Interactions
    clicks : ndarray of bool, shape (n, B, k)
    shown_ndcg : ndarray of float64, shape (n, B)
        nDCG@k of each shown list (for online performance); NaN for queries without
        relevant documents.
    private : mapping
        Extra ground truth for scoring (see ``GroundTruth.private``).
    round_metrics : mapping of str to float
        Scalars about what users experienced this round, recorded in the learning
        curves (e.g. FOLtR-ES's mean batch MaxRR).
    """

    messages: Messages
    interactions: Interactions
    clicks: np.ndarray
    shown_ndcg: np.ndarray
    private: Mapping[str, np.ndarray] = field(default_factory=dict)
    round_metrics: Mapping[str, float] = field(default_factory=dict)

    def truth(self, client_ids: np.ndarray) -> GroundTruth:
        """The ground truth of this output (clicks and private data), kept apart from the server's view."""
        return GroundTruth(clicks=self.clicks, client_ids=client_ids, private=self.private)


class Algorithm(Protocol):
    """A federated OLTR algorithm: a vectorized client step and a server step.

    The server step reads only the ``ServerView`` -- exactly what the server sees -- so
    that whatever the server can compute, an attack on the same view can compute too.
    """

    name: str
    ranker: Any
    click_model: Any
    """The users' click model (``fltr_audit.engine.clicks``)."""
    k: int
    """Length of the shown lists."""

    @property
    def config(self) -> dict:
        """The resolved configuration, recorded with a training run."""
        ...

    def init_params(self, rng: np.random.Generator) -> np.ndarray:
        """The initial global model, shape (P,) float64."""
        ...

    def init_server_state(self, params: np.ndarray) -> Any:
        """Server-side optimizer state (e.g. Adam moments), or None."""
        ...

    def client_step(
        self,
        params: np.ndarray,
        data: Dataset,
        queries: np.ndarray,
        client_ids: np.ndarray,
        rng: np.random.Generator,
        public_rng: np.random.Generator,
        deterministic: bool = False,
    ) -> ClientOutput:
        """Run every client of the cohort locally, vectorized over clients.

        ``queries`` is (n, B); ``rng`` drives the clients' private choices (rankings,
        clicks); ``public_rng`` drives only what the message reveals (FOLtR-ES seeds).
        ``deterministic`` ranks by score instead of sampling (the probe protocol).
        """
        ...

    def server_step(self, params: np.ndarray, state: Any, view: ServerView) -> tuple[np.ndarray, Any]:
        """The next global model (and state) from what the server sees."""
        ...

    def redraw_clicks(self, truth: GroundTruth, interactions: Interactions, data: Dataset, draws: int,
                      rng: np.random.Generator) -> np.ndarray:
        """``draws`` counterfactual click vectors of the same users on the same shown lists,
        bool ``(draws, n, B, k)``: the click model of ``client_step`` again (same per-user
        parameters, e.g. FedIPS's gamma_u), from ``rng`` alone (the counterfactual baseline)."""
        ...
