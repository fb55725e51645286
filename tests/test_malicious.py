"""server-malicious: isolation and model inconsistency make a secure-aggregation cohort's aggregate
carry the target's update alone; the cost to the others; unsupported algorithms refused."""

import numpy as np
import pytest

from attacks.bayes import Bayes
from attacks.olsr import OLSR
from attacks.view import client_updates
from defenses.secagg import IdealSecAgg
from fltr_audit.engine.algorithms.fpdgd import FPDGD
from fltr_audit.engine.clicks import cascade_model
from fltr_audit.engine.data.dataset import Dataset
from fltr_audit.errors import FltrError
from fltr_audit.engine.malicious import malicious_probe, saturated
from fltr_audit.engine.probe import probe
from fltr_audit.engine.rankers import make_ranker
from tests.cli_json import cli_result


def _setup(ranker="linear", n_queries=24, F=20, seed=0):
    rng = np.random.default_rng(seed)
    counts = rng.integers(12, 20, n_queries)
    ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    data = Dataset(features=rng.normal(size=(ptr[-1], F)).astype(np.float32),
                   labels=rng.integers(0, 3, ptr[-1]).astype(np.int8), query_ptr=ptr,
                   qids=np.arange(n_queries), n_levels=3, name="malicious-test")
    r = make_ranker(ranker, F)
    algo = FPDGD(r, cascade_model("informational", 3), lr=0.1, k=10)
    return algo, data, rng.normal(size=r.n_params) * 0.3


@pytest.mark.parametrize("ranker", ["linear", "mlp"])
@pytest.mark.parametrize("manipulation", ["isolate", "inconsistent"])
def test_isolated_update_is_the_targets_own_update(ranker, manipulation):
    """Under secure aggregation the isolated update equals the target's own message, which the
    same rounds without secure aggregation show; Bayes then recovers every click."""
    algo, data, g = _setup(ranker)
    hidden = malicious_probe(algo, g, data, seed=1, manipulation=manipulation, cohort_size=8,
                             aggregator=IdealSecAgg())
    shown = malicious_probe(algo, g, data, seed=1, manipulation=manipulation, cohort_size=8)
    assert len(hidden) == data.n_queries
    for h, s in zip(hidden[:8], shown[:8]):
        assert h.batch.view.threat_model == "server-malicious" and h.batch.view.messages is None
        isolated, _ = client_updates(h.batch.view, "test")
        own, _ = client_updates(s.batch.view, "test")
        assert own.shape == isolated.shape == (1, len(g))
        np.testing.assert_allclose(isolated, own, atol=1e-9 * max(1.0, np.abs(g).max()) * 8)
        guess = Bayes(algo).guess(h.batch.view)
        np.testing.assert_array_equal(guess.decision, h.batch.truth.clicks & h.batch.view.interactions.mask)


def test_isolation_costs_the_others_and_inconsistency_does_not():
    algo, data, g = _setup()
    iso = malicious_probe(algo, g, data, seed=1, manipulation="isolate", cohort_size=8, aggregator=IdealSecAgg())
    inc = malicious_probe(algo, g, data, seed=1, manipulation="inconsistent", cohort_size=8, aggregator=IdealSecAgg())
    assert all(r.others_ndcg_served == pytest.approx(r.others_ndcg_honest, abs=1e-12) for r in inc)
    assert np.mean([r.others_ndcg_honest - r.others_ndcg_served for r in iso]) != 0


def test_honest_secagg_aggregate_hides_what_malicious_isolation_reveals():
    algo, data, g = _setup(n_queries=32)
    honest = probe(algo, g, data, seed=1, cohort_size=8, aggregator=IdealSecAgg())
    mal = malicious_probe(algo, g, data, seed=1, cohort_size=8, aggregator=IdealSecAgg())
    olsr_mal = np.mean([((OLSR().guess(r.batch.view).decision == r.batch.truth.clicks)
                         | ~r.batch.view.interactions.mask).all() for r in mal])
    assert olsr_mal > 0.9
    with pytest.raises(FltrError, match="^attacks: bayes"):
        Bayes(algo).guess(honest[0].view)


def test_saturated_model_keeps_rankings():
    algo, data, g = _setup("mlp")
    s0 = algo.ranker.score(g, data.features)
    s1 = algo.ranker.score(saturated(algo.ranker, g), data.features)
    np.testing.assert_allclose(s1, s0 * 1e6, rtol=1e-9)


def test_unsupported_algorithm_and_manipulation_are_refused():
    from fltr_audit.engine.algorithms.foltr_es import FOLtRES

    algo, data, g = _setup()
    foltr = FOLtRES(make_ranker("linear", 20), cascade_model("perfect", 3))
    with pytest.raises(FltrError, match="^threat_model: server-malicious: supported for fpdgd"):
        malicious_probe(foltr, g, data, seed=0)
    with pytest.raises(FltrError, match="^manipulation: "):
        malicious_probe(algo, g, data, seed=0, manipulation="nope")


def test_audit_cli_server_malicious_rows_and_bad_algorithm(capsys):

    from fltr_audit.cli import main

    code = main(["audit", "--data", "synthetic:mq2008?queries=120", "--rounds", "2", "--clients", "30",
                 "--queries-per-client", "2", "--attack", "olsr,bayes", "--click-model", "navigational",
                 "--defense", "secagg", "--probe-cohort", "10", "--min-shown", "5", "--no-epsilon-audit",
                 "--threat-model", "server-malicious", "--json", "--quiet"])
    assert code == 0
    out = cli_result(capsys.readouterr().out)
    rows = {r["attack"]: r for r in out["attacks"]}
    assert {r["threat_model"] for r in out["attacks"]} == {"server-malicious"}
    assert rows["bayes"]["f1"] > 0.9 and rows["olsr"]["f1"] > 0.9
    assert out["manipulation"][0]["manipulation"] == "isolate"
    assert main(["audit", "foltr-es", "--threat-model", "server-malicious", "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--threat-model: server-malicious: supported for fpdgd" in err[0]
    assert main(["audit", "--threat-model", "evil", "--quiet"]) == 2
    assert "--threat-model" in capsys.readouterr().err
