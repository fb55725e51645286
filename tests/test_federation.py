"""The federation loop: sampling, hooks, interception, evaluation, determinism, learning."""

import json
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pytest

from fltr_audit.engine import metrics
from fltr_audit.engine.aggregation import weighted_mean
from fltr_audit.engine.algorithms.fpdgd import FPDGD
from fltr_audit.constraints import ParameterError
from fltr_audit.engine.algorithms.pdgd import PDGD
from fltr_audit.engine.clicks import cascade_model
from fltr_audit.engine.data.synthetic import fold_split, generate
from fltr_audit.errors import FltrError
from fltr_audit.engine.federation import GAMMA, run_round, train
from fltr_audit.engine.schedule import sample_queries
from fltr_audit.engine.interfaces import Aggregate, AggregatorBase, PrivacyClaim
from fltr_audit.engine.randomness import stream
from fltr_audit.engine.rankers import LinearRanker
from fltr_audit.engine.aggregation import RoundDefenses
from fltr_audit.engine.training import TrainHooks, TrainSettings
from tests.cli_json import cli_result


@pytest.fixture(scope="module")
def splits():
    return fold_split(generate("mq2008", queries=400, seed=3), 1)


def fpdgd(data, click="perfect"):
    return FPDGD(LinearRanker(data.n_features), cascade_model(click, data.n_levels), lr=0.1)


class Collect:
    def __init__(self):
        self.batches = []

    def __call__(self, batch):
        self.batches.append(batch)


def test_interceptor_sees_exactly_the_aggregated_messages(splits):
    seen = Collect()
    res = train(fpdgd(splits.train), splits.train, TrainSettings(clients=20, queries_per_client=3, rounds=4, seed=1),
                hooks=TrainHooks(interceptors=[seen]))
    assert [b.view.round for b in seen.batches] == [1, 2, 3, 4]
    nxt = [b.view.global_params for b in seen.batches[1:]] + [res.params]
    for batch, following in zip(seen.batches, nxt):
        m = batch.view.messages
        assert m.vector.shape == (20, splits.train.n_features)
        np.testing.assert_allclose(weighted_mean(m.vector, m.n_interactions), following, rtol=1e-12, atol=1e-15)
        np.testing.assert_array_equal(batch.view.aggregate, following)
    assert not np.array_equal(seen.batches[0].view.global_params, res.params)
    assert res.n_interactions == 4 * 20 * 3


def test_same_seed_same_curves_other_seed_differs(splits):
    def run(seed):
        return train(fpdgd(splits.train, "navigational"), splits.train,
                     TrainSettings(clients=15, queries_per_client=2, rounds=3, seed=seed), eval_data=splits.test)

    a, b, c = run(5), run(5), run(6)
    assert a.curves.equals(b.curves)
    np.testing.assert_array_equal(a.params, b.params)
    assert not np.array_equal(a.params, c.params)
    assert not a.curves["online_ndcg"].equals(c.curves["online_ndcg"])


