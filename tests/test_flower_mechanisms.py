"""Flower's privacy mechanisms as the project's defenses (fltr_audit.flower.mechanisms): each runs
Flower's own code -- checked against Flower's objects -- and what they do that Flower's documentation
does not say is pinned here as a finding."""

import numpy as np
import pytest

pytest.importorskip("flwr", reason="the Flower integration needs the [flower] extra (flwr[simulation])")

from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Message, MessageType, MetricRecord, RecordDict  # noqa: E402
from flwr.clientapp.mod import LocalDpMod  # noqa: E402
from flwr.supercore.task_identity import TaskIdentity  # noqa: E402

from fltr_audit.engine.aggregation import weighted_mean  # noqa: E402
from fltr_audit.flower.mechanisms import FlowerCentralDp, FlowerLocalDp, FlowerSecAggPlus, register  # noqa: E402
from fltr_audit.engine.messages import Messages  # noqa: E402


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
    assert isinstance(stack.client[0].wrapped, FlowerLocalDp) and stack.claim.epsilon == 5.0
    assert isinstance(parse_defense("flwr-dp(noise_multiplier=1,side=server)").aggregator.wrapped, FlowerCentralDp)
    assert parse_defense("flwr-secaggplus").claim.scope == "none"


# -- declared mechanisms: the audits and the accountant read what each adapter declares ------------------

def _epsilon(event, delta):
    import dp_accounting as dpa
    return dpa.pld.PLDAccountant(value_discretization_interval=1e-2).compose(event).get_epsilon(delta)


def test_local_dp_declares_its_real_noise_and_the_accountant_charges_the_2c_spread():
    """LocalDpMod(clip 1, sensitivity 1, epsilon 5) claims 5; its noise on the 2C = 2 spread of two
    clipped updates gives epsilon 10.4 at delta 1e-5 (analytic Gaussian mechanism, Balle & Wang)."""
    from defenses.accounting import dp_event_of
    from defenses.dp_gaussian import gaussian_epsilon
    from defenses.stack import parse_defense
    from fltr_audit.privacy import mechanisms as mech

    register()
    stack = parse_defense("flwr-localdp(clip=1,sensitivity=1,epsilon=5,delta=1e-5)")
    std = 1.0 * np.sqrt(2 * np.log(1.25e5)) / 5.0
    assert stack.client[0].mechanism == mech.Gaussian(std=pytest.approx(std, rel=1e-12), clip=1.0, sensitivity=1.0)
    true_eps = gaussian_epsilon(1e-5, 2.0, std)
    assert true_eps == pytest.approx(10.4, abs=0.05) and stack.claim.epsilon == 5.0
    assert _epsilon(dp_event_of(stack), 1e-5) == pytest.approx(true_eps, rel=0.02)


def test_local_dp_noise_free_centre_is_the_clipped_update():
    """The audits' noise-free stand-in generator (every draw zero) must give the clipped update: the
    adapter adds Flower's noise only for a real Generator (it once guessed from attributes and noised
    the centre)."""
    from attacks.stack_outputs import centre
    from defenses.stack import parse_defense

    register()
    stack = parse_defense("flwr-localdp(clip=2,sensitivity=1,epsilon=1)")
    update = np.array([6.0, 8.0, 0.0])
    np.testing.assert_allclose(centre(stack, update), [1.2, 1.6, 0.0], rtol=0, atol=1e-12)  # noise std: 9.7


def test_worst_case_audit_finds_the_local_dp_claim_violated():
    """Through the real audit: worst-case inputs sized by the declared clip, the declared Gaussian's
    test; LocalDpMod calibrated on sensitivity 0.1 with clip 1 claims epsilon 1 and is far from it."""
    from attacks.mechanism_audit import audit_stack
    from attacks.worst_case import worst_case_inputs
    from defenses.stack import parse_defense

    register()
    stack = parse_defense("flwr-localdp(clip=1,sensitivity=0.1,epsilon=1,delta=1e-5)")
    inputs = worst_case_inputs(stack, 8)
    np.testing.assert_array_equal(inputs[1][:2], [4.0, 0.0])  # OVERSHOOT x the declared clip, one axis
    result = audit_stack(stack, claim=stack.claim, inputs=inputs, neighbours="worst-case", trials=2000, seed=1)
    assert result.claim_verdict == "violated" and result.epsilon_lb > 1.0


