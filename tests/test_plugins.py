"""Entry-point plug-ins: an installed package adds an attack, a defense or an algorithm without
touching the project; a broken one fails with one line and never breaks other commands."""

import functools
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.cli_json import cli_result

REPO = Path(__file__).resolve().parents[1]

PACKAGE = '''
import numpy as np
from fltr_audit.engine.interfaces import PrivacyClaim
from fltr_audit.engine.messages import Guess


class FirstSlot:
    name = "first-slot"

    def guess(self, view):
        shown = view.interactions.shown
        decision = np.zeros(shown.shape, dtype=bool)
        decision[..., 0] = shown[..., 0] >= 0
        return Guess(attack=self.name, score=np.where(shown >= 0, decision.astype(float), np.nan), decision=decision)


def first_slot(seed=0):
    return FirstSlot()


first_slot.reference = True
first_slot.needs = ("seed",)


class Halve:
    claim = PrivacyClaim()

    def __init__(self, factor: float = 0.5):
        self.factor = factor

    def apply(self, messages, global_params, rng):
        return messages.with_updates(self.factor * messages.updates(global_params), global_params)


Halve.guarantee = "none"


def _pbm_spec():
    """A PBM-family plug-in algorithm (FedAvg's builder under another name, its own parameters)."""
    from fltr_audit.engine.algorithms.registry import AlgorithmSpec, algorithm_spec
    from fltr_audit.constraints import Interval, Parameter

    fedavg = algorithm_spec("fedavg")
    return AlgorithmSpec("my-pbm", fedavg.build, "pbm", "query-minmax", ("olsr",), "update", "an update", "pbm",
                         k=5, summary="a PBM plug-in", params=(Parameter("gamma", 1.0, (Interval(float, 0, None),)),))


PBM_SPEC = _pbm_spec()
'''

ENTRY_POINTS = '''[fltr_audit.attacks]
first-slot = myplug:first_slot
broken-attack = not_a_module:thing

[fltr_audit.defenses]
halve = myplug:Halve

[fltr_audit.engine.algorithms]
my-pbm = myplug:PBM_SPEC
broken-algo = not_a_module:thing
'''


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """A folder that looks like an installed distribution ``myplug`` (importlib.metadata finds it on the path)."""
    root = tmp_path_factory.mktemp("site")
    (root / "myplug.py").write_text(PACKAGE)
    info = root / "myplug-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: myplug\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(ENTRY_POINTS)
    return root


@functools.cache
def _cli(site: Path, *args: str) -> subprocess.CompletedProcess:
    """``fltr-audit ARGS`` with the plug-in site on the path; run once per module (the listing
    commands are shared by the tests that read them)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(site)])}
    return subprocess.run([sys.executable, "-m", "fltr_audit", *args], cwd=REPO, env=env, capture_output=True,
                          text=True)


def test_installed_attack_and_defense_are_found_by_name(site):
    out = _cli(site, "audit", "--data", "synthetic:mq2008?queries=150", "--rounds", "2", "--clients", "40",
               "--queries-per-client", "2", "--attack", "first-slot,olsr", "--defense", "none",
               "--defense", "halve", "--click-model", "perfect", "--probe-cohort", "20", "--min-shown", "5",
               "--no-epsilon-audit", "--json", "--quiet")
    assert out.returncode == 0, out.stderr
    rows = {(r["defense"], r["attack"]) for r in cli_result(out.stdout)["attacks"]}
    assert rows == {(d, a) for d in ("none", "halve(factor=0.5)") for a in ("first-slot", "olsr")}


def test_broken_entry_point_is_one_line_and_breaks_nothing_else(site):
    out = _cli(site, "audit", "--attack", "broken-attack", "--quiet")
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "broken-attack" in lines[0] and "ModuleNotFoundError" in lines[0], out.stderr
    for command in (["attacks", "list", "--json"], ["defenses", "list", "--json"], ["algorithms", "list"]):
        assert _cli(site, *command).returncode == 0


def test_unknown_names_list_the_choices(site):
    out = _cli(site, "audit", "sgd", "--quiet")
    assert out.returncode == 2
    assert out.stderr.strip().count("\n") == 0 and "ALGORITHM" in out.stderr and "fedips" in out.stderr


def test_lists_show_installed_plug_ins_with_their_distribution_unimported(site):
    """Listing reads the packages' metadata only: a plug-in is a row naming its distribution, version
    and entry point, imported by no listing (a broken one lists like any other)."""
    attacks = {r["name"]: r for r in cli_result(_cli(site, "attacks", "list", "--json").stdout)}
    assert attacks["first-slot"]["distribution"] == "myplug" and attacks["first-slot"]["version"] == "1.0"
    assert attacks["first-slot"]["entry_point"] == "myplug:first_slot"
    assert "not imported" in attacks["first-slot"]["summary"]
    assert attacks["olsr"]["distribution"] == "" and attacks["olsr"]["summary"]          # descriptions listed
    assert "not imported" in attacks["broken-attack"]["summary"]
    algorithms = {r["name"]: r for r in cli_result(_cli(site, "algorithms", "list", "--json").stdout)}
    assert algorithms["my-pbm"]["distribution"] == "myplug" and algorithms["my-pbm"]["entry_point"] == "myplug:PBM_SPEC"
    assert "not imported" in algorithms["broken-algo"]["summary"]
    defenses = {r["name"]: r for r in cli_result(_cli(site, "defenses", "list", "--json").stdout)}
    assert defenses["halve"]["distribution"] == "myplug" and "not imported" in defenses["halve"]["guarantee"]
    assert "my-pbm" in _cli(site, "train", "--help").stdout


def test_a_pbm_plug_in_trains_and_its_family_is_read_from_its_spec(site, tmp_path):
    out = _cli(site, "train", "my-pbm", "--data", "synthetic:mq2008?queries=60", "--rounds", "2", "--clients", "10",
               "--queries-per-client", "2", "--param", "gamma=0.5", "--out", str(tmp_path / "run"), "--json", "--quiet")
    assert out.returncode == 0, out.stderr
    assert cli_result(out.stdout)["algorithm"] == "my-pbm"
    bad = _cli(site, "train", "my-pbm", "--data", "synthetic:mq2008?queries=60", "--param", "gama=0.5",
               "--out", str(tmp_path / "bad"), "--quiet")
    assert bad.returncode == 2 and "train my-pbm: --param gama: no such parameter (parameters: gamma)" in bad.stderr
    code = ("from fltr_audit.spec.campaign import validate_spec; validate_spec({'name': 'x', 'algorithm': "
            "{'name': 'my-pbm', 'train_click_model': 'pbm', 'params': {'gamma': [0.5, 1.0]}}, "
            "'probe': {'click_models': ['pbm']}}); print('ok')")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(site)])}
    checked = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True)
    assert checked.stdout.strip() == "ok", checked.stderr
