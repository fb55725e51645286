"""Entry-point plug-ins: an installed package adds an attack, a defense or an algorithm without
touching the project; a broken one fails with one line and never breaks other commands."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

PACKAGE = '''
import numpy as np
from fltr_audit.interfaces import PrivacyClaim
from fltr_audit.messages import Guess


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
'''

ENTRY_POINTS = '''[fltr_audit.attacks]
first-slot = myplug:first_slot
broken-attack = not_a_module:thing

[fltr_audit.defenses]
halve = myplug:Halve
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


def _cli(site: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(site)])}
    return subprocess.run([sys.executable, "-m", "fltr_audit", *args], cwd=REPO, env=env, capture_output=True,
                          text=True)


def test_installed_attack_and_defense_are_found_by_name(site):
    out = _cli(site, "audit", "--data", "synthetic:mq2008?queries=150", "--train-rounds", "2", "--clients", "40",
               "--queries-per-client", "2", "--attack", "first-slot,olsr", "--defense", "none",
               "--defense", "halve", "--click-model", "perfect", "--probe-cohort", "20", "--min-shown", "5",
               "--no-epsilon-audit", "--json", "--quiet")
    assert out.returncode == 0, out.stderr
    rows = {(r["defense"], r["attack"]) for r in json.loads(out.stdout)["attacks"]}
    assert rows == {(d, a) for d in ("none", "halve(factor=0.5)") for a in ("first-slot", "olsr")}


def test_broken_entry_point_is_one_line_and_breaks_nothing_else(site):
    out = _cli(site, "audit", "--attack", "broken-attack", "--quiet")
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "broken-attack" in lines[0] and "ModuleNotFoundError" in lines[0], out.stderr
    for command in (["attacks", "list", "--json"], ["defenses", "list", "--json"], ["algorithms", "list"]):
        assert _cli(site, *command).returncode == 0


def test_unknown_names_list_the_choices(site):
    out = _cli(site, "audit", "--algo", "sgd", "--quiet")
    assert out.returncode == 2
    assert out.stderr.strip().count("\n") == 0 and "--algo" in out.stderr and "fedips" in out.stderr