def test_central_dp_declares_the_wrappers_effective_multiplier():
    from defenses.accounting import dp_event_of
    from defenses.stack import parse_defense
    from fltr_audit.privacy import mechanisms as mech

    dp = FlowerCentralDp(noise_multiplier=1.0, clip=0.5, adaptive=True, count_std=2.0)
    assert dp.mechanism == mech.AggregatorGaussian(1.0, pytest.approx(dp.wrapper(10).noise_multiplier, rel=1e-12),
                                                   0.5, True)
    assert dp.mechanism.std_multiplier == pytest.approx((1.0 - 1 / 16) ** -0.5)  # (z^-2 - (2 count_std)^-2)^-1/2
    fixed = FlowerCentralDp(noise_multiplier=2.0, clip=0.5)
    assert fixed.mechanism == mech.AggregatorGaussian(2.0, 2.0, 0.5, False)
    register()
    stack = parse_defense("flwr-dp(noise_multiplier=2,clip=0.5)")
    assert _epsilon(dp_event_of(stack), 1e-5) == pytest.approx(stack.claim.epsilon, rel=0.02)


def test_central_dp_refuses_what_flower_would_crash_on():
    from fltr_audit.errors import FltrError

    with pytest.raises(FltrError, match="adaptive clipping needs count_std, or cohort"):
        FlowerCentralDp(adaptive=True)
    with pytest.raises(FltrError, match="flwr-dp: If not specified"):  # Flower's own check, z >= 2 count_std
        FlowerCentralDp(noise_multiplier=1.0, adaptive=True, cohort=10)


def test_secaggplus_declares_its_quantized_modular_sum():
    from defenses.stack import parse_defense
    from fltr_audit.privacy import mechanisms as mech
    from fltr_audit.errors import FltrError

    register()
    stack = parse_defense("flwr-secaggplus(clipping_range=4,quantization_range=1024,modulus_range=65536)")
    assert stack.aggregator.mechanism == mech.QuantizedSum(4.0, 1024, 65536)
    with pytest.raises(FltrError, match="modulus_range = 512 <= quantization_range = 1024"):
        mech.check_declaration(type("D", (), {"mechanism": mech.QuantizedSum(4.0, 1024, 512)})(), "aggregator")
    with pytest.raises(FltrError, match="client defense but declares the aggregator mechanism quantized-sum"):
        mech.check_declaration(type("D", (), {"mechanism": mech.QuantizedSum(4.0, 1024, 65536)})(), "client")


def test_flower_noise_holds_back_flowers_info_log_and_restores_it():
    """Flower's DP wrappers log a line per aggregate: inside ``flower_noise`` an INFO record of
    Flower's logger is dropped, a WARNING passes, and the level is restored after (planted bugs: the
    log left on, printed once per audit trial; the level left raised)."""
    import logging

    import numpy as np
    from flwr.common.logger import FLOWER_LOGGER

    from fltr_audit.flower.mechanisms import flower_noise

    seen = []
    handler = logging.Handler()
    handler.emit = seen.append
    FLOWER_LOGGER.addHandler(handler)
    level = FLOWER_LOGGER.level
    try:
        with flower_noise(np.random.default_rng(0)):
            FLOWER_LOGGER.info("aggregate_fit: central DP noise")
            FLOWER_LOGGER.warning("kept")
        assert [r.getMessage() for r in seen] == ["kept"] and FLOWER_LOGGER.level == level
    finally:
        FLOWER_LOGGER.removeHandler(handler)
