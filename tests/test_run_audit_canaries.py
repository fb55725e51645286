"""audit-run end to end through the real engine: canaries never change the trained model, correct
dp-fedavg and dp-local-laplace stay at or below the accounted epsilon, a broken plug-in (clipping
skipped, claim unchanged) is violated, no defense says the canary count set its
bound, and bad input is one line naming the option (exit 2)."""

import numpy as np
import pytest

from attacks.canaries import CanaryObserver, design
from defenses.registration import register_defense
from defenses.stack import parse_defense
from fltr_audit.engine.data.load import load_splits
from fltr_audit.cli import main
import fltr_audit
from fltr_audit.errors import FltrError
from fltr_audit.engine.clicks import cascade_model
from fltr_audit.engine.algorithms.fpdgd import FPDGD
from fltr_audit.engine.federation import train
from fltr_audit.engine.rankers import LinearRanker
from fltr_audit.engine.training import TrainHooks, TrainSettings
from tests.broken_fedavg import NoClipFedAvg
from tests.cli_json import cli_result

DATA = "synthetic:mq2008?queries=200"
SMALL = dict(canaries=100, rounds=5, clients=10, population=100, queries_per_client=2, data=DATA)


@pytest.fixture(scope="module", autouse=True)
def broken_plugins():
    register_defense("noclip-fedavg", NoClipFedAvg, role="aggregator", guarantee="broken", replace=True)


@pytest.mark.parametrize("defense", ["dp-fedavg(noise_multiplier=1,clip=1)", "dp-local-laplace(eps=1)"])
def test_canaries_never_change_the_trained_model(defense):
    splits = load_splits(DATA, 1, normalization="none", queries=None, seed=0)

    def run(observer):
        stack = parse_defense(defense)
        algo = FPDGD(LinearRanker(splits.train.n_features), cascade_model("perfect", splits.train.n_levels), lr=0.1)
        settings = TrainSettings(clients=10, queries_per_client=2, rounds=4, seed=3, population=100)
        return train(algo, splits.train, settings, defenses=stack, hooks=TrainHooks(observer=observer)).params

    scope = "aggregate" if "fedavg" in defense else "message"
    plan = design(scope, 60, splits.train.n_features, 4, 0.1, 3, radius=1.0, population=100)
    observer = CanaryObserver(plan)
    np.testing.assert_array_equal(run(None), run(observer))
    assert np.count_nonzero(observer.scores()) > 0  # the canaries did run


@pytest.mark.parametrize("defense", ["dp-fedavg(noise_multiplier=1,clip=1)", "dp-local-laplace(eps=1)"])
def test_correct_defenses_stay_below_the_accounted_epsilon(defense):
    over = 0
    for seed in range(8):
        out = fltr_audit.audit_whole_run("fpdgd", defense=defense, seed=seed, **SMALL)
        over += out.epsilon_lb > out.epsilon_accounted_canaries
        assert out.claim_verdict in ("consistent", "untestable")
    assert over == 0  # >= 95 % of 8 seeds (the bound's level itself: test_whole_run_bounds)


def test_skipped_clipping_is_violated_in_one_run():
    """Canary clients send 100x the clip norm: dp-fedavg clips them (consistent); a plug-in that
    skips clipping but keeps dp-fedavg's claim shows them whole (violated)."""
    correct = fltr_audit.audit_whole_run("fpdgd", defense="dp-fedavg(noise_multiplier=8,clip=1)", **BROKEN)
    broken = fltr_audit.audit_whole_run("fpdgd", defense="noclip-fedavg(noise_multiplier=8,clip=1)", **BROKEN)
    assert correct.claim_verdict == "consistent" and correct.epsilon_lb < correct.epsilon_accounted_canaries
    assert broken.claim_verdict == "violated" and broken.epsilon_lb > broken.epsilon_accounted_canaries


BROKEN = dict(canaries=400, rounds=20, clients=10, population=400, queries_per_client=2, data=DATA)


