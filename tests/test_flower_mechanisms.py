"""Flower's privacy mechanisms as the project's defenses (fltr_audit.flower.mechanisms): each runs
Flower's own code -- checked against Flower's objects -- and what they do that Flower's documentation
does not say is pinned here as a finding."""

import numpy as np
import pytest

pytest.importorskip("flwr", reason="the Flower integration needs the [flower] extra (flwr[simulation])")

from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Message, MessageType, MetricRecord, RecordDict  # noqa: E402
from flwr.clientapp.mod import LocalDpMod  # noqa: E402
from flwr.supercore.task_identity import TaskIdentity  # noqa: E402

from fltr_audit.aggregation import weighted_mean  # noqa: E402
from fltr_audit.flower.mechanisms import FlowerCentralDp, FlowerLocalDp, FlowerSecAggPlus, register  # noqa: E402
from fltr_audit.messages import Messages  # noqa: E402


def _through_local_dp_mod(mod, served, local, seed):
    """Flower's LocalDpMod on one real train message whose reply is ``local``."""
    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 1, 0, 1
    msg = Message(RecordDict({"arrays": ArrayRecord({"p": Array(served.copy())}),
                              "config": ConfigRecord({"server-round": 1})}), dst_node_id=3,
                  message_type=MessageType.TRAIN)
    context = Context(run_id=1, node_id=3, node_config={}, state=RecordDict(), run_config={})

    def app(m, c):
        return Message(RecordDict({"arrays": ArrayRecord({"p": Array(local.copy())}),
                                   "metrics": MetricRecord({"num-examples": 1})}), reply_to=m)

    np.random.seed(seed)
    return mod(msg, context, app).content["arrays"]["p"].numpy()


def test_local_dp_adapter_is_flowers_local_dp_mod():
    served = np.linspace(-1, 1, 20)
    local = served + np.arange(20) / 10.0  # update of norm 4.9 > clip 2
    rng_seed = 11
    seed = int(np.random.default_rng(rng_seed).integers(2**32))
    expected = _through_local_dp_mod(LocalDpMod(2.0, 1.5, 3.0, 1e-5), served, local, seed)
    adapter = FlowerLocalDp(clip=2.0, sensitivity=1.5, epsilon=3.0, delta=1e-5)
    got = adapter.apply(Messages(n_interactions=np.ones(1, dtype=np.int64), vector=local[None, :]), served,
                        np.random.default_rng(rng_seed)).vector[0]
    np.testing.assert_array_equal(got, expected)
    assert adapter.std == pytest.approx(1.5 * np.sqrt(2 * np.log(1.25e5)) / 3.0)


def test_finding_local_dp_mod_crashes_on_a_zero_update():
    """A client whose update is zero (an FPDGD client without clicks) makes Flower's LocalDpMod raise
    ZeroDivisionError (its clip divides by the norm); the adapter passes the row and counts it."""
    served = np.zeros(5)
    with pytest.raises(ZeroDivisionError):
        _through_local_dp_mod(LocalDpMod(1.0, 1.0, 1.0, 1e-5), served, served.copy(), 0)
    adapter = FlowerLocalDp()
    out = adapter.apply(Messages(n_interactions=np.ones(2, dtype=np.int64), vector=np.zeros((2, 5))), served,
                        np.random.default_rng(0))
    assert adapter.zero_updates == 2 and np.isfinite(out.vector).all()


def test_finding_local_dp_noise_ignores_the_clipping_norm():
    """The noise is sensitivity * sqrt(2 ln(1.25/delta)) / epsilon whatever the clip: the audit's
    worst-case neighbours (two clipped updates) are 2 clip apart."""
    assert FlowerLocalDp(clip=10.0, sensitivity=1.0).std == FlowerLocalDp(clip=0.1, sensitivity=1.0).std


def _cohort(m, dim, scale, rng):
    return Messages(n_interactions=np.ones(m, dtype=np.int64), vector=rng.normal(0, scale, size=(m, dim)),
                    vector_kind="update")


def test_central_dp_noise_of_the_mean_is_z_clip_over_m():
    rng = np.random.default_rng(3)
    dp = FlowerCentralDp(noise_multiplier=2.0, clip=0.5, side="server")
    msgs = _cohort(8, 4000, 1.0, rng)  # every update far above the clip
    agg = dp.aggregate(msgs, np.arange(8), rng)
    clipped_mean = (msgs.vector * (0.5 / np.linalg.norm(msgs.vector, axis=1))[:, None]).mean(axis=0)
    assert np.std(agg.mean - clipped_mean) == pytest.approx(2.0 * 0.5 / 8, rel=0.05)
    np.testing.assert_array_equal(agg.messages.vector, msgs.vector)  # server-side: the server reads raw updates
    client_side = FlowerCentralDp(noise_multiplier=2.0, clip=0.5, side="client").aggregate(msgs, np.arange(8), rng)
    np.testing.assert_allclose(np.linalg.norm(client_side.messages.vector, axis=1), 0.5)


def test_finding_adaptive_clipping_moves_away_from_its_target_quantile():
    """Andrew et al. shrink the clip when more than the target fraction of updates is *under* it;
    Flower feeds its clipped fraction into the same rule, so with every update clipped the clip
    shrinks further (the project's dp-fedavg grows it)."""
    rng = np.random.default_rng(0)
    dp = FlowerCentralDp(noise_multiplier=0.5, clip=0.1, adaptive=True, quantile=0.5, count_std=1.0)
    clips = []
    for _ in range(5):
        agg = dp.aggregate(_cohort(10, 20, 1.0, rng), np.arange(10), rng)
        assert agg.stats["clipped_fraction"] == 1.0
        clips.append(agg.stats["next_clip"])
    assert clips[-1] < 0.1 * np.exp(-0.2 * 0.3 * 5) and np.all(np.diff(clips) < 0)
    from defenses.dp_fedavg import DPFedAvg
    ours = DPFedAvg(noise_multiplier=0.5, clip=0.1, quantile=0.5, count_std=1.0)
    ours.aggregate(_cohort(10, 20, 1.0, rng), np.arange(10), rng)
    assert ours.clip > 0.1


def test_secaggplus_releases_the_weighted_mean_up_to_its_quantization():
    rng = np.random.default_rng(5)
    msgs = Messages(n_interactions=np.array([4, 4, 8]), vector=rng.normal(0, 0.5, size=(3, 50)))
    agg = FlowerSecAggPlus().aggregate(msgs, np.arange(3), rng)
    assert agg.messages is None
    step = 16.0 / 4194304 / (round(4 / 1000 * 4194304) / 4194304)  # 2c/Q on the scaled values, unscaled
    err = np.abs(agg.mean - weighted_mean(msgs.vector, msgs.n_interactions))
    assert err.max() < step and err.max() > 0  # stochastic rounding: off by less than one step


def test_registered_as_defense_strings():
    register()
    from defenses.stack import parse_defense
    stack = parse_defense("flwr-localdp(clip=1,epsilon=5)")
    assert isinstance(stack.client[0], FlowerLocalDp) and stack.claim.epsilon == 5.0
    assert isinstance(parse_defense("flwr-dp(noise_multiplier=1,side=server)").aggregator, FlowerCentralDp)
    assert parse_defense("flwr-secaggplus").claim.scope == "none"
