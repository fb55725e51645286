"""The plan of an audit or a campaign: how many lists each click model is probed with so that the
leakage verdict can come out either way (``leaks`` for a leak of ``min_effect``, ``no measurable
leakage`` at zero leakage, each with probability ``power``), what that costs, and how to make it
cheaper. ``audit`` and ``campaign run`` print it before the work starts."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

from attacks.registry import attack_spec
from fltr_audit.spec.audit_options import DEFAULT_MIN_EFFECT, DEFAULT_POWER
from reports.leakage import planned_lists as lists_for

__all__ = ["DEFAULT_MIN_EFFECT", "DEFAULT_POWER", "Plan", "informed_attacks", "planned_lists"]

SECONDS_PER_RUN = 0.6
"""Rough cost model of a run (measured on the 2-core reference machine under load, FPDGD on the
synthetic MQ2008 profile, 2026-11): training and set-up ..."""
SECONDS_PER_SCORED_LIST = 0.0003
"""... each list scored by one attack under one click model ..."""
SECONDS_PER_EPSILON_AUDIT = 1.5
"""... the epsilon audits of one defense (10,000 trials per input) ..."""
SECONDS_PER_AGGREGATE_FIT = 0.2
"""... and, behind secure aggregation (an aggregator that declares ``min_cohort`` > 1), each informed
attack's fit on one cohort's aggregate (lists / cohort of them per click model). A guide, not a promise."""


def informed_attacks(attacks) -> int:
    """How many of ``attacks`` read the message (reference attacks never enter a verdict)."""

    return sum(not attack_spec(a).reference for a in attacks)


def planned_lists(min_effect: float, power: float, attacks) -> int:
    """Lists per click model for ``power`` at ``min_effect`` over the informed ``attacks``
    (``reports.leakage.planned_lists``)."""

    return lists_for(min_effect, power, informed_attacks(attacks))


@dataclass(frozen=True)
class Plan:
    """What an audit or a campaign will compute, before it starts."""

    runs: int
    lists: int | None
    click_models: int
    attacks: int
    informed: int
    min_effect: float
    power: float | None
    epsilon_audit: bool
    aggregate_share: float = 0.0
    """The share of the runs behind secure aggregation (their attacks read cohort aggregates)."""
    inverse_cohort: float = 0.01
    """The mean of 1 / probe cohort over the grid's cohorts."""

    @classmethod
    def of(cls, spec, runs: int) -> "Plan":
        """The plan of a validated ``CampaignSpec`` expanded into ``runs`` runs."""
        attacks, defenses = spec.audit.attacks, spec.audit.defenses
        secure = sum(d.build().aggregator.min_cohort > 1 for d in defenses)  # declared on AggregatorBase
        return cls(runs=runs, lists=spec.probe.lists, click_models=len(spec.probe.click_models),
                   attacks=len(attacks), informed=informed_attacks(attacks), min_effect=spec.probe.min_effect,
                   power=spec.probe.power, epsilon_audit=spec.audit.epsilon_audit,
                   aggregate_share=secure / max(len(defenses), 1),
                   inverse_cohort=sum(1 / c for c in spec.probe.cohorts) / len(spec.probe.cohorts))

    @property
    def seconds(self) -> float:
        """A rough estimate of the wall time on one core (``SECONDS_PER_*``)."""
        lists = 60 if self.lists is None else self.lists
        fits = lists * self.inverse_cohort * self.click_models * self.informed * SECONDS_PER_AGGREGATE_FIT
        per_run = (SECONDS_PER_RUN + lists * self.click_models * self.attacks * SECONDS_PER_SCORED_LIST
                   + self.aggregate_share * fits + (SECONDS_PER_EPSILON_AUDIT if self.epsilon_audit else 0.0))
        return self.runs * per_run

    def lines(self, workers: int = 1, campaign: bool = False) -> list[str]:
        """The plan in words, its expected time and how to make it cheaper (``campaign``: named by the
        campaign file's keys rather than the command's options)."""
        if self.lists is None:
            what = "one pass over the probe split per click model (no plan: the verdicts may be inconclusive)"
        elif self.power is None:
            what = f"{self.lists:,} lists per click model (as given)"
        else:
            wanted = planned_lists_of(self, self.min_effect)
            what = (f"{self.lists:,} lists per click model, planned so that a leak of {self.min_effect:g} AUC is "
                    f"found and zero leakage shown with probability {self.power:g}")
            if self.lists < wanted:
                what += f" (capped: the plan wants {wanted:,}, the probe split offers {self.lists:,})"
        seconds = self.seconds / max(workers, 1)
        lines = [f"Plan: {self.runs} run{'s' if self.runs != 1 else ''} x {self.click_models} click model"
                 f"{'s' if self.click_models != 1 else ''}, {what}; expected about {_duration(seconds)} "
                 "(rough, on a 2-core machine)"]
        if self.lists is not None and self.power is not None:
            cheaper = planned_lists_of(self, 2 * self.min_effect)
            names = (("probe.min_effect = ", "probe.power = ", "probe.click_models or audit.attacks", "probe.lists = N")
                     if campaign else ("--min-effect ", "--power ", "--click-model or --attack", "--probe-lists N"))
            lines.append(f"Cheaper: {names[0]}{2 * self.min_effect:g} ({cheaper:,} lists: only larger leaks ruled "
                         f"out), {names[1]}0.8, fewer {names[2]}, or {names[3]} (fixed; the verdicts may then be "
                         "inconclusive)")
        return [textwrap.fill(line, 100, subsequent_indent="  ") for line in lines]


def planned_lists_of(plan: Plan, min_effect: float) -> int:
    """The lists ``plan`` would take at another ``min_effect`` (its power and attack count)."""

    return lists_for(min(min_effect, 0.99), plan.power, plan.informed)


def _duration(seconds: float) -> str:
    seconds = max(1, int(round(seconds)))
    return f"{seconds} s" if seconds < 60 else f"{seconds // 60} min {seconds % 60} s"
