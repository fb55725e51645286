"""The report's "Unlearning" section: one row per method from the ``unlearning_audits`` rows of real
(tiny) audits, nothing without them."""

from __future__ import annotations

import pandas as pd

import fltr_audit
from reports import sections
from reports.unlearning import COLUMNS

TINY = dict(forget=8, canaries=40, rounds=8, clients=10, population=80, queries_per_client=2,
            data="synthetic:mq2008?queries=60")


def test_one_row_per_method_with_its_bound_leakage_utility_and_cost():
    rows = pd.DataFrame([fltr_audit.audit_unlearning("fpdgd", method=m, **TINY).as_dict()
                         for m in ("retrain", "none", "federaser")])
    results = sections.Results(tables={"unlearning_audits": rows}, table=pd.DataFrame(), verdicts=pd.DataFrame())
    section = sections.unlearning_section(results)
    assert section["title"] == "Unlearning" and len(section["rows"]) == 3
    assert section["columns"] == list(COLUMNS.values())
    cells = [[c["t"] for c in row] for row in section["rows"]]
    by_method = {row[2]: dict(zip(COLUMNS, row)) for row in cells}
    assert by_method["retrain"]["verdict"] == "forgotten" and by_method["none"]["verdict"] == "not forgotten"
    assert "canary-count limit" in by_method["none"]["bound"]
    assert by_method["retrain"]["ndcg"].endswith("(+0.0000)") and by_method["retrain"]["distance"] == "0"
    assert section["download"]["name"] == "unlearning.csv"
    assert sections.unlearning_section in sections.SECTIONS


def test_no_section_without_unlearning_rows():
    empty = sections.Results(tables={}, table=pd.DataFrame(), verdicts=pd.DataFrame())
    assert sections.unlearning_section(empty) is None
