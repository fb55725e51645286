"""``delta`` as the deprecated alias of ``sensitivity`` (clip, dp-distributed, dp-local-laplace):
the same defense and the same noise, a warning (one line in the CLI), the legacy spelling in run
keys, and stores written with the legacy spelling read back in the current one."""

import hashlib
import json
import warnings

import numpy as np
import pandas as pd
import pytest

from defenses.stack import SPECS, parse_defense
from fltr_audit.spec.run import run_key
from fltr_audit.cli import main
from fltr_audit.store.defense_spelling import RENAMED_COMPONENTS, current_spelling, legacy_spelling
from fltr_audit.errors import FltrDeprecation
from fltr_audit.engine.messages import Messages
from fltr_audit.store.results import ResultsStore, load
from tests.test_bad_inputs import CAMPAIGN_BASE
from tests.cli_json import cli_result

# (written with the deprecated alias, its canonical name)
ALIASED = [
    ("clip(delta=5)", "clip(sensitivity=5)"),
    ("clip(delta=3,of=update)+dp-distributed(eps=2,delta=7)", "clip(sensitivity=3,of=update)+dp-distributed(eps=2,sensitivity=7)"),
    ("clip(delta=2)+dp-distributed(eps=4.5,delta=2)+secagg", "clip(sensitivity=2)+dp-distributed(eps=4.5)+secagg"),
    ("dp-local-laplace(eps=1,delta=2,norm=l2)", "dp-local-laplace(eps=1,sensitivity=2,norm=l2)"),
    ("clip(delta=4)+dp-gaussian(sigma=2)", "clip(sensitivity=4)+dp-gaussian(sigma=2)"),
]


def _noisy_outputs(stack, seed: int = 3) -> list[np.ndarray]:
    """Every client defense of ``stack`` applied in turn to the same messages and random stream."""
    rng = np.random.default_rng(0)
    messages = Messages(n_interactions=np.full(50, 4), vector=rng.normal(0, 3, (50, 12)))
    global_params = rng.normal(0, 1, 12)
    draws, out = np.random.default_rng(seed), []
    for d in stack.client:
        messages = d.apply(messages, global_params, draws)
        out.append(messages.vector)
    return out


