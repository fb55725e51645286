"""An anonymous shuffler between the clients and the server, with the amplification-by-shuffling
bound of Feldman, McMillan and Talwar (FOCS 2021, "Hiding Among the Clones", Theorem 3.1)."""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from fltr_audit.engine.aggregation import weighted_mean
from fltr_audit.errors import FltrError
from defenses.mechanism_events import dp_event
from fltr_audit.privacy import mechanisms as mech
from fltr_audit.engine.interfaces import Aggregate, AggregatorBase, ClientDefense, PrivacyClaim
from fltr_audit.engine.messages import Messages


def amplification_applies(eps0: float, n: int, delta: float) -> bool:
    """The condition of Theorem 3.1, eps0 <= log(n / (16 log(2/delta))), here in the stricter
    form with log(4/delta) that the authors' reference code checks (it implies the theorem's)."""
    return n >= 2 and 0 < delta < 1 and eps0 <= math.log(n / (16.0 * math.log(4.0 / delta)))


def shuffled_epsilon(eps0: float, n: int, delta: float) -> float:
    """Feldman-McMillan-Talwar Theorem 3.1: shuffling the outputs of n eps0-DP local
    randomizers is (eps, delta)-DP with
    eps <= log(1 + (e^eps0 - 1)/(e^eps0 + 1) * (8 sqrt(e^eps0 log(4/delta)) / sqrt(n) + 8 e^eps0 / n)),
    where ``amplification_applies``; elsewhere the local eps0 (shuffling never hurts)."""
    if not amplification_applies(eps0, n, delta):
        return float(eps0)
    e0 = math.exp(eps0)
    gain = (e0 - 1.0) / (e0 + 1.0) * (8.0 * math.sqrt(e0 * math.log(4.0 / delta) / n) + 8.0 * e0 / n)
    return min(float(eps0), math.log1p(gain))


def local_epsilon(client: Sequence[ClientDefense], where: str) -> float:
    """eps0 of the local randomizer among ``client``: the smallest pure (delta = 0) message-scope
    epsilon (later transforms are post-processing). FltrError if there is none."""
    pure = [d.claim.epsilon for d in client
            if d.claim.scope == "message" and d.claim.delta == 0.0 and math.isfinite(d.claim.epsilon)]
    if pure:
        return float(min(pure))
    before = f"{', '.join(d.name for d in client)} is not one" if client else "there is nothing before it"
    raise FltrError(f"{where}: needs a pure local randomizer before it (dp-local-laplace, rr); {before}")


class Shuffle(AggregatorBase):
    """``shuffle(n, dp_delta)``, an aggregator: an anonymous shuffler. The server receives the
    cohort's messages stripped of their senders' identities (``participants`` withheld) and
    permuted uniformly at random by the round's aggregation stream, so their order is
    independent of the clients'; the threat model of its view is ``server (shuffled)``: an
    attack must first link a message to a user (e.g. to the shown lists it knows).

    It must follow a local randomizer with a pure message-scope claim eps0
    (``dp-local-laplace``, ``rr``). Claim, per round: for a cohort of at least ``n`` users the
    central (eps, dp_delta) of ``shuffled_epsilon(eps0, n, dp_delta)`` (scope ``aggregate``:
    it covers the server's view of the shuffled cohort, not a message linked to its sender);
    outside Theorem 3.1's condition, the local eps0 (scope ``message``). A round with fewer than
    ``n`` messages gets a weaker guarantee: ``stats["epsilon_round"]`` is the bound for the
    round's own cohort. ``dp_event()`` (the binary randomized response of the claimed epsilon,
    plus ``dp_event_delta`` per round) *replaces* the local randomizer's event in the stack's
    accounting (``covers_client_defenses``).

    The local eps0 is what the randomizer claims: ``dp-local-laplace(norm=l2)`` understates
    its own epsilon, and the amplified claim inherits that gap; ``rr`` claims eps per value.
    """

    covers_client_defenses = True

    def __init__(self, n: int = 1000, dp_delta: float = 1e-6, name: str = "shuffle",
                 client: Sequence[ClientDefense] | None = None):
        self.n, self.dp_delta, self.name = int(n), float(dp_delta), name
        self.client = tuple(client or ())
        self.eps0 = math.inf if client is None else local_epsilon(self.client, name)
        self.amplified = math.isfinite(self.eps0) and amplification_applies(self.eps0, self.n, self.dp_delta)
        if self.amplified:
            self.claim = PrivacyClaim(shuffled_epsilon(self.eps0, self.n, self.dp_delta), self.dp_delta, "aggregate")
        else:
            self.claim = PrivacyClaim(self.eps0, 0.0, "message" if math.isfinite(self.eps0) else "none")

    def after(self, client: Sequence[ClientDefense]) -> "Shuffle":
        """This shuffler behind the client defenses ``client`` (FltrError without a local randomizer)."""
        return Shuffle(self.n, self.dp_delta, self.name, client=tuple(client))

    @property
    def dp_event_delta(self) -> float:
        """The per-round delta that ``dp_event`` leaves out: the accountant adds it once per round
        a user takes part in (basic composition of the delta part), see ``dp_event``."""
        return self.claim.delta

    @property
    def mechanism(self) -> mech.Shuffle:
        """Declared: an anonymous shuffle of the cohort (amplified claim for cohorts of at least n)."""
        return mech.Shuffle(self.n, self.amplified)

    def dp_event(self):
        """One round for one user. dp-accounting 0.6 has no (epsilon, delta) event, so this is
        the binary randomized response of the claimed epsilon,
        ``RandomizedResponseDpEvent(2 / (1 + e^eps), 2)``, which dominates every eps-DP mechanism
        (Kairouz, Oh, Viswanath 2015); an (eps, delta) mechanism is dominated by it except with
        probability delta, so over K rounds the accountant's delta grows by K * ``dp_event_delta``.
        The claim is for replace-one neighbours (as Theorem 3.1), the relation dp-accounting
        requires for this event (``NeighboringRelation.REPLACE_ONE``)."""
        return dp_event(self.mechanism, self.claim)

    def aggregate(self, messages: Messages, participants: np.ndarray, rng: np.random.Generator) -> Aggregate:
        order = rng.permutation(messages.n_clients)
        shuffled = messages.replace(**{
            key: None if value is None else np.asarray(value)[order]
            for key, value in (("n_interactions", messages.n_interactions), ("vector", messages.vector),
                               ("seed", messages.seed), ("metric", messages.metric))})
        mean = None if shuffled.vector is None else weighted_mean(shuffled.vector, shuffled.n_interactions)
        n = messages.n_clients
        eps = shuffled_epsilon(self.eps0, n, self.dp_delta)
        return Aggregate(mean=mean, participants=np.empty(0, dtype=np.int64), dropouts=np.empty(0, dtype=np.int64),
                         messages=shuffled, stats={"messages": float(n), "epsilon_round": eps}, anonymous=True)

