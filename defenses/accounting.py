"""The privacy one user spends over a whole run: the per-round mechanism composed over rounds.

Each DP defense declares one round's privacy for one participating user as a
``dp_accounting`` event (``dp_event()``: ``LaplaceDpEvent``, ``GaussianDpEvent``,
``RandomizedResponseDpEvent``); ``privacy_spent`` / ``RunAccountant`` compose the event of the
component that makes the stack's claim over a run's participation schedule with Google's
``dp-accounting`` PLD accountant (privacy loss distributions, Koskela et al. 2020; Doroshenko et al.
2022), against two adversaries (DESIGN.md, Measuring leakage):

* the server, who draws the cohorts and reads each message: no amplification by sampling -- each
  user is charged its *realized* participations (``ParticipationSchedule``, recomputed from the
  run's seed by ``fltr_audit.engine.cohorts``); reported for the worst user and the 99th percentile;
* an observer of the released models only: ``PoissonSampledDpEvent(q, event)`` composed over every
  round, q = cohort / population. The engine's ``--population`` draws cohorts of a fixed size
  without replacement; Poisson sampling at the same rate is the accounting convention of DP-SGD
  practice (Abadi et al. 2016; TF Privacy), not a proof for fixed-size cohorts -- dp-accounting's
  PLD accountant has no fixed-size (``SampledWithoutReplacementDpEvent``) support.

Neighbouring relation: add/remove one user (the PLD default), with each event's sensitivity the
claim's *replace-one* message sensitivity (Laplace: Delta, Gaussian: 2C) -- conservative, and the
same epsilon per round as the defense's claim. Aggregators: ``dp-fedavg``'s ``GaussianDpEvent``
takes the path above; ``ddgauss``'s ``ZCDpEvent`` is not a PLD event and goes to dp-accounting's
RDP accountant (without sampling amplification, which it does not support for zCDP: an upper
bound when q < 1); ``shuffle`` declares its (eps, delta) claim as a binary randomized response
plus ``dp_event_delta`` per round, so the accountant composes the event at the requested delta
minus rounds x that delta (inf when nothing is left: no delta = 0 for an approximate claim). Randomized response needs replace-one in
dp-accounting, which composes it round by round (its ``compose(event, count)`` ignores ``count``
for this event in version 0.6) and cannot amplify it by sampling: with q < 1 it is composed
over all rounds without amplification (an upper bound). ``delta`` = 0 with pure-DP events
(Laplace, randomized response): the PLD accountant answers inf there (it truncates the loss
tails), so the exact pure composition is used -- ``rounds * epsilon`` at full participation,
``rounds * log(1 + q (e^epsilon - 1))`` under Poisson sampling (Balle et al. 2018, Thm. 9) --
and the accountant says so. At delta > 0 a pure event's figure is the smaller of the PLD
accountant's and the pure composition, so that it never grows as delta grows.

Unit: a defense that privatizes each metric value of a FOLtR-ES message (``privatizes ==
"metric"``, randomized response) claims epsilon per transmitted value, and a message carries B
of them (one per interaction, ``queries_per_client``): a participation is B events, so the
user-level figure ``epsilon_server`` composes ``B x`` participations events and
``epsilon_server_per_value`` the participations alone (FOLtR-ES §3.3, assumption (a): one value
per message). A defense of the whole vector claims per message: B does not enter.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from defenses.mechanism_events import dp_event
from fltr_audit.engine.cohorts import participations
from fltr_audit.constraints import Interval, ParameterError, check
from fltr_audit.errors import FltrError
from fltr_audit.privacy.mechanisms import declared

DISCRETIZATION = 1e-3
"""The PLD accountant's ``value_discretization_interval`` (dp-accounting's default is 1e-4): 100
rounds of ``dp-gaussian`` compose in ~4 s instead of ~40 s, with epsilon equal to the default's to
six significant digits (284.3918 at q = 1, 6.4762 vs 6.4762 at q = 0.01; the discretization is pessimistic)."""


def claim_component(stack: Any) -> Any:
    """The component (client defense or aggregator) that makes the stack's claim and declares a
    ``dp_event`` (None without one)."""
    claim = stack.claim
    for part in (*stack.client, stack.aggregator):
        if getattr(part, "claim", None) == claim and hasattr(part, "dp_event"):
            return part
    return None


def dp_event_of(stack: Any) -> Any:
    """The event of the mechanism declared by the component that makes the stack's claim
    (``defenses.mechanism_events.dp_event``; None without one)."""

    claim = stack.claim
    for part in (*stack.client, stack.aggregator):
        if getattr(part, "claim", None) == claim and declared(part) is not None:
            return dp_event(declared(part), claim)
    return None


def _pure_epsilon(event: Any) -> float | None:
    """The pure-DP epsilon of one event, None when it is not pure."""
    # start-up: dp_accounting costs 0.6 s CPU; only composing an event needs it
    import dp_accounting as dpa

    if isinstance(event, dpa.LaplaceDpEvent):
        return 1.0 / event.noise_multiplier
    if isinstance(event, dpa.RandomizedResponseDpEvent):
        k, noise = event.num_buckets, event.noise_parameter
        return math.log((1.0 - noise + noise / k) / (noise / k)) if noise > 0 else math.inf
    return None


def compose_epsilon(event: Any, rounds: int, sampling_rate: float, delta: float,
                    per_round: int = 1) -> tuple[float, str]:
    """Epsilon at ``delta`` of ``per_round`` copies of ``event`` in each of ``rounds`` rounds, each
    user taking part with probability ``sampling_rate`` (Poisson), and the accountant that gave
    it; for a pure event the smaller of the PLD figure and the pure composition (monotone in delta)."""
    check("per_round", per_round, (Interval(int, 1, None),))
    pure = _pure_epsilon(event)
    if delta > 0.0 and pure is not None:
        composed, accountant = _compose(event, rounds, sampling_rate, delta, per_round)
        exact, exact_name = _compose(event, rounds, sampling_rate, 0.0, per_round)
        return (exact, exact_name) if exact <= composed else (composed, accountant)
    return _compose(event, rounds, sampling_rate, delta, per_round)


def _compose(event: Any, rounds: int, sampling_rate: float, delta: float, per_round: int) -> tuple[float, str]:
    """``compose_epsilon`` by one accountant: RDP for zCDP, the exact pure composition at delta
    0, PLD otherwise (a participation of ``per_round`` events that dp-accounting cannot sample is
    composed over every round without amplification, an upper bound)."""
    # start-up: dp_accounting costs 0.6 s CPU; only composing an event needs it
    import dp_accounting as dpa
    from dp_accounting import pld

    if isinstance(event, dpa.ZCDpEvent):  # not a PLD event: the RDP accountant composes its curve xi + rho alpha
        # start-up: loaded when the command runs, not for --help
        from dp_accounting import rdp

        if delta == 0.0:
            return math.inf, "rdp (delta 0: no finite epsilon for a zCDP event)"
        accountant = rdp.RdpAccountant()
        accountant.compose(event, rounds * per_round)  # RDP has no Poisson amplification of zCDP: an upper bound for q < 1
        return float(accountant.get_epsilon(delta)), "rdp" + (", no sampling amplification" if sampling_rate < 1 else "")
    pure = _pure_epsilon(event)
    rr = isinstance(event, dpa.RandomizedResponseDpEvent)
    if delta == 0.0:
        if pure is None:
            return math.inf, "pld (delta 0: no finite epsilon for an approximate-DP event)"
        if sampling_rate < 1.0 and not rr:
            return rounds * math.log1p(sampling_rate * math.expm1(per_round * pure)), \
                "pure composition, poisson sampling"
        return rounds * per_round * pure, "pure composition"
    if rr:
        accountant = pld.PLDAccountant(dpa.NeighboringRelation.REPLACE_ONE, DISCRETIZATION)
        for _ in range(rounds * per_round):
            accountant.compose(event)
        return float(accountant.get_epsilon(delta)), "pld (replace-one, no sampling amplification)"
    accountant = pld.PLDAccountant(value_discretization_interval=DISCRETIZATION)
    if per_round > 1:  # dp-accounting's PLD cannot Poisson-sample a composed event
        accountant.compose(event, rounds * per_round)
        return float(accountant.get_epsilon(delta)), "pld" + (", no sampling amplification" if sampling_rate < 1 else "")
    if sampling_rate < 1.0:
        accountant.compose(dpa.PoissonSampledDpEvent(sampling_rate, event), rounds)
        return float(accountant.get_epsilon(delta)), "pld, poisson sampling"
    accountant.compose(event, rounds)
    return float(accountant.get_epsilon(delta)), "pld"


@lru_cache(maxsize=256)
def _composed(event: Any, count: int, rate: float, delta: float, per_round: int) -> tuple[float, str]:
    """``compose_epsilon``, cached: the figures of one run ask for a few (count, rate) pairs, and
    runs of one stack repeat them (dp-accounting's events are frozen, hashable values)."""
    return compose_epsilon(event, count, rate, delta, per_round)


QUERIES_PER_CLIENT = 4
"""B, the interactions (metric values) of one FOLtR-ES message by default (the engine's default)."""


def claims_per_value(stack: Any, part: Any) -> bool:
    """Whether the claim of ``part`` is per transmitted metric value: a client defense that
    privatizes each metric value (``privatizes == "metric"``), not the whole message."""
    return any(d is part and d.privatizes == "metric" for d in stack.client)


QUANTILE = 0.99
"""The high quantile of the users' realized participations reported beside the worst user."""


@dataclass(frozen=True)
class ParticipationSchedule:
    """How often each user of a run took part: ``counts`` the realized participations of the users
    over ``rounds`` rounds, at the cohort's sampling rate ``sampling_rate`` (cohort / population);
    ``absent`` more users who never took part are not stored (a population of 10^9 costs the
    counts of the users who took part only)."""

    rounds: int
    sampling_rate: float
    counts: np.ndarray
    absent: int = 0

    @classmethod
    def of_run(cls, seed: int, rounds: int, clients: int, population: int | None = None) -> "ParticipationSchedule":
        """The schedule ``federation.train`` draws for this seed (``fltr_audit.engine.cohorts``)."""
        check("rounds", rounds, (Interval(int, 1, None),))
        if population is not None and population < clients:
            raise ParameterError("population", f"must be at least clients ({clients}), got {population}")
        took_part = participations(seed, int(rounds), clients, population)
        return cls(int(rounds), clients / (population or clients), took_part.counts,
                   took_part.population - len(took_part.counts))

    @classmethod
    def full(cls, rounds: int) -> "ParticipationSchedule":
        """Every user in every round (the same cohort each round)."""
        return cls(int(rounds), 1.0, np.array([int(rounds)], dtype=np.int64))

    @property
    def worst(self) -> int:
        """The most participations any user had."""
        return int(self.counts.max(initial=0))

    def quantile(self, level: float = QUANTILE) -> int:
        """The ``level`` quantile of the users' participations (the next observed count above it):
        ``np.quantile(counts and absent zeros, level, method="higher")``: the sorted counts at
        index ``ceil((n - 1) level)``, computed as numpy does."""
        n = len(self.counts) + self.absent
        index = int(np.ceil((n - 1) * level))
        return 0 if index < self.absent else int(np.partition(self.counts, index - self.absent)[index - self.absent])


@dataclass(frozen=True)
class PrivacySpent:
    """The privacy a user spends over a run, against two adversaries.

    * ``epsilon_server``: against the server, who draws the cohorts and reads each message -- no
      amplification by sampling; the per-round event composed over the worst user's realized
      participations ``participations_max`` (``epsilon_server_q99``: the user at the 99th
      percentile, ``participations_q99``).
    * ``epsilon_observer``: against an observer of the released models only, who does not know
      who was sampled -- the event Poisson-sampled at ``sampling_rate`` over all rounds
      (``PoissonSampledDpEvent``; Balle, Barthe, Gaboardi 2018); the server's figure where that is
      smaller (a pure claim at delta 0 over many rounds), since the observer sees less than the
      server. Equal to the server's at rate 1.
    * ``values_per_participation`` B: the events one participation costs (B metric values of a
      FOLtR-ES message under a per-value claim, else 1); ``epsilon_server`` and the observer's
      figure are user-level (B values per participation), ``epsilon_server_per_value`` the worst
      user's figure at one value per participation; ``*_unit`` says each figure's unit.
    """

    epsilon_per_round: float
    delta: float
    rounds: int
    sampling_rate: float
    delta_total: float
    participations_max: int
    participations_q99: int
    epsilon_server: float
    epsilon_server_q99: float
    epsilon_observer: float
    accountant: str
    accountant_observer: str
    values_per_participation: int = 1
    epsilon_server_per_value: float = math.nan
    epsilon_server_unit: str = ""
    epsilon_server_per_value_unit: str = ""

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


class RunAccountant:
    """An accountant a user holds for a defense stack and a participation schedule, in the manner of
    Opacus' and Flower's accountants: ``get_epsilon(delta)`` against the server (worst user, or a
    quantile) or against an observer; ``spent(delta)`` gives every figure (``privacy_spent``)."""

    def __init__(self, stack: Any, schedule: ParticipationSchedule, queries_per_client: int = QUERIES_PER_CLIENT) -> None:
        check("queries_per_client", queries_per_client, (Interval(int, 1, None),))
        self.stack, self.schedule = stack, schedule
        self.part = claim_component(stack)
        self.event_delta = float(getattr(self.part, "dp_event_delta", 0.0)) if self.part is not None else 0.0
        self.per_value = claims_per_value(stack, self.part)
        self.per_participation = int(queries_per_client) if self.per_value else 1

    def default_delta(self) -> float:
        """The claim's delta; for a claim whose event pays its delta once per round (the shuffler's),
        ``2 x rounds x`` that delta: half paid by the rounds, half left to the composition."""
        if self.event_delta > 0.0:
            return 2 * self.schedule.rounds * self.event_delta
        return float(self.stack.claim.delta)

    def get_epsilon(self, delta: float, scope: str = "server", quantile: float | None = None) -> float:
        """Epsilon at ``delta`` over the run: ``scope`` "server" charges the worst user's realized
        participations (``quantile``: that quantile of the users instead), "observer" the
        Poisson-sampled event over every round; user level (``values_per_participation`` events
        per participation)."""
        return self._epsilon(delta, scope, quantile)[0]

    def _epsilon(self, delta: float, scope: str, quantile: float | None, per_value: bool = False) -> tuple[float, str]:
        if scope not in ("server", "observer"):
            raise FltrError(f"scope: 'server' or 'observer', got {scope!r}")
        check("delta", delta, (Interval(float, 0.0, 1.0, closed="left"),))
        if self.part is None:
            return math.inf, "none"
        s = self.schedule
        if scope == "observer":
            count, rate = s.rounds, s.sampling_rate
        else:
            count, rate = (s.worst if quantile is None else s.quantile(quantile)), 1.0
        if count == 0:
            return 0.0, "no participation"
        rest, note = delta, ""
        if self.event_delta > 0.0:  # an (eps, delta) claim as a pure event: its delta is paid once per round
            rest = delta - count * self.event_delta
            if rest <= 0.0:
                return math.inf, f"none (delta {delta:g} <= {count} x the per-round delta {self.event_delta:g})"
            note = f", delta - {count} x {self.event_delta:g}"
        per_round = 1 if per_value else self.per_participation
        epsilon, accountant = _composed(self.part.dp_event(), int(count), float(rate), rest, per_round)
        return epsilon, accountant + note

    def spent(self, delta: float | None = None) -> PrivacySpent:
        """Every figure at ``delta`` (default: ``default_delta``)."""
        delta = self.default_delta() if delta is None else float(delta)
        server, accountant = self._epsilon(delta, "server", None)
        q99, _ = self._epsilon(delta, "server", QUANTILE)
        observer, accountant_observer = self._epsilon(delta, "observer", None)
        if server < observer:  # the observer sees less than the server: the server's figure bounds it too
            observer, accountant_observer = server, f"{accountant} (the server's figure, below {observer:.4g})"
        per_value, _ = self._epsilon(delta, "server", None, per_value=True)
        b = self.per_participation
        claim = self.stack.claim
        return PrivacySpent(
            epsilon_per_round=float(claim.epsilon), delta=float(claim.delta), rounds=self.schedule.rounds,
            sampling_rate=float(self.schedule.sampling_rate), delta_total=delta,
            participations_max=self.schedule.worst, participations_q99=self.schedule.quantile(QUANTILE),
            epsilon_server=server, epsilon_server_q99=q99, epsilon_observer=observer,
            accountant=accountant, accountant_observer=accountant_observer, values_per_participation=b,
            epsilon_server_per_value=per_value,
            epsilon_server_unit=f"user ({b} values per participation)" if self.per_value
            else "user (one message per participation)",
            epsilon_server_per_value_unit="one value per participation (one interaction per message)"
            if self.per_value else "user (one message per participation)")


def privacy_spent(stack: Any, schedule: ParticipationSchedule, delta: float | None = None,
                  queries_per_client: int = QUERIES_PER_CLIENT) -> PrivacySpent:
    """The privacy a user spends over the run ``schedule`` describes under ``stack``, at ``delta``
    (default: the claim's; see ``RunAccountant.default_delta``), B = ``queries_per_client`` values
    per participation for a per-value claim: ``RunAccountant(stack, schedule, B).spent(delta)``."""
    return RunAccountant(stack, schedule, queries_per_client).spent(delta)
