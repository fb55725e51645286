"""The recording interceptor: round selection, streaming to disk, loading back."""

import numpy as np
import pytest

from fltr_audit.engine.algorithms.fpdgd import FPDGD
from fltr_audit.engine.clicks import cascade_model
from fltr_audit.engine.data.synthetic import fold_split, generate
from fltr_audit.errors import FltrError
from fltr_audit.engine.federation import train
from fltr_audit.store.interceptors import RecordingInterceptor, parse_rounds
from fltr_audit.store.recording import read_recording as load_recording
from fltr_audit.engine.rankers import LinearRanker, MLPRanker
from fltr_audit.engine.training import TrainHooks, TrainSettings


@pytest.fixture(scope="module")
def data():
    return fold_split(generate("mq2008", queries=200, seed=1), 1).train


def test_parse_rounds():
    keep = parse_rounds("1,50,100")
    assert [r for r in range(1, 201) if keep(r)] == [1, 50, 100]
    keep = parse_rounds("every:10")
    assert [r for r in range(1, 41) if keep(r)] == [10, 20, 30, 40]
    for bad in ("", "every:0", "every:x", "1,a", "0,3", "-2"):
        with pytest.raises(FltrError, match="^record_rounds: "):
            parse_rounds(bad)


class Collect:
    def __init__(self):
        self.batches = []

    def __call__(self, batch):
        self.batches.append(batch)


def assert_same(a, b):
    """Every array of two RoundBatches is equal; the rest compares by value."""
    va, vb = a.view, b.view
    assert (va.round, va.threat_model) == (vb.round, vb.threat_model)
    for key in ("global_params", "participants", "dropouts", "aggregate"):
        np.testing.assert_array_equal(getattr(va, key), getattr(vb, key))
    np.testing.assert_array_equal(va.messages.vector, vb.messages.vector)
    np.testing.assert_array_equal(va.messages.n_interactions, vb.messages.n_interactions)
    assert va.messages.vector_kind == vb.messages.vector_kind and vb.messages.seed is None
    assert type(va.ranker) is type(vb.ranker) and va.ranker.n_params == vb.ranker.n_params
    if va.interactions is None:
        assert vb.interactions is None and vb.documents is None
    else:
        np.testing.assert_array_equal(va.interactions.queries, vb.interactions.queries)
        np.testing.assert_array_equal(va.interactions.shown, vb.interactions.shown)
        for key in ("features", "labels", "query_ptr", "qids"):
            np.testing.assert_array_equal(getattr(va.documents, key), getattr(vb.documents, key))
        assert va.documents.n_levels == vb.documents.n_levels
    np.testing.assert_array_equal(a.truth.clicks, b.truth.clicks)
    np.testing.assert_array_equal(a.truth.client_ids, b.truth.client_ids)


@pytest.mark.parametrize("threat_model,ranker", [("server", "linear"), ("server-blind", "mlp")])
def test_recording_round_trip(tmp_path, data, threat_model, ranker):
    model = LinearRanker(data.n_features) if ranker == "linear" else MLPRanker(data.n_features, hidden=3)
    alg = FPDGD(model, cascade_model("navigational", 3))
    seen, rec = Collect(), RecordingInterceptor(tmp_path / "rec", "1,3")
    train(alg, data, TrainSettings(clients=8, queries_per_client=2, rounds=4, seed=4, threat_model=threat_model),
          hooks=TrainHooks(interceptors=[seen, rec]))
    loaded = list(load_recording(tmp_path / "rec"))
    assert [b.view.round for b in loaded] == [1, 3]
    for original, back in zip([seen.batches[0], seen.batches[2]], loaded):
        assert_same(original, back)
    # the split is written once, however many rounds are kept
    assert len(list((tmp_path / "rec").glob("documents-*.npz"))) == (1 if threat_model == "server" else 0)
    if threat_model == "server":
        assert loaded[0].view.documents is loaded[1].view.documents


def test_recording_refuses_to_mix_with_an_old_one(tmp_path, data):
    rec = RecordingInterceptor(tmp_path / "rec", "every:1")
    train(FPDGD(LinearRanker(data.n_features), cascade_model("perfect", 3)), data,
          TrainSettings(clients=3, queries_per_client=1, rounds=1, seed=0), hooks=TrainHooks(interceptors=[rec]))
    with pytest.raises(FltrError, match="already holds a recording"):
        RecordingInterceptor(tmp_path / "rec")
    with pytest.raises(FltrError, match="not a recording"):
        list(load_recording(tmp_path / "missing"))
