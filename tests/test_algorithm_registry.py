"""The algorithm registry: one declaration per algorithm, read by train, audit and campaigns."""

import json

import pytest

from fltr_audit.engine.algorithms import registry
from fltr_audit.engine.algorithms.fedips import FedIPS
from fltr_audit.engine.algorithms.foltr_es import FOLtRES
from fltr_audit.engine.algorithms.fpdgd import FPDGD
from fltr_audit.cli import main
from fltr_audit.engine.data.load import load_splits
from fltr_audit.errors import FltrError
from tests.cli_json import cli_result


@pytest.fixture(scope="module")
def splits():
    return load_splits("synthetic:mq2008?queries=120", 1, normalization="query-minmax")


@pytest.mark.parametrize("name, cls, click_model, kind", [
    ("fpdgd", FPDGD, "navigational", "weights"), ("foltr-es", FOLtRES, "perfect", "seed+metric"),
    ("fedips", FedIPS, "pbm", "update"), ("fedavg", FedIPS, "pbm", "update"),
])
def test_builds_what_it_declares(splits, name, cls, click_model, kind):
    spec = registry.algorithm_spec(name)
    alg = registry.build(name, splits, click_model, {"seed": 0, "clients": 20, "queries_per_client": 2})
    assert isinstance(alg, cls) and alg.name == name and spec.message_kind == kind
    assert alg.k == spec.k and set(spec.default_attacks) and spec.reveals
    assert click_model in spec.probe_click_models()


def test_click_model_family_and_unknown_names(splits):
    with pytest.raises(FltrError, match="position-based"):
        registry.build("fedips", splits, "perfect", {})
    with pytest.raises(FltrError, match="^click_model: fpdgd's users click by a cascade model"):
        registry.build("fpdgd", splits, "pbm", {})
    with pytest.raises(FltrError) as info:
        registry.algorithm_spec("sgd")
    assert str(info.value) == ("algorithm.name: unknown algorithm 'sgd' (choose from "
                               + ", ".join(s.name for s in registry.algorithm_specs()) + ")")
    with pytest.raises(FltrError, match="unknown algorithm 'pdgd'"):
        registry.algorithm_spec("pdgd", auditable=True)  # train-only


def test_registered_algorithm_is_auditable_by_name(splits):
    base = registry.algorithm_spec("fpdgd")
    registry.register_algorithm(registry.AlgorithmSpec(
        "fpdgd-slow", lambda s, m, settings: base.build(s, m, {**settings, "params": {"lr": 0.01}}), "cascade",
        "zscore", ("olsr",), "weights", "the local weights", "perfect"))
    assert "fpdgd-slow" in registry.algorithm_names(auditable=True)
    assert registry.build("fpdgd-slow", splits, "perfect", {}).lr == 0.01
    from fltr_audit.spec.campaign import validate_spec

    validate_spec({"name": "x", "algorithm": {"name": "fpdgd-slow"}})
    del registry._REGISTRY["fpdgd-slow"]  # the registry is process-wide


def test_algorithms_list_json(capsys):
    assert main(["algorithms", "list", "--json"]) == 0
    rows = {r["name"]: r for r in cli_result(capsys.readouterr().out)}
    assert rows["fedips"]["probe_click_models"] == ["pbm"] and rows["lambda-linear"]["auditable"] is False
    assert main(["attacks", "list", "--json"]) == 0
    attacks = {r["name"]: r for r in cli_result(capsys.readouterr().out)}
    assert attacks["random3"]["reference"] is True and attacks["seed-replay"]["needs"] == ["algorithm"]
    assert main(["--version"]) == 0 and capsys.readouterr().out.startswith("fltr-audit ")


def test_train_fpdgd_defaults_run_on_mq2008(mq2008_dir, tmp_path, capsys):
    """1,000 clients x 4 queries exceed MQ2008's training queries: sampled with replacement, said once."""
    assert main(["train", "fpdgd", "--data", str(mq2008_dir), "--rounds", "1", "--out", str(tmp_path / "run"),
                 "--quiet", "--json"]) == 0
    out = capsys.readouterr()
    assert out.err.count("with replacement") == 0  # --quiet silences the note
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["normalization"] == "zscore"  # the registry's default, as audit uses
    assert main(["train", "fpdgd", "--data", str(mq2008_dir), "--rounds", "1", "--out", str(tmp_path / "run2")]) == 0
    assert capsys.readouterr().err.count("sampling them with replacement") == 1
