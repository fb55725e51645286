"""One schema: the store's tables, docs/store.md and the store's docstring list the fields of
the typed records (fltr_audit/store/records.py)."""

import dataclasses
import re
from pathlib import Path

import pytest

from fltr_audit.store import records
from fltr_audit.store import results as store

REPO = Path(__file__).resolve().parents[1]
SQL_TYPE = re.compile(r"^(\w+) (TEXT|INTEGER|REAL|BOOLEAN)\b")


def _documented(cells: str) -> dict[str, str]:
    """``{column: type}`` of a comma-separated column list, ``run_key`` and ``extra`` left out."""
    found = {}
    for cell in re.split(r",\s*(?![^()]*\))", cells):
        match = SQL_TYPE.match(cell.strip())
        if match:
            found[match.group(1)] = match.group(2)
        else:
            assert cell.strip().split(" ")[0] in ("run_key", "extra"), cell
    return found


def _docs_tables() -> dict[str, dict[str, str]]:
    text = (REPO / "docs" / "store.md").read_text()
    return {name: _documented(cells) for name, cells in re.findall(r"^\| `(\w+)` \| (.*) \|$", text, re.M)
            if name in records.RECORDS}


def _docstring_tables() -> dict[str, dict[str, str]]:
    text = store.__doc__.replace("'done'|'failed'", "")
    return {name: _documented(" ".join(cells.split())) for name, cells in re.findall(r"^\s*(\w+)\(([^)]*)\)", text, re.M)
            if name in records.RECORDS}


def test_store_tables_are_the_record_fields_in_order():
    assert list(store.TABLES) == list(records.RECORDS)
    for name, record in records.RECORDS.items():
        assert list(store.TABLES[name]) == [f.name for f in dataclasses.fields(record)]


@pytest.mark.parametrize("table", sorted(records.RECORDS))
def test_docs_store_md_lists_the_record_columns_and_types(table):
    docs = _docs_tables()
    assert list(docs[table].items()) == list(store.TABLES[table].items())


@pytest.mark.parametrize("table", sorted(records.RECORDS))
def test_store_docstring_lists_the_record_columns_and_types(table):
    assert list(_docstring_tables()[table].items()) == list(store.TABLES[table].items())


def test_records_are_frozen():
    row = records.EpsilonRecord(click_model="perfect", levels=2, length=10, p=0.5, epsilon=1.0, theoretical=1.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        row.epsilon = 2.0


def test_an_annotation_without_an_sql_type_is_refused():
    @dataclasses.dataclass(frozen=True)
    class Bad:
        values: list

    with pytest.raises(KeyError):
        records.columns(Bad)


def test_audit_record_is_run_then_measurement_then_privacy():
    def names(record):
        return [f.name for f in dataclasses.fields(record)]

    assert names(records.AuditRecord) == (names(records.AuditedRun) + names(records.AuditMeasurement)
                                          + names(records.RunPrivacy) + ["audit_key"])


def test_an_audit_result_carries_every_measured_column():
    from attacks.epsilon_bounds import AuditResult
    from fltr_audit.runs.epsilon_audits import AUDIT_COLUMNS

    measured = [f.name for f in dataclasses.fields(AuditResult)]
    assert tuple(measured[:len(AUDIT_COLUMNS)]) == AUDIT_COLUMNS
    assert measured[len(AUDIT_COLUMNS):] == ["threshold", "direction"]
