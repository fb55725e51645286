"""A probe that forms no cohort (the probed split too small for the aggregator's cohort) scores
no list: the run is stored with ``n_queries`` 0 and the reason's counts, the attack table is empty
rather than a crash, the leakage verdict inconclusive, and the command says why in one line."""

from __future__ import annotations

import warnings

import fltr_audit
from fltr_audit.cli import main

TOO_SMALL = dict(data="synthetic:mq2008?queries=8", rounds=2, clients=5)  # a test split of one query
"""Krum needs cohorts of 2f + 3 = 5; the probed split's one query makes one client per pass."""


def test_a_probe_without_a_cohort_is_an_empty_table_and_an_inconclusive_verdict():
    result = fltr_audit.audit(**TOO_SMALL, defenses=["krum(f=1)"], attacks=["olsr"], click_models=["perfect"])
    assert result.attacks.empty
    unscored = result.unscored
    assert len(unscored) == 1 and unscored["attack"].iloc[0] == "olsr"
    assert unscored["reason"].iloc[0] == "no probe cohort"
    assert int(unscored["queries_left_out"].iloc[0]) > 0 and int(unscored["cohorts_lost"].iloc[0]) == 0
    assert result.as_json()["unscored"] == unscored.to_dict(orient="records")
    assert list(result.verdicts["leakage_verdict"]) == ["inconclusive"]


def test_the_command_says_no_list_was_scored_and_why(capsys):
    code = main(["audit", "--data", TOO_SMALL["data"], "--rounds", "2", "--clients", "5", "--defense", "krum(f=1)",
                 "--attack", "olsr", "--click-model", "perfect", "--quiet"])
    out = capsys.readouterr().out
    assert code == 0
    assert "Attacks: no list was scored." in out
    assert "1 attack row(s) scored no list: no probe cohort formed (0 lost to dropouts;" in out
    assert "inconclusive" in out


def test_a_probe_whose_lists_are_all_unscorable_says_so_without_numpy_warnings():
    """A malicious server's probe of a one-query split: one round, its target alone, whose list
    cannot be scored; the other members' nDCG is NaN (there are none), without numpy's warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        result = fltr_audit.audit(**{**TOO_SMALL, "clients": 2}, defenses=["median"], attacks=["olsr"],
                                  click_models=["perfect"], threat_model="server-malicious")
    assert result.attacks.empty
    assert set(result.unscored["reason"]) == {"no scorable list"}


def test_comparing_defenses_none_of_which_scored_a_list_warns_nothing():
    """The privacy-utility table of two defenses whose probes scored no list: F1 baselines of
    nothing are NaN without numpy's warning."""
    from reports.compare import compare

    result = fltr_audit.audit(**TOO_SMALL, defenses=["none", "krum(f=1)"], attacks=["olsr"],
                              click_models=["perfect"])
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        table = compare(dict(result.tables))
    assert set(table["defense"]) == {"none", "krum(f=1)"}
