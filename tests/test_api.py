"""The Python API: same numbers as the CLI, validation up front, plug-ins by registration."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import fltr_audit
from fltr_audit.errors import FltrError
from fltr_audit.engine.interfaces import PrivacyClaim
from fltr_audit.engine.messages import Guess
from tests.cli_json import cli_result

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def restore_registries():
    """Registrations made by a test end with it (the registries are process-wide)."""
    from attacks import registry as attacks
    from defenses import stack

    saved = [(d, d.copy()) for d in (attacks.ATTACK_SPECS, stack.SPECS)]
    sets = [(s, set(s)) for s in (attacks._PLUGINS,)]
    yield
    for d, copy in saved:
        d.clear()
        d.update(copy)
    for s, copy in sets:
        s.clear()
        s.update(copy)
SMALL = dict(data="synthetic:mq2008?queries=150", rounds=2, clients=40, queries_per_client=2,
             click_models=["perfect"], probe_cohort=20, min_shown=5, trials=200)


def _cli_json(*args: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-m", "fltr_audit", *args, "--json", "--quiet"], cwd=REPO, env=env,
                         capture_output=True, text=True, check=True)
    return cli_result(out.stdout)


def test_audit_matches_the_cli_json():
    """The issue's acceptance call equals `fltr-audit audit --json` (computed in another process)."""
    result = fltr_audit.audit(data="synthetic:mq2008", rounds=5, attacks=["olsr"], defenses=["none"],
                              click_models=["perfect"], seeds=[0])
    cli = _cli_json("audit", "--data", "synthetic:mq2008", "--rounds", "5", "--attack", "olsr",
                    "--defense", "none", "--click-model", "perfect", "--seed", "0")
    expected = pd.DataFrame(cli["attacks"]).astype(object).where(lambda f: f.notna(), np.nan)  # JSON null is NaN
    pd.testing.assert_frame_equal(result.attacks.reset_index(drop=True), expected, check_dtype=False)
    assert result.utility["ndcg10"].tolist() == pytest.approx([u["ndcg10"] for u in cli["utility"]], abs=0)
    assert result.inputs["rounds"] == 5 and result.inputs["clients"] == 1000  # the CLI's default


def test_the_old_keywords_still_work_with_one_warning():
    from fltr_audit.errors import FltrDeprecation

    with pytest.warns(FltrDeprecation, match="'algo' is deprecated: write 'algorithm'"):
        old = fltr_audit.audit(algo="fpdgd", epsilon_audit=False, attacks=["olsr"], **SMALL)
    new = fltr_audit.audit(algorithm="fpdgd", epsilon_audit=False, attacks=["olsr"], **SMALL)
    pd.testing.assert_frame_equal(old.attacks, new.attacks)
    with pytest.raises(FltrError, match="give 'rounds' only"):
        fltr_audit.audit(rounds=2, train_rounds=2)


def test_defaults_are_the_commands():
    defaults = fltr_audit.audit_defaults()
    assert defaults["rounds"] == 20 and defaults["defenses"] == ["none"] and defaults["seeds"] == [0]
    assert defaults["attacks"] is None and defaults["click_models"] is None  # None: the algorithm's own
    assert "json_out" not in defaults and "quiet" not in defaults


@pytest.mark.parametrize("kwargs, words", [
    ({"train_round": 3}, ["train_round", "rounds"]),
    ({"rounds": "3"}, ["rounds", "int"]),
    ({"seeds": [0, "1"]}, ["seeds", "'1'"]),
    ({"epsilon_audit": 1}, ["epsilon_audit"]),
    ({"algo": "sgd"}, ["sgd", "fpdgd", "foltr-es"]),
    ({"attacks": ["nope"]}, ["nope", "olsr"]),
    ({"defenses": ["tinfoil"]}, ["tinfoil"]),
])
def test_bad_keywords_are_one_line_errors(kwargs, words):
    with pytest.raises(FltrError) as info:
        fltr_audit.audit(**kwargs)
    text = str(info.value)
    assert "\n" not in text and all(w in text for w in words), text


class _Loudest:
    """Guesses the shown document with the largest feature sum: reads no message at all."""

    name = "loudest"

    def __init__(self, seed: int = 0):
        self.seed = seed

    def guess(self, view):
        shown = view.interactions.shown
        score = np.where(shown >= 0, view.documents.features[np.maximum(shown, 0)].sum(axis=-1), np.nan)
        return Guess(attack=self.name, score=score, decision=(score == np.nanmax(score, axis=-1, keepdims=True)))


class _Zero:
    """Sends the global model: every update is 0."""

    claim = PrivacyClaim()

    def __init__(self, scale: float = 0.0):
        self.scale = scale

    def apply(self, messages, global_params, rng):
        return messages.with_updates(self.scale * messages.updates(global_params), global_params)


