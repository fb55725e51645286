"""Planning repeated-trial tests of a rate (a bound's miss rate, a test's level) so that they have power.

A soundness test counts the failures X of ``runs`` independent repetitions and passes when
``X <= max_failures``. ``binomial_plan`` picks the fewest repetitions and the threshold such that a
correct rate (at most ``rate_ok``) passes with probability >= ``pass_ok`` while a defective one
(at least ``rate_bad``) fails with probability >= ``fail_bad``, from scipy.stats.binom."""

from __future__ import annotations

from dataclasses import dataclass

from scipy import stats


@dataclass(frozen=True)
class BinomialPlan:
    runs: int
    max_failures: int
    pass_correct: float     # P(Binomial(runs, rate_ok) <= max_failures)
    pass_defective: float   # P(Binomial(runs, rate_bad) <= max_failures)


def binomial_plan(rate_ok: float = 0.05, rate_bad: float = 0.10, pass_ok: float = 0.99, fail_bad: float = 0.9,
                  max_runs: int = 20000) -> BinomialPlan:
    """The smallest ``runs`` (and its threshold) meeting both error probabilities."""
    for runs in range(1, max_runs):
        c = int(stats.binom.ppf(pass_ok, runs, rate_ok))
        while stats.binom.cdf(c, runs, rate_ok) < pass_ok:
            c += 1
        if stats.binom.cdf(c, runs, rate_bad) <= 1 - fail_bad:
            return BinomialPlan(runs, c, float(stats.binom.cdf(c, runs, rate_ok)),
                                float(stats.binom.cdf(c, runs, rate_bad)))
    raise ValueError("no plan within max_runs")


def pass_probability(runs: int, max_failures: int, rate: float) -> float:
    """P(Binomial(runs, rate) <= max_failures)."""
    return float(stats.binom.cdf(max_failures, runs, rate))