def test_queries_sampled_without_replacement_within_a_round(splits):
    n = splits.train.n_queries
    seen = Collect()
    train(fpdgd(splits.train), splits.train, TrainSettings(clients=n // 4, queries_per_client=4, rounds=2, seed=0),
          hooks=TrainHooks(interceptors=[seen]))
    for batch in seen.batches:
        q = batch.view.interactions.queries
        assert q.shape == (n // 4, 4) and len(np.unique(q)) == q.size
    with pytest.raises(FltrError, match="^queries_per_client: .* clients x"):
        train(fpdgd(splits.train), splits.train, TrainSettings(clients=n, queries_per_client=2, rounds=1, seed=0))
    q = sample_queries(n, n, 2, np.random.default_rng(0), replace=True)
    assert q.shape == (n, 2) and q.min() >= 0 and q.max() < n


@pytest.mark.parametrize("option,kwargs", [
    ("--clients", {"clients": 0}), ("--queries-per-client", {"queries_per_client": 0}),
    ("--rounds", {"rounds": 0}), ("--eval-every", {"eval_every": 0}), ("--threat-model", {"threat_model": "god"}),
])
def test_bad_budget_names_the_parameter(splits, option, kwargs):
    args = dict(clients=2, queries_per_client=1, rounds=1, seed=0) | kwargs
    with pytest.raises(ParameterError, match="^" + option.removeprefix("--").replace("-", "_") + ": "):
        train(fpdgd(splits.train), splits.train, TrainSettings(**args))


@dataclass
class Shift:
    """A toy client defense: adds a constant drawn from the defense stream."""

    name: str = "shift"
    claim: PrivacyClaim = PrivacyClaim()

    def apply(self, messages, global_params, rng):
        return messages.replace(vector=messages.vector + rng.normal())


class HalfAggregator(AggregatorBase):
    """A toy aggregator that hides messages and reports the plain mean of the first half."""

    name = "half"
    claim = PrivacyClaim()

    def aggregate(self, messages, participants, rng):
        h = len(participants) // 2
        return Aggregate(mean=messages.vector[:h].mean(0), participants=participants[:h],
                         dropouts=participants[h:], messages=None)


def test_defense_then_aggregator_hooks(splits):
    alg = fpdgd(splits.train)
    queries = np.arange(12).reshape(6, 2)
    ids = np.arange(6)
    p0 = np.zeros(splits.train.n_features)
    _, _, plain, out = run_round(alg, p0, None, splits.train, queries, ids, 1, 9)
    new, _, batch, out2 = run_round(alg, p0, None, splits.train, queries, ids, 1, 9,
                                    defenses=RoundDefenses(client=tuple([Shift()]), aggregator=HalfAggregator()))
    shift = stream(9, "defense", 1).normal()
    np.testing.assert_array_equal(out.messages.vector, out2.messages.vector)   # client step unchanged
    np.testing.assert_allclose(new, out.messages.vector[:3].mean(0) + shift)
    assert batch.view.messages is None and plain.view.messages is not None
    np.testing.assert_array_equal(batch.view.participants, [0, 1, 2])
    np.testing.assert_array_equal(batch.view.dropouts, [3, 4, 5])
    np.testing.assert_array_equal(batch.truth.clicks, out.clicks)             # truth is the real clicks


def test_server_blind_hides_what_was_shown(splits):
    alg = fpdgd(splits.train)
    _, _, batch, _ = run_round(alg, np.zeros(46), None, splits.train, np.arange(4).reshape(2, 2), np.arange(2), 1, 0,
                               threat_model="server-blind")
    assert batch.view.interactions is None and batch.view.documents is None
    assert batch.view.messages is not None and batch.truth.clicks.shape == (2, 2, 10)


def test_curves_offline_every_k_and_online_eq17(splits):
    seen = Collect()
    calls = []
    res = train(fpdgd(splits.train, "informational"), splits.train,
                TrainSettings(clients=10, queries_per_client=2, rounds=5, seed=2, eval_every=2), eval_data=splits.test,
                hooks=TrainHooks(evaluators={"norm": lambda p: float(np.abs(p).sum())}, interceptors=[seen],
                                 on_round=lambda r, row: calls.append(r)))
    c = res.curves
    assert list(c["round"]) == [1, 2, 3, 4, 5] and calls == [1, 2, 3, 4, 5]
    assert c["offline_ndcg10"].isna().tolist() == [True, False, True, False, False]
    assert c["norm"].isna().tolist() == [True, False, True, False, False]
    assert c.loc[4, "offline_ndcg10"] == pytest.approx(
        metrics.mean_ndcg(splits.test.features.astype(np.float64) @ res.params, splits.test))
    assert c.loc[4, "norm"] == pytest.approx(np.abs(res.params).sum())
    # Eq. 17 in a plain loop over the interactions in order (clients, then their queries)
    total, t = 0.0, 0
    for batch in seen.batches:
        for value in metrics.ndcg_of_shown(batch.view.interactions.shown, splits.train).ravel():
            if not np.isnan(value):
                total += value * GAMMA ** t
                t += 1
        assert c.loc[batch.view.round - 1, "online_ndcg"] == pytest.approx(total, rel=1e-12)
    assert {"shown_ndcg", "clicks_per_query"} <= set(c.columns)
    assert res.config["clients"] == 10 and res.config["algorithm"] == "fpdgd"


def random_ndcg(data):
    """Mean offline nDCG@10 of 20 random rankers (uniform random scores)."""
    return np.mean([metrics.mean_ndcg(np.random.default_rng(s).random(data.n_docs), data) for s in range(20)])


@pytest.mark.parametrize("algorithm", [FPDGD, PDGD])
def test_learns_on_synthetic_mq2008(splits, algorithm):
    alg = algorithm(LinearRanker(splits.train.n_features), cascade_model("perfect", 3))
    res = train(alg, splits.train, TrainSettings(clients=60, queries_per_client=4, rounds=15, seed=0, eval_every=15),
                eval_data=splits.test)
    learned, chance = res.curves["offline_ndcg10"].iloc[-1], random_ndcg(splits.test)
    # random rankers average ~0.50 here (spread ~0.02 over seeds); 15 rounds of learning reach ~0.9,
    # so a margin of 0.1 is far outside chance yet far from the learned value
    assert learned > chance + 0.1, (learned, chance)


def test_cli_train_writes_outputs_atomically(tmp_path, capsys):
    from fltr_audit.cli import main

    args = ["train", "fpdgd", "--data", "synthetic:mq2008?queries=150", "--clients", "10", "--queries-per-client", "2",
            "--rounds", "3", "--seed", "1", "--quiet", "--json", "--record-rounds", "2"]
    assert main(args + ["--out", str(tmp_path / "run")]) == 0
    result = cli_result(capsys.readouterr().out)
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["config.json", "curves.csv", "model.npy",
                                                                       "recording"]
    curves = pd.read_csv(tmp_path / "run" / "curves.csv")
    assert list(curves["round"]) == [1, 2, 3]
    assert curves["offline_ndcg10"].iloc[-1] == pytest.approx(result["final_offline_ndcg10"])
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["clients"] == 10 and config["defense"] == "none" and config["algorithm"] == "fpdgd"
    assert np.load(tmp_path / "run" / "model.npy").shape == (46,)
    # bad input: exit code 2, one line naming the option, nothing written
    for bad, option in ((["--ranker", "tree"], "--ranker"), (["--click-model", "x"], "--click-model"),
                        (["--queries-per-client", "0"], "--queries-per-client"), (["--fold", "6"], "--fold"),
                        (["--clients", "200", "--no-replace"], "--queries-per-client: 200 clients")):  # too many queries without replacement
        assert main(args + ["--out", str(tmp_path / "bad")] + bad) == 2
        err = capsys.readouterr().err.strip()
        assert option in err and len(err.splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]
    assert main(args + ["--out", str(tmp_path / "run")]) == 2          # refuses to overwrite
    assert "--out" in capsys.readouterr().err


def test_thread_count_does_not_change_results(monkeypatch):
    """Threads split work, never randomness or summation order: 1 and 3 threads agree exactly."""
    from fltr_audit.engine import federation, threads as thread_pool
    from fltr_audit.engine.algorithms.fpdgd import FPDGD
    from fltr_audit.engine.clicks import cascade_model
    from fltr_audit.engine.data.load import load_splits
    from fltr_audit.engine.rankers import make_ranker

    splits = load_splits("synthetic:mq2008?queries=150", 1)
    results = []
    for threads in (1, 3):
        monkeypatch.setattr(thread_pool, "THREADS", threads)
        monkeypatch.setattr(thread_pool, "PARALLEL_ROWS", 0)  # force the threaded path on small data
        alg = FPDGD(make_ranker("linear", splits.train.n_features), cascade_model("informational", 3))
        results.append(federation.train(alg, splits.train, TrainSettings(clients=30, queries_per_client=2, rounds=4, seed=5),
                                        eval_data=splits.test))
    assert np.array_equal(results[0].params, results[1].params)
    pd.testing.assert_frame_equal(results[0].curves, results[1].curves, check_exact=True)


def test_on_round_gets_each_round_in_order_with_its_offline_ndcg(monkeypatch):
    """The offline nDCG evaluated on a background thread while the next round trains reaches
    ``on_round`` in round order, already filled in and equal to the curves."""
    from fltr_audit.engine import federation, threads as thread_pool
    from fltr_audit.engine.algorithms.fpdgd import FPDGD
    from fltr_audit.engine.clicks import cascade_model
    from fltr_audit.engine.data.load import load_splits
    from fltr_audit.engine.rankers import make_ranker

    monkeypatch.setattr(thread_pool, "THREADS", 2)
    monkeypatch.setattr(thread_pool, "PARALLEL_ROWS", 0)  # the background evaluation on small data
    splits = load_splits("synthetic:mq2008?queries=150", 1)
    alg = FPDGD(make_ranker("linear", splits.train.n_features), cascade_model("perfect", 3))
    seen = []
    res = federation.train(alg, splits.train,
                           TrainSettings(clients=20, queries_per_client=2, rounds=5, seed=2, eval_every=2),
                           eval_data=splits.test, hooks=TrainHooks(on_round=lambda r, row: seen.append((r, dict(row)))))
    assert [r for r, _ in seen] == [1, 2, 3, 4, 5]
    got = [row["offline_ndcg10"] for _, row in seen]
    assert np.isnan(got[0]) and np.isnan(got[2]) and all(np.isfinite(got[i]) for i in (1, 3, 4))
    np.testing.assert_array_equal(got, res.curves["offline_ndcg10"].to_numpy())


def test_each_rounds_offline_ndcg_is_that_of_its_model_alone(monkeypatch):
    """The offline evaluation scores EVAL_MODELS rounds' models per pass over the split on a
    background thread; every curve value still equals ``offline_ndcg`` of that round's model
    alone (the models read by an observer: round r + 1 starts from round r's model), across a
    pass boundary and a last, partial pass. Catches: a value taken from another model of the
    pass, a model evaluated after later rounds changed it, the last pass never run."""
    from fltr_audit.engine import federation, threads as thread_pool
    from fltr_audit.engine.algorithms.fpdgd import FPDGD
    from fltr_audit.engine.clicks import cascade_model
    from fltr_audit.engine.data.load import load_splits
    from fltr_audit.engine.evaluation import offline_ndcg
    from fltr_audit.engine.rankers import EVAL_MODELS, make_ranker

    monkeypatch.setattr(thread_pool, "THREADS", 2)
    monkeypatch.setattr(thread_pool, "PARALLEL_ROWS", 0)  # the background pass on small data
    splits = load_splits("synthetic:mq2008?queries=150", 1)
    alg = FPDGD(make_ranker("linear", splits.train.n_features), cascade_model("perfect", 3))
    starts = []
    rounds = EVAL_MODELS + 3
    res = federation.train(alg, splits.train, TrainSettings(clients=20, queries_per_client=2, rounds=rounds, seed=4),
                           eval_data=splits.test,
                           hooks=TrainHooks(observer=lambda parts: starts.append(parts.params.copy())))
    models = starts[1:] + [res.params]
    alone = [offline_ndcg(alg.ranker, m, splits.test) for m in models]
    assert len(set(alone)) > 2
    np.testing.assert_array_equal(res.curves["offline_ndcg10"].to_numpy(), alone)
