"""trials_to_test: equals the closed form of the fewest trials whose zero-error ceiling exceeds a
claim, and is the boundary of the audit's own bound (one trial fewer leaves the claim untestable)."""

import math

import numpy as np
import pytest

from attacks.epsilon_bounds import epsilon_lower_bound
from fltr_audit.privacy.claim_trials import TRIALS_LIMIT, ceiling, trials_to_test


def _closed_form(epsilon, delta, confidence):
    """``n = 2 m - 1`` with m the smallest integer above ``ln(alpha) / ln(1 - t)``:
    ``u_m = 1 - alpha^(1/m) < t = (1 - delta) / (1 + e^epsilon)``, alpha = (1 - confidence) / 2."""
    alpha = (1.0 - confidence) / 2.0
    t = (1.0 - delta) / (1.0 + math.exp(epsilon))
    return 2 * (math.floor(math.log(alpha) / math.log1p(-t)) + 1) - 1


@pytest.mark.parametrize("delta", [0.0, 1e-5, 0.1])
@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.99])
def test_trials_to_test_is_the_closed_form(delta, confidence):
    for epsilon in np.linspace(0.05, 20.0, 60):
        assert trials_to_test(float(epsilon), delta, confidence) == _closed_form(epsilon, delta, confidence), epsilon


@pytest.mark.parametrize("epsilon,delta,confidence", [(0.3, 0.0, 0.95), (4.5, 0.0, 0.95), (1.0, 1e-5, 0.99),
                                                      (8.0, 0.1, 0.9)])
def test_trials_to_test_is_where_the_audits_own_bound_crosses_the_claim(epsilon, delta, confidence):
    n = trials_to_test(epsilon, delta, confidence)
    for trials, above in ((n, True), (n - 1, False)):
        m = trials - trials // 2
        bound = float(epsilon_lower_bound(0, 0, m, m, delta, confidence))
        assert bound == ceiling(m, delta, confidence)
        assert (bound > epsilon) is above


def test_infinite_and_untestable_claims():
    assert trials_to_test(math.inf) == 0
    assert trials_to_test(45.0) == TRIALS_LIMIT           # the closed form: about 2.6e20 trials
    assert ceiling(1) == 0.0                               # one output per input shows nothing
