"""The unlearning methods of ``fltr_audit.engine.unlearning``, each against an independent computation:
``retrain`` is training without the forgotten users bit for bit; FedEraser's calibration is its
formula (Liu et al. 2021, Eq. 3-4) on a toy federation; PGA's projection is the closed form; the
history keeps what the methods need; the users absent from a run never take part."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from fltr_audit.engine.aggregation import RoundDefenses
from fltr_audit.engine.algorithms import registry as algorithms
from fltr_audit.engine.cohorts import cohort
from fltr_audit.engine.data.load import load_splits
from fltr_audit.engine.federation import run_round, train
from fltr_audit.engine.interfaces import ClientOutput
from fltr_audit.engine.messages import Interactions, Messages
from fltr_audit.engine.randomness import stream
from fltr_audit.engine.schedule import user_queries
from fltr_audit.engine.training import TrainHooks, TrainSettings
from fltr_audit.engine.unlearning.federaser import calibrated_updates, federaser
from fltr_audit.engine.unlearning.history import ServerHistory, kept_rounds
from fltr_audit.engine.unlearning.methods import Forgetting, kept_by, unlearn
from fltr_audit.engine.unlearning.pga import ball_radius, project_to_ball, reference_model

DATA = "synthetic:mq2008?queries=60"


@pytest.fixture(scope="module")
def splits():
    return load_splits(DATA, 1)


def fpdgd(splits, ranker="linear"):
    return algorithms.build("fpdgd", splits, "perfect", {"ranker": ranker, "seed": 0, "params": {}})


SETTINGS = TrainSettings(clients=6, queries_per_client=2, rounds=8, seed=3, population=30, eval_every=8)


def test_retrain_is_training_without_the_forgotten_users_bit_for_bit(splits):
    """Independent computation: the cohorts recomputed by ``engine.cohorts`` (as the accounting does),
    each user's queries from its own stream, the forgotten members dropped, round by round through
    ``run_round``. Catches a retrain that keeps a forgotten user, drops another, or moves the schedule."""
    alg, s = fpdgd(splits), SETTINGS
    forgotten = np.array([2, 5, 11, 17])
    done = unlearn(alg, splits.train, s, None, ServerHistory(()), Forgetting("retrain", tuple(forgotten)),
                   RoundDefenses())
    params = alg.init_params(stream(s.seed, "init"))
    state, visits = alg.init_server_state(params), np.zeros(s.population, dtype=np.int64)
    with threadpool_limits(limits=1, user_api="blas"):
        for r in range(1, s.rounds + 1):
            ids = cohort(s.seed, r, s.clients, s.population)
            queries = user_queries(s.seed, ids, visits[ids], s.queries_per_client, splits.train.n_queries)
            visits[ids] += 1
            keep = ~np.isin(ids, forgotten)
            params, state, _, _ = run_round(alg, params, state, splits.train, queries[keep], ids[keep], r, s.seed)
    assert np.array_equal(done.params, params)
    full = train(alg, splits.train, s).params
    assert not np.array_equal(full, params)  # the forgotten users did shape the full training


def test_absent_users_never_take_part_and_a_round_of_absent_users_changes_nothing(splits):
    seen: list[np.ndarray] = []
    s = dataclasses.replace(SETTINGS, absent=tuple(range(0, 30, 2)))
    train(fpdgd(splits), splits.train, s, hooks=TrainHooks(interceptors=(lambda b: seen.append(b.view.participants),)))
    assert seen and not any(np.isin(ids, s.absent).any() for ids in seen)
    everyone = dataclasses.replace(SETTINGS, population=6, absent=tuple(range(6)))
    alg = fpdgd(splits)
    result = train(alg, splits.train, everyone)
    assert np.array_equal(result.params, alg.init_params(stream(everyone.seed, "init")))
    with pytest.raises(Exception, match="absent"):
        TrainSettings(clients=2, queries_per_client=1, rounds=1, seed=0, population=5, absent=(5,))


def test_federasers_calibration_keeps_the_kept_length_and_the_new_direction():
    kept = np.array([2.0, 0.5, 3.0])
    new = np.array([[3.0, 4.0], [0.0, 0.0], [0.0, -0.1]])
    out = calibrated_updates(kept, new)
    assert np.allclose(out, [[1.2, 1.6], [0.0, 0.0], [0.0, -3.0]])  # |U| U^ / |U^| by hand; zero stays zero


class Toy:
    """A federation whose client k pulls the model toward its target: update = B (t_k - w) / 4."""

    name, k, ranker, click_model = "toy", 1, None, None

    def __init__(self, targets: np.ndarray):
        self.targets = targets

    def init_params(self, rng):
        return np.zeros(self.targets.shape[1])

    def init_server_state(self, params):
        return None

    def client_step(self, params, data, queries, client_ids, rng, public_rng, deterministic=False):
        n, b = queries.shape
        update = b * (self.targets[client_ids] - params) / 4.0
        return ClientOutput(messages=Messages(n_interactions=np.arange(1, n + 1), vector=update, vector_kind="update"),
                            interactions=Interactions(queries=queries, shown=np.full((n, b, 1), -1)),
                            clicks=np.zeros((n, b, 1), bool), shown_ndcg=np.full((n, b), np.nan))

    def server_step(self, params, state, view):
        return params + view.aggregate, state


def test_federaser_rebuilds_the_model_by_its_formula_on_a_toy_federation(splits):
    """Eq. 3-4 by hand: the first kept round's remaining updates as kept, then each kept round's
    remaining clients recalibrated from the rebuilt model, n_c-weighted. Catches a calibration to the
    wrong length, a first round recalibrated, forgotten updates kept, or unweighted means."""
    rng = np.random.default_rng(0)
    toy, s = Toy(rng.normal(size=(30, 3))), dataclasses.replace(SETTINGS, queries_per_client=4)
    history, models = ServerHistory(kept_rounds(s.rounds, 3)), {}
    train(toy, splits.train, s, hooks=TrainHooks(interceptors=(history, lambda b: models.update(
        {b.view.round: (b.view.global_params, b.view.participants)}))))
    forgotten = np.array([1, 4, 9, 20, 27])
    out, steps = federaser(toy, splits.train, s, history, forgotten, ratio=0.5, defenses=RoundDefenses(),
                           first_round=s.rounds + 1)
    w = np.zeros(3)
    for j, r in enumerate((1, 4, 7)):
        g, ids = models[r]
        n = np.arange(1, len(ids) + 1)
        keep = ~np.isin(ids, forgotten)
        old = 4 * (toy.targets[ids] - g) / 4.0
        if j == 0:
            step = old[keep]
        else:
            new = 2 * (toy.targets[ids[keep]] - w) / 4.0
            step = new * (np.linalg.norm(old[keep], axis=1) / np.linalg.norm(new, axis=1))[:, None]
        w = w + n[keep] @ step / n[keep].sum()
    assert np.allclose(out, w, rtol=1e-6, atol=1e-7)
    assert steps == sum((~np.isin(models[r][1], forgotten)).sum() for r in (4, 7))


def test_the_history_keeps_what_each_method_needs(splits):
    assert kept_rounds(10, 5) == (1, 6) and kept_rounds(3, 1) == (1, 2, 3)
    assert kept_by(Forgetting("federaser", (1,), interval=4), 10) == (1, 5, 9)
    assert kept_by(Forgetting("pga", (1,)), 10) == (10,)
    assert kept_by(Forgetting("finetune", (1,)), 10) == kept_by(Forgetting("none", (1,)), 10) == ()
    history = ServerHistory((2, 5))
    train(fpdgd(splits), splits.train, SETTINGS, hooks=TrainHooks(interceptors=(history,)))
    assert sorted(history.stored) == [2, 5]
    kept = history.stored[5]
    assert kept.updates.dtype == np.float32 and kept.kind == "weights"
    assert np.allclose(np.linalg.norm(kept.updates, axis=1), kept.norms, rtol=1e-5)
    assert history.nbytes == sum(r.nbytes for r in history.stored.values())


def test_projection_onto_the_ball_is_the_closed_form():
    c, w = np.array([1.0, -1.0, 0.0]), np.array([4.0, 3.0, 0.0])
    assert np.allclose(project_to_ball(w, c, 2.5), c + 2.5 * (w - c) / 5.0)  # |w - c| = 5
    assert np.array_equal(project_to_ball(w, c, 6.0), w)                    # inside: unchanged
    rng = np.random.default_rng(1)
    p = project_to_ball(w, c, 2.5)
    d = rng.normal(size=(200, 3))
    inside = c + 2.5 * rng.random((200, 1)) ** (1 / 3) * d / np.linalg.norm(d, axis=1, keepdims=True)
    for x in inside:
        assert np.linalg.norm(w - p) <= np.linalg.norm(w - x) + 1e-12  # no point of the ball is closer


def test_pga_reference_is_the_mean_of_the_remaining_local_models_and_its_radius_a_third(splits):
    history = ServerHistory((SETTINGS.rounds,))
    alg = fpdgd(splits)
    train(alg, splits.train, SETTINGS, hooks=TrainHooks(interceptors=(history,)))
    last = history.stored[SETTINGS.rounds]
    gone = last.participants[:2]
    n = last.n_interactions[2:].astype(float)
    expected = last.global_params + n @ last.updates[2:].astype(float) / n.sum()
    ref = reference_model(last, gone, np.zeros(1))
    assert np.allclose(ref, expected)
    assert np.array_equal(reference_model(last, last.participants, np.zeros(1)), last.global_params)
    assert ball_radius(alg, ref, 0) == pytest.approx(np.linalg.norm(ref) / 3)  # the linear ranker starts at 0


def test_the_ascending_copy_steps_against_the_gradient(splits):
    alg = fpdgd(splits)
    params = np.random.default_rng(2).normal(size=alg.ranker.n_params) * 0.1
    queries, ids = np.array([[0], [3]]), np.array([0, 1])
    up = alg.client_step(params, splits.train, queries, ids, stream(0, "c", 1), stream(0, "p", 1))
    down = alg.ascending().client_step(params, splits.train, queries, ids, stream(0, "c", 1), stream(0, "p", 1))
    assert np.allclose(down.messages.updates(params), -up.messages.updates(params), atol=1e-12)
    assert alg.lr > 0 and alg.ascending().lr == -alg.lr


def test_none_is_the_trained_model_and_finetune_trains_on_without_the_forgotten(splits):
    """finetune: rounds 9.. of the same schedule (cohorts by ``engine.cohorts``, queries from each
    user's stream, visits counted over training), the forgotten dropped -- computed by hand."""
    alg, s, forgotten = fpdgd(splits), SETTINGS, np.array([1, 2, 8, 13])
    before = train(alg, splits.train, s).params
    none = unlearn(alg, splits.train, s, before, ServerHistory(()), Forgetting("none", tuple(forgotten)),
                   RoundDefenses())
    assert np.array_equal(none.params, before) and none.client_steps == 0
    done = unlearn(alg, splits.train, s, before, ServerHistory(()), Forgetting("finetune", tuple(forgotten), rounds=3),
                   RoundDefenses())
    visits = np.zeros(s.population, dtype=np.int64)
    for r in range(1, s.rounds + 1):
        visits[cohort(s.seed, r, s.clients, s.population)] += 1
    params, state, steps = before, None, 0
    with threadpool_limits(limits=1, user_api="blas"):
        for r in range(s.rounds + 1, s.rounds + 4):
            ids = cohort(s.seed, r, s.clients, s.population)
            queries = user_queries(s.seed, ids, visits[ids], s.queries_per_client, splits.train.n_queries)
            visits[ids] += 1
            keep = ~np.isin(ids, forgotten)
            params, state, _, _ = run_round(alg, params, state, splits.train, queries[keep], ids[keep], r, s.seed)
            steps += int(keep.sum())
    assert np.array_equal(done.params, params) and done.client_steps == steps


@pytest.fixture(scope="module")
def pbm_splits():
    return load_splits("synthetic:yahoo?queries=60", 1, normalization="query-minmax")


@pytest.mark.parametrize("method", ["federaser", "pga", "finetune"])
@pytest.mark.parametrize("name", ["fpdgd-mlp", "fedips"])
def test_every_method_runs_for_the_mlp_and_fedips(splits, pbm_splits, method, name):
    if name == "fedips":
        data = pbm_splits
        alg = algorithms.build("fedips", data, "pbm", {"seed": 0, "clients": 6, "queries_per_client": 2, "params": {}})
    else:
        data, alg = splits, fpdgd(splits, "mlp")
    s = SETTINGS
    history = ServerHistory(kept_by(Forgetting(method, (1,)), s.rounds))
    before = train(alg, data.train, s, hooks=TrainHooks(interceptors=(history,))).params
    done = unlearn(alg, data.train, s, before, history, Forgetting(method, (1, 3, 7), rounds=2), RoundDefenses())
    assert np.isfinite(done.params).all() and not np.array_equal(done.params, before) and done.client_steps > 0


def test_the_spec_names_the_engines_methods_and_the_registry_declares_them():
    from fltr_audit.engine.unlearning import METHODS
    from fltr_audit.spec.run import UNLEARNING_METHODS

    assert UNLEARNING_METHODS == METHODS
    assert algorithms.algorithm_spec("fpdgd").unlearning == METHODS
    assert algorithms.algorithm_spec("foltr-es").unlearning == ()
    with pytest.raises(Exception, match="foltr-es does not support unlearning method 'pga'"):
        algorithms.algorithm_spec("foltr-es").check_unlearning("pga")