def test_no_defense_reaches_the_canary_count_limit_and_says_so(capsys):
    assert main(["audit-run", "fpdgd", "--canaries", "100", "--rounds", "5", "--clients", "10", "--population", "100",
                 "--queries-per-client", "2", "--data", DATA]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "set by the number of canaries" in out and "NO CLAIM" in out
    assert fltr_audit.audit_whole_run("fpdgd", defense="none", **SMALL).limited_by_canaries


@pytest.mark.parametrize("args,option", [
    (["--canaries", "101", "--population", "100"], "--canaries"),
    (["--canaries", "0"], "--canaries"),
    (["--canaries", "5", "--claim-verdict"], "--claim-verdict"),
    (["--canaries", "5", "--runs", "1001"], "--runs"),
])
def test_bad_input_is_one_line_naming_the_option(args, option, capsys):
    code = main(["audit-run", "fpdgd", "--rounds", "2", "--clients", "10", "--data", DATA, *args])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and option in err[0]


def test_python_api_and_stored_row(tmp_path, capsys):

    import fltr_audit
    from fltr_audit.store.results import load

    out = fltr_audit.audit_whole_run("fpdgd", defense="dp-local-laplace(eps=1)", **SMALL)
    assert out.scope == "message" and out.claimed_epsilon == 1.0
    acc = fltr_audit.accountant("dp-local-laplace(eps=1)", rounds=5, clients=10, population=100)
    assert acc.get_epsilon(0.0) == out.epsilon_server  # the same schedule, the same code
    store = tmp_path / "r.sqlite"
    args = ["audit-run", "fpdgd", "--defense", "dp-local-laplace(eps=1)", "--canaries", "100", "--rounds", "5",
            "--clients", "10", "--population", "100", "--queries-per-client", "2", "--data", DATA, "--json",
            "--store", str(store)]
    assert main(args) == 0
    printed = cli_result(capsys.readouterr().out)
    row = load(store)["run_audits"].iloc[0]
    assert row["epsilon_lb"] == printed["epsilon_lb"] == out.epsilon_lb and row["claim_verdict"] == out.claim_verdict
    with pytest.raises(FltrError, match="unknown keyword"):
        fltr_audit.audit_whole_run("fpdgd", canary=3)


def test_foltr_es_canary_users_of_one_click():
    """Metric messages: randomized response keeps the bound below the accounted epsilon; without a
    defense every guess is right (the canary count sets the bound)."""
    small = {**SMALL, "clients": 20, "population": 200, "canaries": 200, "rounds": 10}
    rr = fltr_audit.audit_whole_run("foltr-es", defense="rr(p=0.9)", **small)
    bare = fltr_audit.audit_whole_run("foltr-es", defense="none", **small)
    assert rr.scope == bare.scope == "message" and rr.epsilon_lb <= rr.epsilon_accounted_canaries
    assert bare.limited_by_canaries and not rr.limited_by_canaries


def test_aggregate_residual_is_the_present_canaries_clipped_sum():
    """dp-fedavg with (almost) no noise and a clip below the real updates' norms: the residual of
    each round is C times the sum of its present canaries' directions (the cohort's own clipped sum
    subtracted exactly, ``reference="clipped-sum"``), so every score equals the cosine sum computed
    here from the design alone. Catches a reference that does not clip the cohort's updates (their
    excess over C stays in the residual) or that subtracts a second noisy aggregate."""
    splits = load_splits(DATA, 1, normalization="none", queries=None, seed=0)
    stack = parse_defense("dp-fedavg(noise_multiplier=0.001,clip=0.01)")
    algo = FPDGD(LinearRanker(splits.train.n_features), cascade_model("perfect", splits.train.n_levels), lr=0.1)
    plan = design("aggregate", 60, splits.train.n_features, 4, 0.2, 3, radius=0.01, weighting="count",
                  reference="clipped-sum", population=50)
    observer = CanaryObserver(plan)
    train(algo, splits.train, TrainSettings(clients=10, queries_per_client=2, rounds=4, seed=3, population=50),
          defenses=stack, hooks=TrainHooks(observer=observer))
    expected = np.zeros(60)
    for r in range(4):
        delta = 0.01 * plan.directions[plan.schedule[r] & plan.present].sum(axis=0)
        if np.linalg.norm(delta) > 0:
            expected[plan.schedule[r]] += plan.directions[plan.schedule[r]] @ delta / np.linalg.norm(delta)
    expected /= np.sqrt(np.maximum(plan.participations, 1))
    np.testing.assert_allclose(observer.scores(), expected, atol=2e-3)


def test_a_declared_adaptive_clip_is_refused_whatever_the_class():
    """The adaptive clip is read from the declared mechanism, not from the class: a plug-in that is no
    DPFedAvg but declares an adaptive aggregator-gaussian is refused (one line naming --defense)."""
    from fltr_audit.privacy import mechanisms as mech
    from fltr_audit.errors import FltrError
    from fltr_audit.spec.whole_run import canary_problem

    class Adaptive:
        name = "adaptive-plugin"
        mechanism = mech.AggregatorGaussian(1.0, 1.0, 1.0, adaptive=True)

    class Stack:
        aggregator = Adaptive()
        name = "adaptive-plugin"

    assert "defense 'adaptive-plugin'" in canary_problem("fpdgd", Stack()) and "adapts its clip" in canary_problem("fpdgd", Stack())
    assert canary_problem("fpdgd", parse_defense("dp-fedavg(noise_multiplier=1,clip=1)")) is None
    with pytest.raises(FltrError, match="^defense .*adapts its clip"):
        fltr_audit.audit_whole_run("fpdgd", defense="dp-fedavg(noise_multiplier=1,clip=1,quantile=0.5,count_std=1)",
                                   **SMALL)


def test_runs_in_worker_processes_give_the_same_figures():
    """--workers spreads the --runs runs over worker processes: the same seeds, the same splits,
    single-threaded BLAS, so every figure equals the serial one (a worker seeded or fed otherwise
    changes them)."""
    options = dict(defense="dp-fedavg(noise_multiplier=1,clip=1)", **{**SMALL, "runs": 2})
    serial = fltr_audit.audit_whole_run("fpdgd", **options)
    pooled = fltr_audit.audit_whole_run("fpdgd", workers=2, **options)
    same = ("epsilon_lb", "correct", "epsilon_estimate", "epsilon_lb_multi", "multi_fp", "multi_fn", "ndcg10")
    assert [getattr(serial, f) for f in same] == [getattr(pooled, f) for f in same]


def test_workers_below_zero_is_one_line_naming_the_option(capsys):
    code = main(["audit-run", "fpdgd", "--rounds", "2", "--clients", "10", "--canaries", "5", "--data", DATA,
                 "--workers", "-1"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "--workers" in err[0]
