"""fltr_audit.flower on Flower itself: the mods on real Flower messages, and FPDGD on Flower's
simulation runtime against the engine (same seed -> the same curve, the same OLSR guesses)."""


import numpy as np
import pytest
from tests.cli_json import cli_result

flwr = pytest.importorskip("flwr", reason="the Flower integration needs the [flower] extra (flwr[simulation])")

from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Message, MessageType, MetricRecord, RecordDict  # noqa: E402
from flwr.client.mod.utils import make_ffn  # noqa: E402
from flwr.clientapp.mod import LocalDpMod  # noqa: E402
from flwr.supercore.task_identity import TaskIdentity  # noqa: E402

from attacks.registry import make_attack  # noqa: E402
from defenses.stack import parse_defense  # noqa: E402
from fltr_audit.cli import main  # noqa: E402
from fltr_audit.flower import DefenseMod, RecordingMod  # noqa: E402
from fltr_audit.recording import read_recording  # noqa: E402

SMALL = "synthetic:mq2008?queries=200"


@pytest.fixture
def flower_message():
    """A train message as a ServerApp sends it (Flower needs a task identity to build one)."""
    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 1, 0, 1
    served = np.linspace(-1, 1, 6)
    content = RecordDict({"arrays": ArrayRecord({"w": Array(served[:4].copy()), "b": Array(served[4:].copy())}),
                          "config": ConfigRecord({"server-round": 3})})
    msg = Message(content, dst_node_id=7, message_type=MessageType.TRAIN)
    context = Context(run_id=1, node_id=7, node_config={"partition-id": 2}, state=RecordDict(), run_config={})
    return msg, context, served


def _reply_with(vector):
    def app(msg, context):
        arrays = ArrayRecord({"w": Array(vector[:4].copy()), "b": Array(vector[4:].copy())})
        return Message(RecordDict({"arrays": arrays, "metrics": MetricRecord({"num-examples": 5})}), reply_to=msg)
    return app


def test_recording_mod_records_what_leaves_the_client(tmp_path, flower_message):
    """Outermost, the mod records the reply after LocalDpMod's noise: what the server receives."""
    msg, context, served = flower_message
    local = served + 0.1
    np.random.seed(0)
    reply = make_ffn(_reply_with(local), [RecordingMod(tmp_path / "rec"), LocalDpMod(10.0, 1.0, 1.0, 1e-5)])(
        msg, context)
    sent = np.concatenate([reply.content["arrays"][k].numpy().ravel() for k in ("w", "b")])
    (batch,) = read_recording(tmp_path / "rec" / "round-000003-client-000002")
    np.testing.assert_array_equal(batch.view.messages.vector[0], sent)
    np.testing.assert_array_equal(batch.view.global_params, served)
    assert np.abs(sent - local).max() > 0.5  # the noise (std 4.8) is in what was recorded
    assert batch.view.round == 3 and batch.view.participants.tolist() == [2]
    assert batch.view.messages.n_interactions.tolist() == [5] and batch.view.threat_model == "server-blind"


def test_recording_mod_refuses_a_reply_without_arrays(tmp_path, flower_message):
    msg, context, _ = flower_message

    def no_arrays(m, c):
        return Message(RecordDict({"metrics": MetricRecord({"num-examples": 1})}), reply_to=m)

    reply = RecordingMod(tmp_path / "rec")(msg, context, no_arrays)
    assert reply.has_error() and "carries no arrays" in reply.error.reason
    assert not (tmp_path / "rec").exists() or not any((tmp_path / "rec").iterdir())


def test_defense_mod_clips_and_writes_back_in_shape(flower_message):
    msg, context, served = flower_message
    local = served + np.array([3.0, 0, 0, 4.0, 0, 0])  # update of norm 5
    mod = DefenseMod(parse_defense("clip(sensitivity=2,of=update)").client[0], cohort=10)
    reply = mod(msg, context, _reply_with(local))
    w, b = reply.content["arrays"]["w"].numpy(), reply.content["arrays"]["b"].numpy()
    assert w.shape == (4,) and b.shape == (2,)
    update = np.concatenate([w, b]) - served
    np.testing.assert_allclose(np.linalg.norm(update), 1.0)  # clip(sensitivity=2, of=update) bounds it to 1
    np.testing.assert_allclose(update / np.linalg.norm(update), [0.6, 0, 0, 0.8, 0, 0])


