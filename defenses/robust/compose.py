"""A robust rule in a defense stack beside another aggregator, in either order (``defenses.stack``):

* with an aggregator that shows the server only the sum (``secagg``, ``secagg-protocol``, ``ddgauss``:
  declared ``sees = "sum"`` or a declared secure-sum mechanism), a rule that needs more -- each
  update (median, trimmed mean, fltrust) or their pairwise distances (Krum) -- is refused in one line
  naming both; a rule that needs only the sum (``norm-bound``: each client proves its norm bound) is
  applied to each message before the secure sum (``SecureRule``);
* with an aggregator that accepts a rule (``dp-fedavg``: ``accepts_rule``), the rule replaces the
  mean of the clipped updates under the same noise, whose claim was calibrated for the mean
  (``DPFedAvg.with_rule``) -- the worst-case audit then tests whether the claim still holds;
* anything else, or two rules, is refused.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from fltr_audit.engine.interfaces import Aggregate, AggregatorBase
from fltr_audit.errors import FltrError
from fltr_audit.privacy import mechanisms as mech

WHAT = {"updates": "each client's update", "distances": "the pairwise distances of the clients' updates "
                                                        "and the updates it selects", "sum": "only the sum"}


def is_rule(aggregator: Any) -> bool:
    """Whether the aggregator's type declares a robust combination rule."""
    return aggregator is not None and aggregator.robust_rule


def aggregator_sees(aggregator: Any) -> str:
    """What the aggregator must see (``fltr_audit.engine.interfaces.Sees``), as it declares it."""
    return aggregator.sees


class SecureRule(AggregatorBase):
    """A rule that needs only the sum (``norm-bound``) under a secure aggregator: each message bounded
    on the client (``rule.bound``), the secure aggregator's view and claim, the rule's noise added to
    the released mean."""

    reads_global_model = True

    def __init__(self, rule: Any, secure: Any, name: str) -> None:
        self.rule, self.secure, self.name = rule, secure, name
        self.claim = secure.claim
        self.min_cohort = secure.min_cohort

    def check_cohort(self, n: int) -> None:
        """The secure aggregator's check, in its own words."""
        self.secure.check_cohort(n)

    @property
    def mechanism(self) -> Any:
        return mech.declared(self.secure)

    def aggregate(self, messages: Any, participants: np.ndarray, rng: np.random.Generator,
                  global_params: np.ndarray | None = None) -> Aggregate:
        g = np.zeros(messages.vector.shape[1]) if global_params is None else np.asarray(global_params, dtype=np.float64)
        extra = {"global_params": g} if self.secure.reads_global_model else {}
        out = self.secure.aggregate(self.rule.bound(messages, g), participants, rng, **extra)
        mean = out.mean + (self.rule.release(np.zeros_like(g), rng))
        return dataclasses.replace(out, mean=mean)


def compose(first: Any, second: Any, where: str) -> Any:
    """The one aggregator of ``first`` and ``second`` of the stack ``where`` (``defense '...'``), or a
    one-line FltrError naming the stack and both."""
    if is_rule(first) and is_rule(second):
        raise FltrError(f"{where}: {first.name} and {second.name} are two robust rules; choose one")
    if not (is_rule(first) or is_rule(second)):
        raise FltrError(f"{where}: {first.name} must come last, and only one aggregator is allowed (a robust "
                        "rule may join dp-fedavg or a secure sum)")
    rule, other = (first, second) if is_rule(first) else (second, first)
    if aggregator_sees(other) == "sum":
        if rule.sees != "sum":
            raise FltrError(f"{where}: {rule.name} must see {WHAT[rule.sees]}, which {other.name} hides (the server "
                            "sees only their sum); they cannot be combined")
        return SecureRule(rule, other, f"{rule.name}+{other.name}")
    if getattr(type(other), "accepts_rule", False):
        return other.with_rule(rule)
    raise FltrError(f"{where}: {rule.name} combines with dp-fedavg or a secure sum, not with {other.name}")


def rule_of(aggregator: Any) -> Any:
    """The robust rule an aggregator applies (itself, or the one a composition wraps), else None."""
    if is_rule(aggregator):
        return aggregator
    inner = getattr(aggregator, "rule", None)  # DPFedAvg.with_rule, SecureRule
    return inner if is_rule(inner) else None


def check_cohort(stack: Any, clients: int) -> None:
    """FltrError naming the stack when its aggregator cannot run on cohorts of ``clients``: its robust
    rule's bound (Krum's n >= 2f + 3, Multi-Krum's m <= n - f) or its declared ``min_cohort``
    (secure aggregation: two clients, more under a low ``secagg-protocol`` threshold). Refused at the
    door, before anything is trained."""
    rule = rule_of(stack.aggregator)
    for part in dict.fromkeys(p for p in (rule, stack.aggregator) if p is not None):
        try:
            part.check_cohort(int(clients))
        except FltrError as exc:
            which = "" if part.name == stack.name else f"{part.name}: "
            raise FltrError(f"defense {stack.name!r}: {which}{exc}") from None