def test_registered_attack_and_defense_run_in_an_audit():
    fltr_audit.register_attack("loudest", _Loudest, reference=True, needs=("seed",))
    fltr_audit.register_defense("zero-update", _Zero, guarantee="none")
    result = fltr_audit.audit(attacks=["loudest", "olsr"], defenses=["none", "zero-update"], **SMALL)
    rows = result.attacks.set_index(["defense", "attack"])
    assert set(rows.index) == {(d, a) for d in ("none", "zero-update(scale=0)") for a in ("loudest", "olsr")}
    # the attack ignores messages, so the defense changes nothing for it; OLSR loses everything
    assert rows.loc[("none", "loudest"), "f1"] == rows.loc[("zero-update(scale=0)", "loudest"), "f1"]
    assert rows.loc[("zero-update(scale=0)", "olsr"), "f1"] < rows.loc[("none", "olsr"), "f1"]
    from fltr_audit.api.listing import attack_rows

    assert {"name": "loudest", "reference": True, "needs": ["seed"], "distribution": ""} in [
        {k: row[k] for k in ("name", "reference", "needs", "distribution")} for row in attack_rows()]
    with pytest.raises(FltrError, match="already registered"):
        fltr_audit.register_attack("loudest", _Loudest)


def test_failing_factories_name_the_plugin():
    def broken(**params):
        raise RuntimeError("no GPU")

    fltr_audit.register_attack("needs-gpu", broken)
    fltr_audit.register_defense("needs-gpu-too", broken)
    for kwargs, name in (({"attacks": ["needs-gpu"]}, "needs-gpu"), ({"defenses": ["needs-gpu-too"]}, "needs-gpu-too")):
        with pytest.raises(FltrError) as info:
            fltr_audit.audit(**{**SMALL, **kwargs})
        assert f"plug-in {name!r} failed: RuntimeError: no GPU" in str(info.value)


def test_campaign_from_a_dict_returns_the_same_result_object(tmp_path):
    spec = {"name": "api", "data": {"spec": "synthetic:mq2008?queries=150"},
            "algorithm": {"rounds": 2, "clients": 40, "queries_per_client": 2},
            "probe": {"click_models": ["perfect"], "probe_cohort": 20, "min_shown": 5},
            "audit": {"attacks": ["olsr"], "epsilon_audit": False}}
    memory = fltr_audit.audit_campaign(spec)
    stored = fltr_audit.audit_campaign(spec, store=tmp_path / "runs.sqlite")
    assert isinstance(memory, fltr_audit.AuditResult)
    pd.testing.assert_frame_equal(memory.attacks, stored.attacks.reset_index(drop=True), check_dtype=False)
    from fltr_audit.store.results import ResultsStore

    status = ResultsStore(tmp_path / "runs.sqlite").status()  # `campaign status` shows algorithm and defense
    assert status[["status", "algo", "defense"]].values.tolist() == [["done", "fpdgd", "none"]]
    from fltr_audit.spec.grid import expand

    assert len(expand(memory.spec)) == 1


def test_report_writes_the_html(tmp_path):
    result = fltr_audit.audit(attacks=["olsr", "random3"], epsilon_audit=False, **SMALL)
    html = result.report(tmp_path / "report")
    assert Path(html).is_file() and "fltr_audit.audit(" in (tmp_path / "report" / "report.md").read_text()


def test_example_script_registers_and_audits():
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "examples/custom_attack_and_defense.py", "--rounds", "2"], cwd=REPO,
                         env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "quantize(step=0.5)" in out.stdout and "dot" in out.stdout


def test_summary_prints_both_verdict_tables_as_the_console_does_and_roc_is_a_dataframe(capsys):
    from fltr_audit.cli import main

    result = fltr_audit.audit(attacks=["olsr", "random3"], defenses=["none", "secagg"], **SMALL)
    text = result.summary()
    assert capsys.readouterr().out.rstrip("\n") == text
    assert main(["audit", "--data", SMALL["data"], "--rounds", "2", "--clients", "40", "--queries-per-client",
                 "2", "--click-model", "perfect", "--probe-cohort", "20", "--min-shown", "5", "--trials", "200",
                 "--attack", "olsr,random3", "--defense", "none", "--defense", "secagg", "--quiet"]) == 0
    console = capsys.readouterr().out
    assert text in console                     # the same two tables, character for character
    assert "Leakage verdict" in text and "Claim verdict" in text and "secagg" in text
    roc = result.roc
    assert isinstance(roc, pd.DataFrame) and set(roc["attack"]) == {"olsr", "random3"}
    assert {"fpr", "tpr", "curve"} <= set(roc.columns) and isinstance(result.verdicts, pd.DataFrame)
