"""fltr_audit.flower on Flower itself: the mods on real Flower messages, and FPDGD, FOLtR-ES and
FedIPS on Flower's simulation runtime against the engine (same seed -> the same curves, the same
recorded messages, the same OLSR guesses)."""


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
from fltr_audit.flower.engine_app import (EngineSetup, default_strategy, recording_mod,  # noqa: E402
                                          recording_strategy, simulate)
from fltr_audit.store.recording import read_recording  # noqa: E402
from fltr_audit.engine.training import TrainHooks, TrainSettings

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


SETUPS = {algo: EngineSetup(data=SMALL, algo=algo, clients=3, queries_per_client=2, rounds=3, seed=5,
                           click_model=click_model, params=params)
          for algo, click_model, params in (("fpdgd", "navigational", ()),
                                            ("foltr-es", "navigational", (("lr", 0.05),)),
                                            ("fedips", "pbm", (("lr_local", 0.05),)))}
"""Three tiny federations (3 clients, 3 rounds, round 2 recorded) run in one Flower simulation."""


@pytest.fixture(scope="module")
def simulated(tmp_path_factory):
    """The three federations of SETUPS in one start of Flower's simulation runtime, recorded in round 2
    by the client mod and the server's strategy wrapper: {algo: (folder, curve)}."""
    root = tmp_path_factory.mktemp("flower")
    mods = [recording_mod(s, str(root / algo / "recording"), {2}) for algo, s in SETUPS.items()]
    curves = simulate(*SETUPS.values(), mods=mods, cpus=1, strategy=lambda s: recording_strategy(
        s, default_strategy(s), str(root / s.algo / "server-recording"), rounds={2}))
    return {algo: (root / algo, curve) for algo, curve in zip(SETUPS, curves)}


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    """The engine's runs of SETUPS (``federation.train``, BLAS single-threaded as ``train`` runs),
    recorded in round 2: {algo: (curves, recording folder)}."""
    from threadpoolctl import threadpool_limits

    from fltr_audit.engine.algorithms import registry
    from fltr_audit.engine.data.load import load_splits
    from fltr_audit.engine.federation import train
    from fltr_audit.store.interceptors import RecordingInterceptor

    root = tmp_path_factory.mktemp("engine")
    out = {}
    for algo, s in SETUPS.items():
        with threadpool_limits(limits=1):  # the synthetic data depend on the BLAS threads (the Flower apps load with 1)
            splits = load_splits(s.data, s.fold, normalization=registry.algorithm_spec(algo).default_normalization)
            alg = registry.build(algo, splits, s.click_model, {"seed": s.seed, "clients": s.clients,
                                                               "queries_per_client": s.queries_per_client,
                                                               "params": dict(s.params)})
        rec = RecordingInterceptor(root / algo, "2", algorithm=algo)
        res = train(alg, splits.train,
                    TrainSettings(clients=s.clients, queries_per_client=s.queries_per_client, rounds=s.rounds,
                                  seed=s.seed),
                    eval_data=splits.test, hooks=TrainHooks(interceptors=[rec]))
        out[algo] = (res.curves["offline_ndcg10"].to_numpy(), root / algo)
    return out


@pytest.mark.parametrize("algo", list(SETUPS))
def test_flower_curve_equals_the_engine(simulated, engine, algo):
    """Same client step, same seeds, the engine's aggregation and server step: the same models,
    hence bit-identical offline nDCG@10 after every round (FOLtR-ES: Adam on the ES gradient;
    FedIPS: w + eta_g mean update)."""
    _, curve = simulated[algo]
    expected, _ = engine[algo]
    assert [r for r, _ in curve] == [1, 2, 3]
    np.testing.assert_array_equal([v for _, v in curve], expected)
    assert len(set(expected)) > 1  # the model moved: a server step that did nothing would not pass


@pytest.mark.parametrize("algo", list(SETUPS))
def test_flower_recordings_equal_the_engines(simulated, engine, algo):
    """What the server and each client recorded in round 2: the model served, the messages (weights,
    updates, or seeds and metric values) and the clicks, as the engine recorded them."""
    folder, _ = simulated[algo]
    (reference,) = read_recording(engine[algo][1])
    (server,) = read_recording(folder / "server-recording")
    assert server.view.round == 2 and server.view.participants.tolist() == [0, 1, 2]
    np.testing.assert_array_equal(server.view.global_params, reference.view.global_params)
    for field in ("vector", "seed", "metric"):
        got, want = getattr(server.view.messages, field), getattr(reference.view.messages, field)
        assert (got is None) == (want is None), field
        if want is not None:
            np.testing.assert_array_equal(got, want)
    assert server.view.messages.vector_kind == reference.view.messages.vector_kind
    np.testing.assert_array_equal(server.truth.clicks, reference.truth.clicks)
    for client in range(3):
        (one,) = read_recording(folder / "recording" / f"round-000002-client-{client:06d}")
        np.testing.assert_array_equal(one.view.interactions.shown[0], reference.view.interactions.shown[client])
        np.testing.assert_array_equal(one.truth.clicks[0], reference.truth.clicks[client])
        for field in ("vector", "seed", "metric"):
            want = getattr(reference.view.messages, field)
            if want is not None:
                np.testing.assert_array_equal(getattr(one.view.messages, field)[0], want[client])


