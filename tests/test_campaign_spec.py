"""Campaign files: validation naming the key, grid expansion, run keys."""

import dataclasses
import subprocess
import sys
import textwrap

import pytest

from fltr_audit.spec.campaign import load_spec, validate_spec

from fltr_audit.spec.grid import expand

from fltr_audit.spec.run import run_key
from fltr_audit.errors import FltrError

SPEC = """
name = "grid"
seeds = [0, 1]

[data]
spec = ["synthetic:mq2008"]
folds = [1, 2]

[algorithm]
name = "fpdgd"
rounds = [2]
clients = [10]
queries_per_client = 2
params = { lr = [0.1, 0.05] }

[probe]
click_models = ["perfect", "navigational"]
probe_cohort = [5]

[audit]
defenses = ["none"]
attacks = ["olsr", "random3"]
"""


def write(tmp_path, text):
    path = tmp_path / "c.toml"
    path.write_text(textwrap.dedent(text))
    return path


def test_grid_is_the_product_of_every_axis(tmp_path):
    runs = expand(load_spec(write(tmp_path, SPEC)))
    # 2 seeds x 2 folds x 2 learning rates; click models and attacks stay inside a run.
    assert len(runs) == 8
    assert {(r.config["seed"], r.config["fold"], r.config["params"]["lr"]) for r in runs} == {
        (s, f, lr) for s in (0, 1) for f in (1, 2) for lr in (0.1, 0.05)
    }
    assert all(r.config["probe"]["click_models"] == ["perfect", "navigational"] for r in runs)
    assert len({r.key for r in runs}) == 8


def test_run_key_changes_with_any_setting_but_not_the_campaign_name(tmp_path):
    run = expand(load_spec(write(tmp_path, SPEC)))[0]
    assert run_key({**run.config, "campaign": "renamed"}) == run.key
    for key, value in [("seed", 99), ("fold", 5), ("rounds", 3), ("defense", "secagg")]:
        assert run_key({**run.config, key: value}) != run.key
    nested = {**run.config, "probe": {**run.config["probe"], "cohort": 6}}
    assert run_key(nested) != run.key


def test_run_key_is_stable_across_processes(tmp_path):
    path = write(tmp_path, SPEC)
    here = [r.key for r in expand(load_spec(path))]
    code = (f"from fltr_audit.spec.campaign import load_spec; from fltr_audit.spec.grid import expand; "
            f"print(','.join(r.key for r in expand(load_spec({str(path)!r}))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONHASHSEED": "123", "PATH": ""})
    assert out.stdout.strip().split(",") == here


@pytest.mark.parametrize(
    "raw, key",
    [
        ({"name": "x", "colour": 1}, "'colour'"),
        ({"name": "x", "algorithm": {"rounds": "ten"}}, "'algorithm.rounds'"),
        ({"name": "x", "algorithm": {"rounds": []}}, "'algorithm.rounds'"),
        ({"name": "x", "probe": {"probe_cohort": [0]}}, "'probe.probe_cohort'"),
        ({"name": "x", "probe": {"counterfactual": 0}}, "'probe.counterfactual'"),
        ({"name": "x", "algorithm": {"name": "sgd"}}, "'algorithm.name'"),
        ({"name": "x", "probe": {"click_models": ["lazy"]}}, "'probe.click_models'"),
        ({"name": "x", "data": {"splitz": 1}}, "'data.splitz'"),
        ({"seeds": [1]}, "'name'"),
    ],
)
def test_bad_specs_name_the_key(raw, key):
    with pytest.raises(FltrError, match=key):
        validate_spec(raw)


def test_unknown_defense_and_attack_fail_before_any_run():
    with pytest.raises(FltrError, match="audit.defenses"):
        validate_spec({"name": "x", "audit": {"defenses": ["none", "tinfoil(eps=1)"]}})
    with pytest.raises(FltrError, match="audit.attacks"):
        validate_spec({"name": "x", "audit": {"attacks": ["telepathy"]}})


def test_missing_and_invalid_files(tmp_path):
    with pytest.raises(FltrError, match="no such campaign file"):
        load_spec(tmp_path / "absent.toml")
    with pytest.raises(FltrError, match="not valid TOML"):
        load_spec(write(tmp_path, "name = \n"))
    huge = tmp_path / "huge.toml"
    huge.write_bytes(b'name = "x"\n' + b"# padding\n" * 110_000)
    with pytest.raises(FltrError, match="larger than any campaign file"):
        load_spec(huge)


def test_example_campaigns_validate(mq2008_dir, monkeypatch):
    """Every file in campaigns/ is a valid spec (run from the project root, as documented)."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    monkeypatch.chdir(root)
    if not (root.parent / "shared" / "data" / "letor" / "MQ2008").is_dir():
        pytest.skip("campaigns name ../shared/data/letor/MQ2008, absent here")
    for path in sorted((root / "campaigns").glob("*.toml")):
        assert expand(load_spec(path), max_runs=None), path  # a grid above the default cap says --max-runs


def test_missing_data_path_names_the_key():
    with pytest.raises(FltrError, match="'data.spec'"):
        validate_spec({"name": "x", "data": {"spec": "no/such/folder"}})


def test_algorithm_setting_names_the_grid_parameters():
    from fltr_audit.runs.audit import algorithm_setting
    from fltr_audit.spec.campaign import validate_spec
    from fltr_audit.spec.grid import expand

    run = expand(validate_spec({"name": "t"}))[0].spec
    assert algorithm_setting(run) == ""
    tuned = dataclasses.replace(run.algorithm, params={"lr_local": 0.01, "gamma": 0.5}, ranker="mlp")
    assert algorithm_setting(run.replace(algorithm=tuned)) == "ranker=mlp,gamma=0.5,lr_local=0.01"


def test_a_pbm_algorithm_trains_and_is_probed_by_its_declared_click_model():
    # without the file naming them, the cascade defaults were refused ("does not fit algorithm")
    implicit = validate_spec({"name": "p", "algorithm": {"name": "fedavg"}})
    explicit = validate_spec({"name": "p", "algorithm": {"name": "fedavg", "train_click_model": "pbm"},
                              "probe": {"click_models": ["pbm"]}})
    assert implicit.algorithm.train_click_model == "pbm" and implicit.probe.click_models == ("pbm",)
    assert [r.key for r in expand(implicit)] == [r.key for r in expand(explicit)]
    cascade = validate_spec({"name": "p"})  # cascade algorithms keep the defaults
    assert cascade.algorithm.train_click_model == "perfect"
    assert cascade.probe.click_models == ("perfect", "navigational", "informational")


def test_the_old_probe_cohort_key_still_reads_with_one_warning():
    """``[probe] cohort`` is the deprecated spelling of ``probe_cohort``: same runs, same keys."""
    from fltr_audit.errors import FltrDeprecation

    new = expand(validate_spec({"name": "x", "probe": {"probe_cohort": [7, 9]}}))
    with pytest.warns(FltrDeprecation, match="'probe.cohort' is deprecated: write 'probe.probe_cohort'"):
        old = expand(validate_spec({"name": "x", "probe": {"cohort": [7, 9]}}))
    assert [r.key for r in old] == [r.key for r in new] and {r.spec.probe.cohort for r in old} == {7, 9}
    with pytest.raises(FltrError, match="'probe.cohort' and 'probe.probe_cohort' both set"):
        validate_spec({"name": "x", "probe": {"cohort": 7, "probe_cohort": 7}})
