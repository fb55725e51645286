"""``fltr-audit audit-unlearning`` and ``fltr_audit.audit_unlearning``: bad input is one line naming
the option (exit 2, nothing written), ``--json`` carries the verdicts at the top level, ``--store``
records the row; and click recovery from what unlearning shows (``runs.unlearning_leakage``)."""

from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import pytest

import fltr_audit
from fltr_audit.cli import main
from fltr_audit.constraints import ParameterError

DATA = "synthetic:mq2008?queries=60"
SMALL = ["--rounds", "4", "--clients", "10", "--population", "40", "--queries-per-client", "2", "--data", DATA,
         "--canaries", "10"]


def run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


BAD = [
    ("forget-beyond-population", ["--forget", "41"], "--forget", "more than the population"),
    ("method-unsupported", ["--method", "pga"], "--method", "does not support unlearning method 'pga'"),
    ("method-unknown", ["--method", "erase"], "--method", "must be one of"),
    ("canaries-beyond-population", ["--canaries", "41"], "--canaries", "more than the population"),
    ("forget-negative", ["--forget", "-1"], "--forget", "must be an integer >= 0"),
    ("nothing-to-forget", ["--canaries", "0"], "--canaries", "nothing to forget"),
    ("nobody-left", ["--forget", "30"], "--forget", "leave none"),
    ("federaser-under-secagg", ["--defense", "secagg"], "--method", "hides them"),
    ("poison-check-fedips", ["--poison-check"], "--poison-check", "does not simulate per-user clicks"),
    ("interval-zero", ["--interval", "0"], "--interval", "must be an integer >= 1"),
    ("calibration-zero", ["--calibration", "0"], "--calibration", "must be"),
    ("scale-zero", ["--scale", "0"], "--scale", "must be"),
    ("krum-above-the-cohort", ["--defense", "krum(f=4)", "--method", "retrain"], "--defense", "below 2f + 3 = 11"),
]


@pytest.mark.parametrize("case,args,option,problem", BAD, ids=[b[0] for b in BAD])
def test_bad_input_is_one_line_naming_the_option_and_nothing_is_written(tmp_path, case, args, option, problem):
    algorithm = {"method-unsupported": "foltr-es", "poison-check-fedips": "fedips"}.get(case, "fpdgd")
    store = tmp_path / "s.sqlite"
    code, out, err = run(["audit-unlearning", algorithm, *SMALL, *args, "--store", str(store), "--quiet"])
    lines = err.strip().splitlines()
    assert code == 2 and out == "" and len(lines) == 1, err
    assert option in lines[0] and problem in lines[0], lines[0]
    assert not store.exists()


def test_the_python_api_names_its_keyword():
    with pytest.raises(ParameterError) as info:
        fltr_audit.audit_unlearning("fpdgd", forget=-3, rounds=2, clients=5, population=20)
    assert info.value.parameter == "forget"
    with pytest.raises(fltr_audit.errors.FltrError, match="unknown keyword 'forgotten'"):
        fltr_audit.audit_unlearning("fpdgd", forgotten=3)


def test_json_has_the_verdicts_at_the_top_level_and_the_store_keeps_the_row(tmp_path):
    from fltr_audit.store.results import load

    store = tmp_path / "u.sqlite"
    code, out, err = run(["audit-unlearning", "fpdgd", "--rounds", "8", "--clients", "10", "--population", "80",
                          "--queries-per-client", "2", "--data", DATA, "--method", "none", "--forget", "8",
                          "--canaries", "40", "--store", str(store), "--json", "--quiet"])
    assert code == 0, err
    result = json.loads(out)["result"]
    assert result["verdict"] == "not forgotten" and "server_verdict" in result and result["run_key"]
    row = load(store)["unlearning_audits"]
    assert len(row) == 1 and row["verdict"].iloc[0] == "not forgotten" and row["run_key"].iloc[0] == result["run_key"]
    again = fltr_audit.audit_unlearning("fpdgd", method="none", forget=8, canaries=40, rounds=8, clients=10,
                                        population=80, queries_per_client=2, data=DATA)
    assert again.epsilon_lb == result["epsilon_lb"] and again.audit_key == result["audit_key"]


def test_the_table_prints_the_verdicts():
    code, out, err = run(["audit-unlearning", "fpdgd", *SMALL, "--method", "retrain", "--forget", "4", "--quiet"])
    assert code == 0, err
    assert "verdict: FORGOTTEN" in out and "server:" in out and "cost:" in out


def test_clicks_are_recovered_from_kept_updates_and_nothing_from_an_unchanged_model():
    """The kept updates are the forgotten users' own messages: the attacks read their clicks; the
    difference of ``none`` is zero: no attack can do better than the counterfactual."""
    out = fltr_audit.audit_unlearning("fpdgd", method="federaser", forget=30, canaries=4, rounds=10, clients=20,
                                      population=60, interval=2, data=DATA)
    assert out.stored_verdict == "leaks" and out.stored_leakage > 0.05
    none = fltr_audit.audit_unlearning("fpdgd", method="none", forget=30, canaries=4, rounds=10, clients=20,
                                       population=60, data=DATA)
    assert none.difference_verdict != "leaks" and abs(none.difference_leakage) < 1e-12
    assert np.isnan(none.stored_leakage) and none.stored_verdict == "nothing to attack"


def test_each_forgotten_users_difference_message_carries_exactly_its_training_lists():
    """The difference views against a naive record of the same rounds: per user, every list it was
    shown in training, in round order, its clicks, and the update before - after."""
    from fltr_audit.engine.algorithms import registry as algorithms
    from fltr_audit.engine.data.load import load_splits
    from fltr_audit.engine.federation import train
    from fltr_audit.engine.training import TrainHooks, TrainSettings
    from fltr_audit.runs.unlearning_leakage import ForgottenRounds, difference_batches

    splits = load_splits(DATA, 1)
    alg = algorithms.build("fpdgd", splits, "perfect", {"seed": 0, "params": {}})
    users = np.array([3, 7, 12, 19, 25])
    record, naive = ForgottenRounds(users), {}

    def remember(batch):
        for i, u in enumerate(batch.truth.client_ids):
            if u in users:
                naive.setdefault(int(u), []).append((batch.view.interactions.shown[i], batch.truth.clicks[i]))

    s = TrainSettings(clients=8, queries_per_client=2, rounds=9, seed=1, population=30)
    before = train(alg, splits.train, s, hooks=TrainHooks(interceptors=(record, remember))).params
    after = before * 0.5
    batches = difference_batches(record, before, after, alg, splits.train, "weights")
    seen = {}
    for b in batches:
        assert np.allclose(b.view.messages.updates(b.view.global_params), before - after)
        for i, u in enumerate(b.truth.client_ids):
            seen[int(u)] = (b.view.interactions.shown[i], b.truth.clicks[i])
    assert sorted(seen) == sorted(naive)
    for u, parts in naive.items():
        assert np.array_equal(seen[u][0], np.concatenate([p[0] for p in parts]))
        assert np.array_equal(seen[u][1], np.concatenate([p[1] for p in parts]))
