"""The campaign axis ``[unlearning] method``: each run of the grid also stores its unlearning audit
(``unlearning_audits``), a bad value is named by its key before any store is written, and campaigns
without the table keep their run keys (``tests/test_campaign_run_keys.py`` pins them)."""

from __future__ import annotations

import pytest

from fltr_audit.cli import main
from fltr_audit.spec.campaign import validate_spec
from fltr_audit.spec.grid import expand

BASE = """\
name = "forget"
seeds = [0]
[data]
spec = ["synthetic:mq2008?queries=60"]
[algorithm]
name = ["fpdgd"]
rounds = [8]
clients = [10]
queries_per_client = [2]
population = 80
[probe]
click_models = ["perfect"]
probe_cohort = [10]
[audit]
defenses = ["none"]
attacks = ["random3"]
epsilon_audit = false
[unlearning]
method = ["retrain", "none"]
forget = 8
canaries = 40
"""


def test_the_method_is_a_grid_axis_and_each_run_stores_its_unlearning_row(tmp_path):
    import tomllib

    from fltr_audit.store.results import load

    runs = expand(validate_spec(tomllib.loads(BASE)))
    assert [r.spec.audit.unlearning for r in runs] == ["retrain", "none"]
    assert runs[0].config["unlearning_forget"] == 8 and "unlearning_canaries" not in runs[0].config  # the default
    path = tmp_path / "c.toml"
    path.write_text(BASE)
    assert main(["campaign", "run", str(path), "--store", str(tmp_path / "s.sqlite"), "--quiet"]) == 0
    rows = load(tmp_path / "s.sqlite")["unlearning_audits"].set_index("method")
    assert rows.loc["retrain", "verdict"] == "forgotten" and rows.loc["none", "verdict"] == "not forgotten"


BAD = [
    ("method-unknown", ('method = ["retrain", "none"]', 'method = "erase"'), "unlearning.method"),
    ("forget-beyond-population", ("forget = 8", "forget = 81"), "unlearning.forget"),
    ("canaries-beyond-population", ("canaries = 40", "canaries = 90"), "unlearning.canaries"),
    ("forget-negative", ("forget = 8", "forget = -1"), "unlearning.forget"),
    ("method-needs-messages", ('defenses = ["none"]', 'defenses = ["secagg"]'), "unlearning.method"),
]


@pytest.mark.parametrize("case,change,key", BAD, ids=[b[0] for b in BAD])
def test_a_bad_unlearning_value_is_named_by_its_key_before_any_store(tmp_path, capsys, case, change, key):
    text = BASE.replace(*change)
    if case == "method-needs-messages":
        text = text.replace('method = ["retrain", "none"]', 'method = ["federaser"]')
    path = tmp_path / "bad.toml"
    path.write_text(text)
    assert main(["campaign", "run", str(path), "--store", str(tmp_path / "s.sqlite"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"key '{key}'" in err[0], err
    assert not (tmp_path / "s.sqlite").exists()