def test_flower_recordings_give_the_engine_olsr_guesses(simulated, engine):
    """FPDGD bit-identical: the engine's client step and the engine's FedAvg arithmetic (EngineFedAvg);
    with Flower's FedAvg the served model differs by 1e-16, the float32 scoring turns that into 1e-7 in
    the local weights and OLSR's near-zero coefficients flip (seen: 5 of 400 decisions on MQ2008)."""
    folder, _ = simulated["fpdgd"]
    (reference,) = read_recording(engine["fpdgd"][1])
    olsr = make_attack("olsr")
    expected = olsr.guess(reference.view)
    (server,) = read_recording(folder / "server-recording")
    np.testing.assert_array_equal(olsr.guess(server.view).decision, expected.decision)
    for client in range(3):
        (one,) = read_recording(folder / "recording" / f"round-000002-client-{client:06d}")
        np.testing.assert_array_equal(olsr.guess(one.view).decision[0], expected.decision[client])


@pytest.mark.parametrize("algo, attack", [("fpdgd", "olsr"), ("foltr-es", "foltr-decode"), ("fedips", "olsr")])
def test_attack_reads_the_flower_recordings(simulated, capsys, algo, attack):
    folder, _ = simulated[algo]
    for recording, rows in ((folder / "recording", 3), (folder / "server-recording", 1)):
        assert main(["attack", str(recording), "--attack", attack, "--all-lists", "--min-shown", "0", "--json",
                     "--quiet"]) == 0
        out = cli_result(capsys.readouterr().out)["rounds"]
        assert len(out) == rows and all(r["round"] == 2 for r in out)


class _Grid:
    """A Grid stand-in: node ids, and replies that arrive on the second pull."""

    def __init__(self, node_ids, replies=()):
        self.node_ids, self.replies, self.pulls, self.pushed = list(node_ids), list(replies), 0, []

    def get_node_ids(self):
        return self.node_ids

    def push_messages(self, messages):
        self.pushed = list(messages)
        return [m.metadata.reply_to_message_id for m in self.replies]

    def pull_messages(self, ids):
        self.pulls += 1
        return [m for m in self.replies if m.metadata.reply_to_message_id in ids] if self.pulls == 2 else []


def test_engine_fedavg_sends_one_message_per_client_spread_over_the_nodes():
    """5 clients on SuperNodes 9 and 4: client c's message (naming it in fltr.client) goes to the
    (c mod 2)-th node by id, with the served model and the round (planted bugs: one message per
    node, a client left out, no client id)."""
    from fltr_audit.flower.convert import CLIENT, flat, model_record

    setup = EngineSetup(data=SMALL, clients=5, queries_per_client=2, rounds=1, click_model="navigational")
    strategy = default_strategy(setup, nodes=2)
    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 1, 0, 1
    served = np.arange(3.0)
    messages = list(strategy.configure_train(4, model_record(served), ConfigRecord({"x": 1}), _Grid([9, 4])))
    assert [m.metadata.dst_node_id for m in messages] == [4, 9, 4, 9, 4]
    assert [m.content["config"][CLIENT] for m in messages] == [0, 1, 2, 3, 4]
    assert all(m.content["config"]["server-round"] == 4 and m.content["config"]["x"] == 1 for m in messages)
    assert all(np.array_equal(flat(m.content["arrays"]), served) for m in messages)


def test_polled_grid_returns_every_reply_and_keeps_flower_errors(monkeypatch):
    """The replies of two pulls, and the error reply's typed Error (code, reason) in reply_errors
    (planted bugs: returning after the first pull, errors dropped)."""
    from types import SimpleNamespace

    from flwr.app import Error

    from fltr_audit.flower import engine_app

    monkeypatch.setattr(engine_app, "POLL_SECONDS", 0.0)
    ok = SimpleNamespace(metadata=SimpleNamespace(reply_to_message_id="a"), has_error=lambda: False)
    bad = SimpleNamespace(metadata=SimpleNamespace(reply_to_message_id="b"), has_error=lambda: True,
                          error=Error(code=7, reason="no data"))
    grid = engine_app.PolledGrid(_Grid([1], [ok, bad]))
    assert grid.send_and_receive([], timeout=5.0) == [ok, bad] and grid.grid.pulls == 2
    assert [(e.code, e.reason) for e in grid.reply_errors] == [(7, "no data")]
    assert grid.get_node_ids() == [1]  # everything else is the wrapped grid's


def test_client_app_serves_the_client_its_message_names(flower_message):
    """A message naming client 1 gets client 1's engine message whatever the node's partition-id
    (2 here): the reply's shown lists are client 1's (planted bug: the partition-id wins)."""
    from fltr_audit.flower.convert import CLIENT, SHOWN, model_record
    from fltr_audit.flower.engine_app import SETUP, loaded, make_client_app
    from fltr_audit.engine.randomness import stream

    _, context, _ = flower_message
    setup = EngineSetup(data=SMALL, clients=3, queries_per_client=2, rounds=1, click_model="navigational")
    init = loaded(setup)[1].init_params(stream(setup.seed, "init"))
    content = RecordDict({"arrays": model_record(init),
                          "config": ConfigRecord({"server-round": 1, SETUP: setup.to_json(), CLIENT: 1})})
    reply = make_client_app()(Message(content, dst_node_id=7, message_type=MessageType.TRAIN), context)
    assert reply.content[SHOWN]["client"] == 1


def test_a_quiet_simulation_writes_nothing_on_stderr(tmp_path):
    """``flower run --quiet``: Flower's log, Ray's warning and the actors' forwarded lines are held
    back (``fltr_audit.flower.quiet``); run as its own process, since Ray writes to the descriptor."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "fltr_audit", "flower", "run", "--data", "synthetic:mq2008?queries=8",
                           "--clients", "2", "--rounds", "1", "--out", str(tmp_path / "f"), "--quiet"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert done.stdout.startswith("fpdgd on Flower (simulation): offline nDCG@10")
