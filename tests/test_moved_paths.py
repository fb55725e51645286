"""Plug-ins written against the documented import paths of before the layer folders run unedited
(issue 38): each old path is the moved module itself, submodules included, and in a fresh process
(where nothing imported the new path first)."""

import importlib
import subprocess
import sys

import pytest

from fltr_audit import MOVED


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_is_the_module_now_in_its_layer(old):
    assert importlib.import_module(old) is importlib.import_module(MOVED[old])


def test_a_submodule_of_a_moved_package_resolves_too():
    from fltr_audit.algorithms import fpdgd as old
    from fltr_audit.engine.algorithms import fpdgd as new

    assert old is new and old.__spec__.name == "fltr_audit.engine.algorithms.fpdgd"


def test_a_plug_in_of_the_old_paths_registers_and_applies_in_a_fresh_process():
    code = """
import numpy as np
from fltr_audit.interfaces import PrivacyClaim
from fltr_audit.mechanisms import Laplace
from fltr_audit.messages import Messages
import fltr_audit

class Noisy:
    name = "old-paths"
    claim = PrivacyClaim(epsilon=1.0, scope="message")
    privatizes = "vector"
    mechanism = Laplace(scale=2.0, sensitivity=2.0, norm="l1")

    def apply(self, messages, global_params, rng):
        return messages.replace(vector=messages.vector + rng.laplace(0.0, 2.0, messages.vector.shape))

fltr_audit.register_defense("old-paths", lambda: Noisy())
from defenses.stack import parse_defense
stack = parse_defense("old-paths")
out = stack.client[0].apply(Messages(vector=np.zeros((3, 4)), vector_kind="update",
                                     n_interactions=np.ones(3, dtype=np.int64)), np.zeros(4), np.random.default_rng(0))
print(stack.claim.epsilon, out.vector.shape)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1.0", "(3,", "4)"]