@pytest.mark.parametrize("legacy, canonical", ALIASED)
def test_the_alias_gives_the_same_defense_and_warns(legacy, canonical):
    with pytest.warns(FltrDeprecation, match=r"parameter 'delta' is deprecated: write 'sensitivity'") as record:
        old = parse_defense(legacy)
    assert len(record) == 1 and "\n" not in str(record[0].message) and canonical in str(record[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the current spelling does not warn
        new = parse_defense(canonical)
    assert old.name == new.name == canonical
    assert [type(d) for d in old.client] == [type(d) for d in new.client]
    for a, b in zip(old.client, new.client):
        assert vars(a) == vars(b)  # parameters, name and claim
        assert getattr(a, "scale", None) == getattr(b, "scale", None)  # the Laplace scale Delta / eps
    for x, y in zip(_noisy_outputs(old), _noisy_outputs(new)):
        np.testing.assert_array_equal(x, y)


def test_the_deprecation_is_a_future_warning_shown_by_default():
    assert issubclass(FltrDeprecation, FutureWarning)  # shown to users without -W flags
    with pytest.warns(FutureWarning):
        parse_defense("dp-distributed(delta=3)")


def test_the_engine_spelling_agrees_with_the_stack_declarations():
    aliased = {s.name for s in SPECS.values() for p in s.params if p.alias == "delta" and p.name == "sensitivity"}
    assert aliased == set(RENAMED_COMPONENTS)
    for legacy, canonical in ALIASED:
        with pytest.warns(FltrDeprecation):
            assert current_spelling(parse_defense(legacy).name) == parse_defense(legacy).name == canonical


@pytest.mark.parametrize("current, legacy", [
    ("clip(sensitivity=5)+dp-distributed(eps=4.5)", "clip(delta=5)+dp-distributed(eps=4.5)"),
    ("clip(sensitivity=1e+20)+dp-distributed(eps=1,sensitivity=3)+secagg",
     "clip(delta=1e+20)+dp-distributed(eps=1,delta=3)+secagg"),
    ("dp-local-laplace(eps=1,sensitivity=2,norm=l2)+shuffle(n=1000,dp_delta=5e-08)",
     "dp-local-laplace(eps=1,delta=2,norm=l2)+shuffle(n=1000,dp_delta=5e-08)"),
])
def test_spellings_convert_both_ways(current, legacy):
    assert legacy_spelling(current) == legacy and current_spelling(legacy) == current


@pytest.mark.parametrize("name", [
    "none", "secagg", "dp-gaussian(sigma=1,clip=1,dp_delta=1e-05)", "dp-fedavg(noise_multiplier=1,dp_delta=0.001)",
    "rr(p=0.9,values=[0,0.5,1])", "myclip(delta=3)", "clip-plugin(delta=3)",  # plug-ins keep their own delta
])
def test_names_without_the_renamed_parameter_are_left_alone(name):
    assert legacy_spelling(name) == current_spelling(name) == name


def _config(defense: str) -> dict:
    return {"campaign": "c", "algo": "fpdgd", "seed": 0, "defense": defense, "probe": {"cohort": 4}}


def test_run_key_hashes_the_legacy_spelling():
    legacy_body = {k: v for k, v in _config("clip(delta=5)+dp-distributed(eps=4.5)").items() if k != "campaign"}
    expected = hashlib.sha256(json.dumps(legacy_body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]
    assert run_key(_config("clip(sensitivity=5)+dp-distributed(eps=4.5)")) == expected
    assert run_key(_config("clip(delta=5)+dp-distributed(eps=4.5)")) == expected
    assert run_key(_config("clip(sensitivity=6)+dp-distributed(eps=4.5)")) != expected


def _rows(defense: str, auc: float) -> dict:
    return {"attacks": pd.DataFrame([{"algo": "fpdgd", "click_model": "perfect", "defense": defense,
                                      "attack": "olsr", "averaging": "macro", "auc": auc}]),
            "utility": pd.DataFrame([{"algo": "fpdgd", "defense": defense, "ndcg10": 0.7}]),
            "curves": pd.DataFrame([{"defense": defense, "round": 1, "offline_ndcg10": 0.6}]),
            "audits": pd.DataFrame([{"algo": "fpdgd", "defense": defense, "claimed_epsilon": 4.5}]),
            "per_query": pd.DataFrame([{"click_model": "perfect", "defense": defense, "attack": "olsr", "auc": auc}])}


def test_a_store_written_with_the_legacy_spelling_reads_back_in_the_current_one(tmp_path):
    old, new = "clip(delta=5)+dp-distributed(eps=4.5)", "clip(sensitivity=5)+dp-distributed(eps=4.5)"
    other = "dp-gaussian(sigma=1,clip=1,dp_delta=1e-05)"
    store = ResultsStore(tmp_path / "results.sqlite")
    # rows as a version before the rename wrote them (legacy names in the rows and the config) ...
    store.record_run("a" * 16, "c", _config(old), {}, 0, 1.0, _rows(old, 0.6))
    # ... next to rows of the current version, and of a defense without the renamed parameter
    store.record_run("b" * 16, "c", _config(new), {}, 1, 1.0, _rows(new, 0.8))
    store.record_run("c" * 16, "c", _config(other), {}, 2, 1.0, _rows(other, 0.5))
    store.register_pending({"d" * 16: _config(old)}, campaign="c")
    tables = load(tmp_path / "results.sqlite")
    for name in ("attacks", "utility", "curves", "audits", "per_query"):
        assert tables[name]["defense"].tolist() == [new, new, other], name
    assert tables["attacks"].groupby("defense")["auc"].mean().to_dict() == pytest.approx({new: 0.7, other: 0.5})
    assert [json.loads(c)["defense"] for c in tables["runs"]["config"]] == [new, new, other]
    assert json.loads(tables["runs"]["config"][0]) == _config(new)
    assert store.status()["defense"].tolist() == [new, new, other, new]


TINY_CAMPAIGN = (CAMPAIGN_BASE.replace('name = "bad"', 'name = "alias"')
                 .replace('defenses = ["none"]', 'defenses = ["DEFENSE"]')
                 .replace("trials = 100", "epsilon_audit = false\ntrials = 100"))
"""``test_bad_inputs``' one-run campaign, its defense a placeholder, without the epsilon audit."""


def test_cli_prints_the_deprecation_once_as_one_line_and_resumes_across_spellings(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("FLTR_AUDIT_CACHE", str(tmp_path / "cache"))
    legacy, current = tmp_path / "legacy.toml", tmp_path / "current.toml"
    legacy.write_text(TINY_CAMPAIGN.replace("DEFENSE", "clip(delta=3)+dp-distributed(eps=4.5)"))
    current.write_text(TINY_CAMPAIGN.replace("DEFENSE", "clip(sensitivity=3)+dp-distributed(eps=4.5)"))
    store = tmp_path / "results.sqlite"
    assert main(["campaign", "run", str(legacy), "--store", str(store), "--workers", "1", "--json"]) == 0
    out, err = capsys.readouterr()
    assert cli_result(out)["done"] == 1
    # parsed twice (validation, grid): one line, Python's warning block (file:line, source) not shown
    assert err.splitlines() == ["fltr-audit: warning: defense 'clip(delta=3)+dp-distributed(eps=4.5)': clip parameter "
                                "'delta' is deprecated: write 'sensitivity' (canonical name "
                                "clip(sensitivity=3)+dp-distributed(eps=4.5))"]
    assert main(["campaign", "run", str(current), "--store", str(store), "--workers", "1", "--json"]) == 0
    out, err = capsys.readouterr()
    assert (cli_result(out)["done"], cli_result(out)["skipped"], err) == (0, 1, "")  # the same run key
    assert main(["campaign", "status", "--store", str(store), "--json"]) == 0
    assert [r["defense"] for r in cli_result(capsys.readouterr().out)] == ["clip(sensitivity=3)+dp-distributed(eps=4.5)"]