def test_dp_distributed_mod_share_has_the_cohort_variance(flower_message):
    """dp-distributed's share in a cohort of n has variance 2 lambda^2 / n (lambda = Delta / eps)."""
    msg, context, served = flower_message
    big = np.zeros(20_000)
    big_msg = Message(RecordDict({"arrays": ArrayRecord({"w": Array(big)}), "config": ConfigRecord({"server-round": 1})}),
                      dst_node_id=7, message_type=MessageType.TRAIN)

    def app(m, c):
        return Message(RecordDict({"arrays": ArrayRecord({"w": Array(big.copy())}),
                                   "metrics": MetricRecord({"num-examples": 1})}), reply_to=m)

    for cohort in (1, 16):
        defense = parse_defense("dp-distributed(eps=2,sensitivity=4)").client[0]
        noise = DefenseMod(defense, cohort=cohort)(big_msg, context, app).content["arrays"]["w"].numpy()
        assert np.var(noise) == pytest.approx(2 * 2.0**2 / cohort, rel=0.1)


@pytest.fixture(scope="module")
def simulated(tmp_path_factory):
    """FPDGD on Flower's simulation runtime through `fltr-audit flower run` (3 clients, 3 rounds),
    recorded by the mod and by the strategy wrapper in round 2; and the engine's run of the same setup."""
    root = tmp_path_factory.mktemp("flower")
    common = ["--data", SMALL, "--clients", "3", "--queries-per-client", "2", "--rounds", "3", "--seed", "5",
              "--click-model", "navigational"]
    assert main(["flower", "run", *common, "--record-rounds", "2", "--out", str(root / "fl")]) == 0
    lines = (root / "fl" / "curves.csv").read_text().split()[1:]
    curves = [tuple(float(v) for v in line.split(",")) for line in lines]
    engine = root / "engine"
    from threadpoolctl import threadpool_limits
    with threadpool_limits(limits=1):  # the synthetic data depend on the BLAS threads (the Flower apps load with 1)
        assert main(["train", "fpdgd", *common, "--record-rounds", "2", "--out", str(engine), "--quiet"]) == 0
    return root / "fl", curves, engine


def test_flower_curve_equals_the_engine(simulated):
    root, curves, engine = simulated
    import pandas as pd

    expected = pd.read_csv(engine / "curves.csv")["offline_ndcg10"].to_numpy()
    assert [r for r, _ in curves] == [1, 2, 3]
    np.testing.assert_allclose([v for _, v in curves], expected, rtol=1e-12, atol=1e-12)


def test_flower_recordings_give_the_engine_olsr_guesses(simulated):
    root, _, engine = simulated
    (reference,) = read_recording(engine / "recording")
    olsr = make_attack("olsr")
    expected = olsr.guess(reference.view)
    (server,) = read_recording(root / "server-recording")
    np.testing.assert_array_equal(server.view.participants, [0, 1, 2])
    # bit-identical: the engine's client step and the engine's FedAvg arithmetic (EngineFedAvg); with Flower's
    # FedAvg the served model differs by 1e-16, the float32 scoring turns that into 1e-7 in the local weights
    # and OLSR's near-zero coefficients flip (seen: 5 of 400 decisions on MQ2008)
    np.testing.assert_array_equal(server.view.global_params, reference.view.global_params)
    np.testing.assert_array_equal(server.view.messages.vector, reference.view.messages.vector)
    np.testing.assert_array_equal(server.truth.clicks, reference.truth.clicks)
    guess = olsr.guess(server.view)
    np.testing.assert_array_equal(guess.decision, expected.decision)
    for client in range(3):
        (one,) = read_recording(root / "recording" / f"round-000002-client-{client:06d}")
        np.testing.assert_array_equal(one.view.interactions.shown[0], reference.view.interactions.shown[client])
        np.testing.assert_array_equal(one.truth.clicks[0], reference.truth.clicks[client])
        np.testing.assert_array_equal(olsr.guess(one.view).decision[0], expected.decision[client])


def test_attack_reads_the_flower_recordings(simulated, capsys):
    root, _, _ = simulated
    for folder, rows in ((root / "recording", 3), (root / "server-recording", 1)):
        assert main(["attack", str(folder), "--attack", "olsr", "--all-lists", "--min-shown", "0", "--json",
                     "--quiet"]) == 0
        out = cli_result(capsys.readouterr().out)
        assert len(out) == rows and all(r["round"] == 2 for r in out)
