"""A claim verdict swept over training rounds (issue 37's rounds campaign through the real engine):
each rounds value pools its own runs' distinct audits. The audits table's own ``rounds`` (the rounds
an audit composes) once shadowed the swept axis, and every claim verdict of such a sweep came out
empty."""

import textwrap

from fltr_audit.runs.campaign import run_campaign
from fltr_audit.runs.executors import Executor
from fltr_audit.spec.campaign import load_spec
from fltr_audit.store.results import ResultsStore, load
from reports.compare import verdicts

ROUNDS_SWEEP = """
name = "rounds-sweep"
seeds = [0, 1]

[data]
spec = ["synthetic:mq2008?queries=60"]

[algorithm]
name = "fpdgd"
rounds = [2, 3]
clients = [10]
queries_per_client = [2]

[probe]
click_models = ["perfect"]
lists = 60

[audit]
defenses = ["dp-local-laplace(eps=1)"]
attacks = ["olsr", "random3"]
trials = 500
"""


def test_each_swept_rounds_value_gets_the_claim_verdict_of_its_own_runs(tmp_path):
    path = tmp_path / "sweep.toml"
    path.write_text(textwrap.dedent(ROUNDS_SWEEP))
    run_campaign(load_spec(path), ResultsStore(tmp_path / "s.sqlite"), executor=Executor(workers=1))
    v = verdicts(load(tmp_path / "s.sqlite")).sort_values("rounds")
    assert list(v["rounds"]) == [2, 3]
    assert set(v["claim_verdict"]) <= {"consistent", "violated", "untestable"}
    assert list(v["runs"]) == [2, 2] and list(v["copies"]) == [0, 0]
    assert list(v["n_trials"]) == [2 * 500, 2 * 500]
