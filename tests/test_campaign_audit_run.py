"""The campaign option ``[audit_run]``: every run of a campaign also audits the privacy over its
whole run with canaries (the ``run_audits`` row of ``fltr-audit audit-run`` for the same
settings, shown in the report's "Privacy over the whole run" section); bad values are one line
naming the key, exit 2, nothing written."""

import textwrap

import pytest

from fltr_audit.runs.campaign import run_campaign

from fltr_audit.runs.executors import Executor

from fltr_audit.spec.campaign import load_spec

from fltr_audit.spec.grid import expand
from fltr_audit.cli import main
import fltr_audit
from fltr_audit.store.results import ResultsStore, load

TINY = """
name = "tiny-whole-run"
seeds = [3]

[data]
spec = ["synthetic:mq2008?queries=60"]
normalization = "none"

[algorithm]
name = "fpdgd"
rounds = [4]
clients = [10]
queries_per_client = [2]
population = 100

[probe]
click_models = ["perfect"]
probe_cohort = [8]
min_shown = 5

[audit]
defenses = ["dp-fedavg(noise_multiplier=1,clip=1)", "dp-local-laplace(eps=1)"]
attacks = ["olsr"]
epsilon_audit = false
"""
WHOLE_RUN = "\n[audit_run]\ncanaries = 80\nruns = 2\n"


def write(tmp_path, text):
    path = tmp_path / "c.toml"
    path.write_text(textwrap.dedent(text))
    return path


def test_each_run_stores_the_audit_run_row_of_its_settings_and_the_report_shows_it(tmp_path):
    """The stored rows are audit-run's for the same settings and seed (a wiring bug -- the seed,
    population, rounds or runs not passed on -- changes the numbers), one per run."""
    spec = load_spec(write(tmp_path, TINY + WHOLE_RUN))
    store = tmp_path / "r.sqlite"
    assert run_campaign(spec, ResultsStore(store), executor=Executor(workers=1))["done"] == 2
    rows = load(store)["run_audits"].set_index("defense")
    for defense in ("dp-fedavg(noise_multiplier=1)", "dp-local-laplace(eps=1)"):
        alone = fltr_audit.audit_whole_run("fpdgd", defense=defense, canaries=80, runs=2, data="synthetic:mq2008?queries=60",
                                              rounds=4, clients=10, population=100, queries_per_client=2, seed=3)
        row = rows.loc[defense]
        assert (row["epsilon_lb"], row["correct"], row["epsilon_lb_multi"], row["runs"]) == \
            (alone.epsilon_lb, alone.correct, alone.epsilon_lb_multi, 2)
        assert row["epsilon_estimate"] == pytest.approx(alone.epsilon_estimate, nan_ok=True)
    out = tmp_path / "report"
    assert main(["report", "--store", str(store), "--out", str(out)]) == 0
    assert "<h2>Privacy over the whole run</h2>" in (out / "report.html").read_text()


def test_without_the_section_runs_keep_their_keys_and_store_no_run_audits(tmp_path):
    plain = expand(load_spec(write(tmp_path, TINY)))
    with_it = expand(load_spec(write(tmp_path, TINY + WHOLE_RUN)))
    assert all("audit_run_canaries" not in r.config for r in plain)
    assert [r.config["audit_run_canaries"] for r in with_it] == [80, 80]
    assert {r.key for r in plain}.isdisjoint(r.key for r in with_it)  # a different run, a different key


@pytest.mark.parametrize("section,key", [
    ("canaries = 0", "audit_run.canaries"),
    ("canaries = 101", "audit_run.canaries"),          # more than the population of 100
    ("canaries = 'many'", "audit_run.canaries"),
    ("canaries = 10\nruns = 0", "audit_run.runs"),
    ("canaries = 10\nruns = 1001", "audit_run.runs"),
    ("canary = 10", "audit_run.canary"),
])
def test_bad_values_are_one_line_naming_the_key(tmp_path, capsys, section, key):
    path = write(tmp_path, TINY + f"\n[audit_run]\n{section}\n")
    store = tmp_path / "r.sqlite"
    code = main(["campaign", "run", str(path), "--store", str(store), "--workers", "1"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and key in err[0], err
    assert not store.exists()


@pytest.mark.parametrize("defense", ["dp-fedavg(noise_multiplier=1,clip=1,quantile=0.5,count_std=1)",
                                     "dp-local-laplace(eps=1)+shuffle(n=10)"])
def test_defenses_canaries_cannot_ride_on_are_refused_at_the_door(tmp_path, capsys, defense):
    path = write(tmp_path, TINY.replace('defenses = ["dp-fedavg(noise_multiplier=1,clip=1)", "dp-local-laplace(eps=1)"]',
                                        f'defenses = ["{defense}"]') + WHOLE_RUN)
    store = tmp_path / "r.sqlite"
    code = main(["campaign", "run", str(path), "--store", str(store), "--workers", "1"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "audit_run.canaries" in err[0], err
    assert not store.exists()
