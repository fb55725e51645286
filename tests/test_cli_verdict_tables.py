"""Console verdict tables: both verdicts, full defense names, at most 100 columns."""

from fltr_audit.api.verdict_tables import print_verdicts, wrap_name
from reports.compare import verdicts

from synthetic_results import DP, synthetic_tables


def test_wrap_name_breaks_at_joints_and_keeps_every_character():
    assert wrap_name(DP, 19) == "clip(sensitivity=5)\n+dp-distributed\n(eps=4.5)"
    assert wrap_name(DP).replace("\n", "") == DP and wrap_name("secagg") == "secagg"


def test_tables_carry_both_verdicts_within_100_columns(capsys):
    print_verdicts(verdicts(synthetic_tables()), 0.02)
    text = capsys.readouterr().out
    assert max(len(line.rstrip()) for line in text.splitlines()) <= 100
    assert "no measurable leakage" in text and "leaks" in text and "consistent" in text
    assert "ε ≥ 9.70" in text and "(limit of 120,000 trials)" in text and "holds" not in text.lower()
    assert "+0.297" in text  # none: olsr's leakage, the strongest attack
