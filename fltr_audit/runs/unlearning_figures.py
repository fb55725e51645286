"""The figures of an unlearning audit (``runs.unlearning``) from its tasks' models: forgetting
against the observer and the server (``attacks.unlearning_bounds``), utility against ``retrain``,
the poisoning check and the cost -- one ``UnlearningAuditRecord``.

The observer's scores compare the unlearned model with the retrained one (the reference that
depends on no secret); the server's compare the model before with the one after (the pair) and
with the initial model (the before model alone): a server need not retrain to read them.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import stats

from attacks.unlearning_bounds import DELTA, detectable_residue, forgetting_verdict, membership, server_test
from attacks.unlearning_canaries import canary_scores
from fltr_audit.base.means import nanmean
from fltr_audit.engine import metrics
from fltr_audit.engine.randomness import stream
from fltr_audit.runs.unlearning_leakage import NOTHING
from fltr_audit.spec.run import RunSpec
from fltr_audit.spec.unlearning import UnlearningOptions
from fltr_audit.store.records import UnlearningAuditRecord

POISON_LEVEL = 0.05


def per_query_ndcg(algorithm: Any, params: np.ndarray, data: Any) -> np.ndarray:
    """nDCG@10 of each judged query of ``data`` ranked by ``params`` (NaN: no relevant document)."""
    return metrics.ndcg_at_k(algorithm.ranker.score(params, data.features), data, 10)


def worse_p(a: np.ndarray, b: np.ndarray) -> float:
    """One-sided paired t-test p-value of "``a`` ranks worse than ``b``" over the queries both judge."""
    ok = ~(np.isnan(a) | np.isnan(b))
    d = b[ok] - a[ok]
    if len(d) < 2 or not np.any(d):
        return 1.0
    return float(stats.ttest_1samp(d, 0.0, alternative="greater").pvalue)


def poison_check(before: np.ndarray, after: np.ndarray, retrain: np.ndarray) -> tuple[float, str]:
    """The share of the poisoning's effect on nDCG@10 that forgetting removed, and the verdict:
    ``no effect`` (the poisoned model is not significantly worse than ``retrain``: nothing to
    remove), ``effect remains`` (the unlearned one still is), ``effect gone`` otherwise (paired
    one-sided t-tests over the test queries at 5 %)."""
    b, a, r = (nanmean(x) for x in (before, after, retrain))
    removed = (a - b) / (r - b) if r > b else math.nan
    if worse_p(before, retrain) >= POISON_LEVEL:
        return removed, "no effect"
    return removed, "effect remains" if worse_p(after, retrain) < POISON_LEVEL else "effect gone"


def _observer(plan: Any, counts: np.ndarray, before: np.ndarray, after: np.ndarray, reference: np.ndarray,
              confidence: float) -> dict:
    s_after, s_before = canary_scores(plan, after, reference), canary_scores(plan, before, reference)
    m, m_before = membership(s_after, plan.present, counts, DELTA, confidence), \
        membership(s_before, plan.present, counts, DELTA, confidence)
    verdict = forgetting_verdict(m, m_before)
    residue = (detectable_residue(plan.directions @ (after - reference), plan.directions @ (before - reference),
                                  plan.present, counts, DELTA, confidence) if verdict == "forgotten" else math.nan)
    return dict(eligible=m.eligible, epsilon_lb=m.epsilon_lb, guesses=m.guesses, correct=m.correct,
                canary_limit=m.limit, limited_by_canaries=m.limited_by_canaries, mu_lb=m.mu_lb, mu_limit=m.mu_limit,
                epsilon_lb_fdp=m.epsilon_lb_fdp, fdp_pool=m.fdp_pool, fdp_participations=m.fdp_participations,
                tpr_at_fpr_0_01=m.tpr_at_fpr_0_01, tpr_at_fpr_0_001=m.tpr_at_fpr_0_001, auc=m.auc, verdict=verdict,
                detectable_residue=residue, before_epsilon_lb=m_before.epsilon_lb)


def _server(plan: Any, counts: np.ndarray, before: np.ndarray, after: np.ndarray, initial: np.ndarray,
            confidence: float) -> dict:
    pair, alone = canary_scores(plan, before, after), canary_scores(plan, before, initial)
    m_pair = membership(pair, plan.present, counts, DELTA, confidence)
    m_alone = membership(alone, plan.present, counts, DELTA, confidence)
    test = server_test(pair, alone, plan.present, counts, m_alone)
    return dict(server_epsilon_lb=m_pair.epsilon_lb, server_auc=m_pair.auc, before_alone_epsilon_lb=m_alone.epsilon_lb,
                server_pair_only=test.pair_only, server_before_only=test.before_only, server_p_value=test.p_value,
                server_verdict=test.verdict)


def unlearning_figures(spec: RunSpec, options: UnlearningOptions, fed: Any, counts: np.ndarray, results: dict,
                       audit_key: str) -> UnlearningAuditRecord:
    """The record of the audit from its tasks' ``results`` (``retrain``, ``clean``, ``poison``)."""
    algo, plan, alg = spec.algorithm, fed.plan, fed.algorithm
    ref, clean = results["retrain"], results["clean"]
    before, after, reference = clean.before, clean.after, ref.after
    initial = np.asarray(alg.init_params(stream(spec.seed, "init")), dtype=np.float64)
    test = fed.splits.test
    q_after, q_ref = per_query_ndcg(alg, after, test), per_query_ndcg(alg, reference, test)
    poison = dict(poison_ndcg10_before=math.nan, poison_ndcg10_after=math.nan, poison_effect_removed=math.nan,
                  poison_verdict="not run")
    if "poison" in results:
        p = results["poison"]
        q_pb, q_pa = per_query_ndcg(alg, p.before, test), per_query_ndcg(alg, p.after, test)
        removed, verdict = poison_check(q_pb, q_pa, q_ref)
        poison = dict(poison_ndcg10_before=nanmean(q_pb), poison_ndcg10_after=nanmean(q_pa),
                      poison_effect_removed=removed, poison_verdict=verdict)
    difference, kept = clean.difference or NOTHING, clean.kept or NOTHING
    return UnlearningAuditRecord(
        algorithm=algo.name, ranker=algo.ranker, method=options.method, defense=spec.defense.name,
        rounds=algo.rounds, clients=algo.clients, population=algo.population or algo.clients, forget=options.forget,
        canaries=options.canaries, included=int(plan.present.sum()), forgotten=len(fed.forgetting.forgotten),
        scale=options.scale, delta=DELTA,
        **_observer(plan, counts, before, after, reference, options.confidence),
        **_server(plan, counts, before, after, initial, options.confidence),
        difference_leakage=difference.leakage, difference_leakage_ci_high=difference.ci_high,
        difference_attack=difference.attack, difference_verdict=difference.verdict,
        stored_leakage=kept.leakage, stored_verdict=kept.verdict,
        ndcg10=nanmean(q_after), ndcg10_before=nanmean(per_query_ndcg(alg, before, test)),
        ndcg10_retrain=nanmean(q_ref), ndcg10_delta=nanmean(q_after) - nanmean(q_ref),
        weight_distance=float(np.linalg.norm(after - reference)), **poison,
        seconds=clean.unlearned.seconds, retrain_seconds=ref.unlearned.seconds,
        client_steps=clean.unlearned.client_steps, retrain_client_steps=ref.unlearned.client_steps,
        stored_bytes=clean.stored_bytes, peak_bytes=clean.peak_bytes, retrain_peak_bytes=ref.peak_bytes,
        audit_key=audit_key)
