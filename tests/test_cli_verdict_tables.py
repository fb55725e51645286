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


def test_the_longest_cells_of_the_claim_table_are_printed_whole(capsys):
    """The demo's claim table once cropped its cells to fit 100 columns ('(limit of 10,000 trial',
    '(aggregate', 'dp-local-laplace(eps=0.01'): every word must survive, wrapped or not."""
    v = verdicts(synthetic_tables())
    long_name = "dp-local-laplace(eps=0.01)"
    v.loc[v["defense"] == "secagg", ["defense", "claim_verdict", "trials_needed", "claimed_epsilon", "claimed_scope",
                                     "claim_neighbours", "claim_verdict_natural", "epsilon_lb_natural",
                                     "trial_limited_natural", "n_trials_natural"]] = \
        [long_name, "untestable", 656725, 0.01, "aggregate", "worst-case", "untestable", 7.21, True, 10000]
    v.loc[v["defense"] == "none", "claim_neighbours"] = "natural"
    print_verdicts(v, 0.05)
    text = capsys.readouterr().out
    assert max(len(line.rstrip()) for line in text.splitlines()) <= 100
    words = " ".join(line.strip("│┃ ").replace("│", " ") for line in text.splitlines()).split()
    for phrase in ["(needs 656,725 trials)", "(limit of 10,000 trials)", "(limit of 120,000 trials)",
                   "(aggregate)", "(worst-case)", "(natural)"]:
        assert " ".join(phrase.split()) in " ".join(words), phrase
    assert "dp-local-laplace" in words and "(eps=0.01)" in words
