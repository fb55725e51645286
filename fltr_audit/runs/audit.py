"""One audit run: train, probe under a defense, attack, score, audit the defense's claim.

Part of the composition root (with ``campaign`` and ``cli``): it wires the engine to the
``defenses`` and ``attacks`` packages. A run's configuration is a typed ``RunSpec``
(``fltr_audit.spec.run``; one grid point of a campaign, ``fltr_audit.runs.campaign.expand``) with its
defense stack parsed once; ``run_audit`` turns it into the result tables of ``docs/store.md``:

1. **Base model** -- the algorithm trained for ``rounds`` rounds with the
   ``train_click_model`` and *no* defense (each round's queries drawn without replacement
   when the training split has enough of them, else with replacement, as FPDGD's
   1,000 clients x 4 queries on MQ2008's ~470 training queries needs) (Pham §4.1 pre-trains with perfect clicks). All
   attacks of all defenses of one seed probe this same model, so attack results differ only
   by what the defense does to the messages.
2. **Utility** -- the same training with the defense applied; its final offline nDCG@10
   on the test split, and the change against the base model, measure the defense's cost.
3. **Probe** (Pham §4.1) -- every query of the probe split is issued by a fresh client
   under each click model, through the defense and aggregation path, grouped in cohorts;
   every attack guesses the clicks from the server's view; scoring is per query, against
   the real clicks and against K counterfactual click vectors of the same users on the same
   lists (``probe.counterfactual``, default 20; ``attacks.scoring``): leakage is the
   difference. The probe's random streams are keyed by the seed and the fold
   (``probe_seed``), so that folds are independent replicates.
4. **Epsilon audits** -- two per run when the defense claims an epsilon, each an ``audits``
   row named by its ``neighbours``: the *worst-case* audit (``_audit_worst_case``: crafted
   inputs beyond the declared clip, ``attacks.worst_case``, scored by the declared mechanism's
   test, or the learned test for a defense that declares nothing), on which the claim verdict
   rests, and the *natural* audit beside it. Natural neighbours: for FOLtR-ES the
   query-distinguishing test on the privatized metric (``_audit_metric``) beside the exact
   epsilon by enumeration; for vector messages, the defense's client transforms (and its
   aggregation) as a mechanism on one probe client's message with and without one click. When
   the aggregator hides messages the audited output is the cohort mean, the other members drawn
   from the probe clients' messages (secure aggregation's exact sum is simulated by the mean:
   its fixed-point error is far below the noise that matters here). Every audit draws from its
   own stream, keyed by the seed, the fold, the defense and the audit kind (``audit_seed``), so
   that runs pooled in a report are independent. ``audit_trials`` is a number of trials per
   input or ``auto`` (sized to the claim, ``attacks.epsilon_bounds.auto_trials``).

A campaign's ``[audit_run]`` section adds the ``run_audits`` row of ``fltr-audit audit-run`` for
the run's settings (``fltr_audit.runs.whole_run.whole_run_audit``, called by ``fltr_audit.runs.executors``).

The pre-trained models are cached per process, keyed by their settings (the spec's frozen
data and algorithm parts, the seed and the defense's canonical name), so the runs of one
campaign that differ only by defense train the base model once per worker.
"""

from __future__ import annotations

import dataclasses
import zlib
from collections import OrderedDict
from functools import lru_cache
from typing import Any, Mapping

import numpy as np
import pandas as pd

from attacks.epsilon_bounds import auto_trials
from attacks.epsilon import epsilon_rows
from attacks.foltr_decode import audit_query_distinguishing
from attacks.registry import attack_spec, make_attack, needed
from attacks.scoring import Evaluation, Slots, evaluate, roc_points, summarize
from attacks.mechanism_audit import audit_stack, protected_by_aggregator
from attacks.stack_outputs import separable_coordinates
from attacks.worst_case import worst_case_inputs
from defenses.accounting import ParticipationSchedule, privacy_spent
from defenses.stack import DefenseStack, parse_defense
from fltr_audit.privacy import mechanisms as mech
from fltr_audit.engine import metrics
from fltr_audit.engine.algorithms import registry as algorithms
from fltr_audit.constraints import POSITIVE_INT, ParameterError, check
from fltr_audit.engine.data.load import load_splits
from fltr_audit.engine.federation import TrainResult, train
from fltr_audit.engine.interfaces import Algorithm, PrivacyClaim
from fltr_audit.engine.messages import Messages, RoundBatch
from fltr_audit.engine.population import parse_non_iid
from fltr_audit.engine.probe import MAX_PROBE_ROUNDS, probe, probe_cohorts
from fltr_audit.engine.randomness import stream
from fltr_audit.store.records import AuditMeasurement, RunPrivacy
from fltr_audit.engine.rankers import make_ranker
from fltr_audit.spec.run import AlgorithmSettings, DataSettings, ProbeSettings, RunSpec, as_run_spec

AUDIT_POOL = 50
AGGREGATE_TRIALS = 4_000
"""At most this many trials per input for a run's worst-case audit of a cohort aggregate (one
defense call on a whole cohort per trial; ceiling 6.3, above every built-in aggregate claim)."""
BATCHED_AGGREGATE_TRIALS = 10_000
"""The same cap for an aggregator that simulates all the trials at once (``zero_cohort_means``:
``ddgauss``, about a second per 10^4 trials)."""
SHUFFLE_VALUES = 20_000_000
"""At most this many simulated message coordinates per input for an audit of a shuffled cohort
(each trial shuffles a whole cohort, of at least the shuffler's n for an amplified claim, the
messages simulated on the coordinates the audit reads, ``separable_coordinates``): 20,000 trials
of one coordinate at n = 1000 in some seconds; 147 trials of an L2-clipped worst case of 136."""
DEFAULT_AUDIT_TRIALS = 10_000
AUDIT_COLUMNS = tuple(f.name for f in dataclasses.fields(AuditMeasurement))
"""The measured columns of an ``audits`` row (the run's algorithm and defense lead, its privacy trails)."""


def build_algorithm(config: RunSpec, splits: Any, click_model: str) -> Algorithm:
    """The algorithm a run configuration names, with the given click model (cached per process)."""
    return _algorithm(config.data, config.algorithm, config.seed, click_model)


@lru_cache(maxsize=32)
def _algorithm(data: DataSettings, algo: AlgorithmSettings, seed: int, click_model: str) -> Algorithm:
    settings = {"ranker": algo.ranker, "seed": seed, "clients": algo.clients,
                "queries_per_client": algo.queries_per_client, "params": algo.kwargs()}
    return algorithms.build(algo.name, _splits(data, seed), click_model, settings)


@lru_cache(maxsize=8)
def _splits(data: DataSettings, seed: int) -> Any:
    return load_splits(data.spec, data.fold, normalization=data.normalization, queries=data.queries, seed=seed)


def splits_of(config: RunSpec) -> Any:
    return _splits(config.data, config.seed)


NO_DEFENSE = parse_defense("none")
_TRAINED: OrderedDict[tuple, TrainResult] = OrderedDict()
_TRAINED_MAX = 16


def trained(config: RunSpec, stack: DefenseStack | None = None) -> TrainResult:
    """The model trained under the defense ``stack`` (None: no defense) for this configuration
    (cached per process, keyed by the training settings and the stack's canonical name)."""
    name = "none" if stack is None else stack.name
    key = (config.data, config.algorithm, config.seed, name)
    if key in _TRAINED:
        _TRAINED.move_to_end(key)
        return _TRAINED[key]
    result = _train(config, stack if stack is not None else NO_DEFENSE)
    _TRAINED[key] = result
    while len(_TRAINED) > _TRAINED_MAX:
        _TRAINED.popitem(last=False)
    return result


def _train(config: RunSpec, stack: DefenseStack) -> TrainResult:
    splits = splits_of(config)
    algo = config.algorithm
    algorithm = build_algorithm(config, splits, algo.train_click_model)
    return train(
        algorithm,
        splits.train,
        clients=algo.clients,
        queries_per_client=algo.queries_per_client,
        rounds=algo.rounds,
        seed=config.seed,
        eval_data=splits.test,
        eval_every=max(1, algo.rounds // 20),
        client_defenses=stack.client,
        aggregator=stack.aggregator,
        replace=algo.clients * algo.queries_per_client > splits.train.n_queries,
        population=algo.population,
        non_iid=parse_non_iid(algo.non_iid),
    )


def run_audit(config: RunSpec | Mapping[str, Any]) -> dict[str, pd.DataFrame]:
    """Compute every table of one run (see the module docstring); a run config dict is read as
    ``RunSpec.from_json``."""
    config = as_run_spec(config)
    draws = counterfactual_draws(config.probe)
    splits = splits_of(config)
    stack = config.defense
    context = {"algo": config.algorithm.name, "setting": algorithm_setting(config), "data": config.data.spec,
               "fold": config.data.fold, "seed": config.seed}

    base = trained(config)
    defended = trained(config, stack) if stack.name != "none" else base
    base_ndcg, _ = _final_ndcg(config, splits, base)
    ndcg, ndcg5 = _final_ndcg(config, splits, defended)
    utility = pd.DataFrame([{**context, "click_model": config.algorithm.train_click_model, "defense": stack.name,
                             "ndcg10": ndcg, "ndcg10_delta": ndcg - base_ndcg, "ndcg5": ndcg5}])
    curves = defended.curves.assign(defense=stack.name, algo=context["algo"], setting=context["setting"])

    probe_cfg = config.probe
    data = splits.get(probe_cfg.split)
    attack_rows, query_rows = [], []
    for click_model in probe_cfg.click_models:
        algorithm = build_algorithm(config, splits, click_model)
        batches, manipulation = probe_rounds(config, algorithm, base.params, data, stack)
        counterfactual = [redraw(algorithm, b, data, draws, probe_seed(config)) for b in batches]
        for name in config.attacks:
            attack = make_attack(name, **_attack_params(name, config, algorithm))
            if not batches:  # every cohort lost: the row says so instead of failing the run
                attack_rows.append({**context, "click_model": click_model, "defense": stack.name, "attack": name,
                                    "reference": attack_spec(name).reference, "probe_cohort": probe_cfg.cohort,
                                    "averaging": "macro", "n_queries": 0, **manipulation})
                continue
            guesses = [attack.guess(b.view) for b in batches]
            scored = [evaluate(guess, b, counterfactual=cf, min_shown=probe_cfg.min_shown,
                               require_click=probe_cfg.require_click)
                      for guess, b, cf in zip(guesses, batches, counterfactual)]
            per_query = Evaluation.rows(scored)
            slots = Slots.concat([e.slots for e in scored])
            threat = threat_label(batches[0].view)
            refined = guesses and guesses[0].attack.startswith(name)
            label = guesses[0].attack if refined else name            # e.g. bayes-approx where bayes searches
            reference = attack_spec(name).reference
            roc = roc_points(slots)
            for row in summarize(per_query, slots=slots):
                row = {**row, **(roc if row["averaging"] == "macro" else {})}  # one curve per run and attack
                attack_rows.append({**context, "click_model": click_model, "defense": stack.name,
                                    "threat_model": threat, "attack": label, "reference": reference,
                                    "probe_cohort": probe_cfg.cohort, **row, **manipulation,
                                    "degenerate_lists": sum(g.degenerate for g in guesses)})
            query_rows.append(per_query.assign(click_model=click_model, defense=stack.name, attack=label))

    tables = {
        "utility": utility,
        "curves": curves,
        "attacks": pd.DataFrame(attack_rows),
        "per_query": pd.concat(query_rows, ignore_index=True) if query_rows else pd.DataFrame(),
    }
    if config.audit.epsilon_audit:
        audit_rows = epsilon_audits(config, splits, stack, base)
        if audit_rows:
            tables["audits"] = pd.DataFrame([{**context, "defense": stack.name, **row} for row in audit_rows])
        rr = randomized_response(stack)
        if rr is not None:
            tables["epsilon"] = pd.DataFrame(epsilon_rows(probe_cfg.click_models, [rr.p],
                                                          levels=splits.train.n_levels))
    return tables


def probe_seed(config: RunSpec) -> int:
    """The seed of a run's probe streams (clicks, counterfactual draws, random baselines),
    derived from the run seed *and the fold*: probe clients of different folds then draw
    independent clicks, so that lists pooled over the folds of one seed are independent
    replicates (the CIs over lists assume it). The same for every defense of a run
    (common random numbers: defenses are compared on the same clicks)."""
    return int(np.random.SeedSequence([int(config.seed), int(config.data.fold)]).generate_state(1)[0])


def counterfactual_draws(probe_cfg: ProbeSettings) -> int:
    """K, the counterfactual click vectors per probed list (``probe.counterfactual``, default 20)."""
    draws = probe_cfg.counterfactual
    check("probe.counterfactual", draws, POSITIVE_INT)
    return int(draws)


def redraw(algorithm: Any, batch: RoundBatch, data: Any, draws: int, seed: int) -> np.ndarray:
    """The counterfactual clicks of one probe round, (draws, n, B, k): the algorithm's click
    model on the same shown lists from ``stream(seed, "counterfactual", round)``, independent
    of the real clicks; the message the attacker sees is unchanged."""
    if batch.view.interactions is None:
        raise ParameterError("probe.counterfactual", "the counterfactual baseline needs the shown lists of the probe")
    rng = stream(seed, "counterfactual", int(batch.view.round))
    return algorithm.redraw_clicks(batch.truth, batch.view.interactions, data, draws, rng)
def threat_label(view: Any) -> str:
    """The threat model an attack row names: ``server (aggregate only)`` when an honest server
    sees only the aggregate, else the view's own threat model."""
    return "server (aggregate only)" if view.threat_model == "server" and view.messages is None else view.threat_model


def probe_rounds(config: RunSpec, algorithm: Any, params: np.ndarray, data: Any, stack: DefenseStack
                 ) -> tuple[list, dict]:
    """The probe's rounds under the run's threat model (``probe.threat_model``, default server)
    and the columns its attack rows add: ``cohorts_lost`` and ``queries_left_out``
    (``fltr_audit.engine.probe``); for ``server-malicious``, the manipulation and its mean cost to the
    other members (nDCG@10 of their shown lists, honest vs served; ``fltr_audit.engine.malicious``).

    Sample size: ``probe.lists`` N (absent: one pass over the split) -- passes over the split,
    at most ``probe.rounds`` (default ``MAX_PROBE_ROUNDS``), until at least N lists can be scored
    (``scorable_lists``). The stopping rule reads only the clicks' counts, never an attack, so it
    does not bias the leakage."""
    probe_cfg = config.probe
    threat_model = config.probe.threat_model
    common = dict(seed=probe_seed(config), queries_per_client=probe_cfg.queries_per_client,
                  cohort_size=probe_cfg.cohort, client_defenses=stack.client, aggregator=stack.aggregator)
    if threat_model != "server-malicious":
        lists = probe_cfg.lists
        passes = probe_cfg.rounds or (1 if lists is None else MAX_PROBE_ROUNDS)
        enough = None if lists is None else (
            lambda batches: sum(scorable_lists(b, probe_cfg.min_shown, probe_cfg.require_click)
                                for b in batches) >= lists)
        found = probe_cohorts(algorithm, params, data, threat_model=threat_model, passes=passes, enough=enough,
                              **common)
        return found.batches, {"cohorts_lost": found.cohorts_lost, "queries_left_out": found.queries_left_out}
    from fltr_audit.engine.malicious import malicious_probe

    manipulation = config.probe.manipulation
    rounds = malicious_probe(algorithm, params, data, manipulation=manipulation, **common)
    honest = float(np.nanmean([r.others_ndcg_honest for r in rounds]))
    served = float(np.nanmean([r.others_ndcg_served for r in rounds]))
    return [r.batch for r in rounds], {"manipulation": manipulation, "others_ndcg_honest": honest,
                                       "others_ndcg_served": served, "others_ndcg_cost": honest - served}


def scorable_lists(batch: RoundBatch, min_shown: int, require_click: bool) -> int:
    """Lists of a probe round that leakage can be scored on: at least ``min_shown`` shown
    documents, a click when ``require_click``, and not every shown document clicked (AUC needs
    both classes)."""
    mask = batch.view.interactions.mask if batch.view.interactions is not None else np.ones(
        np.shape(batch.truth.clicks), dtype=bool)
    clicks = np.asarray(batch.truth.clicks, dtype=bool) & mask
    shown, clicked = mask.sum(-1), clicks.sum(-1)
    keep = (shown >= min_shown) & (clicked < shown) & ((clicked > 0) if require_click else True)
    return int(keep.sum())


def algorithm_setting(config: RunSpec) -> str:
    """The algorithm's own parameters as one short label (e.g. ``gamma=0.5``), so that tables
    keep runs of different settings of one algorithm apart; empty for the defaults."""
    parts = [f"{k}={v}" for k, v in config.algorithm.params]
    if config.algorithm.ranker != "linear":
        parts.insert(0, f"ranker={config.algorithm.ranker}")
    if config.algorithm.non_iid != "iid":
        parts.append(f"non_iid={config.algorithm.non_iid}")
    return ",".join(parts)


def randomized_response(stack: DefenseStack) -> Any:
    """The stack's transform of FOLtR-ES metric values, if any: the client defense that declares
    randomized response (``fltr_audit.privacy.mechanisms.RandomizedResponse``)."""
    found = [d for d in stack.client if isinstance(mech.declared(d), mech.RandomizedResponse)]
    return found[0] if found else None


AUDIT_KINDS = ("worst-case", "natural")


def audit_seed(seed: int, fold: int, defense: str, kind: str) -> int:
    """The seed of one epsilon audit: a ``SeedSequence`` spawn keyed by the run's seed, its fold,
    the defense and the audit kind (``AUDIT_KINDS``), so that the audits of different folds,
    defenses and kinds draw independent noise (pooling counts them as independent runs)."""
    key = (int(fold), zlib.crc32(str(defense).encode()), AUDIT_KINDS.index(kind))
    state = np.random.SeedSequence(int(seed), spawn_key=key).generate_state(2, np.uint32)
    return int(state[0]) << 31 | int(state[1]) >> 1


def audit_trials(config: RunSpec, stack: DefenseStack) -> int:
    """The run's trials per input for its epsilon audits: ``audit_trials`` (default 10,000), or
    ``auto``: sized to the stack's claim (``attacks.epsilon_bounds.auto_trials``); a stack without a claim
    (only audited on natural neighbours, for what its messages reveal) keeps the default -- the
    doors refuse ``auto`` for a defense list where one claims nothing (``campaign_spec``)."""
    trials = config.audit.trials
    if trials != "auto":
        return int(trials)
    if not np.isfinite(stack.claim.epsilon):
        return DEFAULT_AUDIT_TRIALS
    return auto_trials(stack.claim.epsilon, stack.claim.delta)[0]


def shuffle_trials(stack: DefenseStack, trials: int, cohort: int, inputs: tuple[np.ndarray, np.ndarray]) -> int:
    """``trials``, at most ``SHUFFLE_VALUES`` simulated message coordinates' worth (at least 100
    trials) when the stack shuffles: each trial shuffles a cohort of at least the shuffler's n for
    an amplified claim, its messages simulated on the coordinates of ``inputs`` the audit reads."""
    shuffled = mech.declared(stack.aggregator)
    if not isinstance(shuffled, mech.Shuffle):
        return trials
    members = max(cohort, shuffled.n) if shuffled.amplified else cohort
    kept = separable_coordinates(stack, inputs)
    values = len(kept) if kept is not None else len(inputs[0])
    return min(trials, max(100, SHUFFLE_VALUES // (members * max(values, 1))))


def epsilon_audits(config: RunSpec, splits: Any, stack: DefenseStack, base: TrainResult) -> list[dict]:
    """The run's ``audits`` rows: the worst-case audit (when the stack claims an epsilon), then the
    natural one (module docstring, step 4)."""
    metric = algorithms.algorithm_spec(config.algorithm.name).message_kind == "seed+metric"
    natural = _audit_metric(config, splits, stack, base) if metric else _audit_defense(config, splits, stack, base)
    worst = _audit_worst_case(config, stack, metric, natural, len(np.asarray(base.params)))
    return [row for row in (worst, natural) if row is not None]


def _audit_metric(config: RunSpec, splits: Any, stack: DefenseStack, base: TrainResult) -> dict | None:
    """Empirical epsilon of a FOLtR-ES metric message on natural neighbours: the
    query-distinguishing attack on the worst-case pair of relevance placements of the exact
    enumeration (FOLtR-ES §4, Eq. 9)."""
    algorithm = build_algorithm(config, splits, config.algorithm.train_click_model)
    row = audit_query_distinguishing(randomized_response(stack), algorithm.click_model, n_trials=audit_trials(config, stack),
                                     seed=audit_seed(config.seed, config.data.fold, stack.name, "natural"), k=algorithm.k)
    row["mechanism"] = stack.name
    return {**{key: row[key] for key in AUDIT_COLUMNS}, **_run_privacy(config, stack)}


def _audit_worst_case(config: RunSpec, stack: DefenseStack, metric: bool, natural: dict | None,
                      dim: int) -> dict | None:
    """The worst-case audit the claim verdict rests on (None when the stack claims no epsilon, or
    its messages carry neither a vector nor a randomized metric): crafted inputs beyond the
    declared clip (``attacks.worst_case``) at the claim's scope -- one client's message, or the
    cohort aggregate when the aggregator hides messages, protects them, or the claim covers only
    the aggregate -- with the other members' inputs zero (fixed and known: the worst case)."""
    claim = stack.claim
    if not np.isfinite(claim.epsilon):
        return None
    cohort = int(config.probe.cohort)
    trials = audit_trials(config, stack)
    if metric:
        if randomized_response(stack) is None:
            return None
        dim, scope = 1, "message"
    else:
        if natural is None:
            return None
        hides = hides_messages(stack, dim)
        aggregate = hides or protected_by_aggregator(stack) is not None or \
            (claim.scope == "aggregate" and cohort >= 2)
        scope = "aggregate" if aggregate else "message"
        if scope == "aggregate":
            batched = protected_by_aggregator(stack) == "noise" and hasattr(stack.aggregator, "zero_cohort_means")
            trials = min(trials, BATCHED_AGGREGATE_TRIALS if batched else AGGREGATE_TRIALS)
    inputs = worst_case_inputs(stack, dim)
    if not metric:
        trials = shuffle_trials(stack, trials, cohort, inputs)
    result = audit_stack(stack, claim=claim, inputs=inputs, neighbours="worst-case",
                         scope=scope, trials=trials, cohort=cohort, seed=audit_seed(config.seed, config.data.fold, stack.name, "worst-case"),
                         min_trials=4)
    return {**{key: value for key, value in result.as_dict().items() if key in AUDIT_COLUMNS},
            **_run_privacy(config, stack)}


def _attack_params(name: str, config: RunSpec, algorithm: Any) -> dict:
    """What an attack needs beyond the server view, as its spec's ``needs`` says: the probe
    seed, the public algorithm, its list length, the defense stack's noise model."""
    available = {"seed": probe_seed(config), "algorithm": algorithm, "k": algorithm.k}
    if "noise" in attack_spec(name).needs:
        isolated = config.probe.threat_model == "server-malicious"
        available["noise"] = noise_model(config.defense,
                                         members=config.probe.cohort if isolated else 1)
    return needed(name, available)


def noise_model(stack: DefenseStack, members: int = 1) -> Any:
    """The ``attacks.bayes_noise.NoiseModel`` of a defense stack, read from the mechanisms its parts
    declare (``fltr_audit.privacy.mechanisms``): its clipping steps in order and its one noise mechanism
    (ParameterError naming ``attacks`` when ``bayes`` has no likelihood for the defense, or it declares nothing).

    The aggregators that add noise are mapped for the one case ``bayes`` attacks an aggregate:
    the target's update alone in it (a probe cohort of one, or ``server-malicious`` isolation,
    where ``attacks.view.client_updates`` multiplies the mean by the cohort's n and subtracts
    the others' zero updates), of ``members`` clients in all. Then the attacked update is the
    clipped update plus the noise on the cohort's *sum*:

    * ``AggregatorGaussian`` (dp-fedavg): clip ``C`` (L2, of the update) and N(0, (z_D C)^2) per
      coordinate; adaptive clipping is refused (the clip moves every round);
    * ``DiscreteGaussianSum`` (ddgauss): clip ``C``, then a Gaussian approximation
      (``defenses.ddgauss.decoded_noise_std``).

    ``Shuffle`` is refused: the server gets the messages without senders and cannot link one to
    the list it was shown on.
    """
    from attacks.bayes_noise import ClipStep, NoiseModel

    clips: list = []
    noise: dict = {}
    two = ParameterError("attacks", f"bayes: defense {stack.name!r} stacks two noise mechanisms; bayes has a "
                         "likelihood for one")
    for d in stack.client:
        m = mech.declared(d)
        if isinstance(m, mech.Clipping):
            clips.append(ClipStep(m.bound, m.of, m.norm))
            continue
        if noise:
            raise two
        if isinstance(m, mech.GammaShares):
            clips.append(ClipStep(m.sensitivity / 2, m.of, "l2"))
            noise = {"kind": "gamma-difference", "scale": m.scale}
        elif isinstance(m, mech.Laplace):
            clips.append(ClipStep(m.sensitivity / 2, m.of, m.norm))
            noise = {"kind": "laplace", "scale": m.scale}
        elif isinstance(m, mech.Gaussian):
            clips.append(ClipStep(m.clip, "update", "l2"))
            noise = {"kind": "gaussian", "scale": m.std}
        elif isinstance(m, mech.RandomizedResponse):
            noise = {"kind": "rr", "scale": m.p, "values": tuple(float(v) for v in m.values)}
        else:
            raise ParameterError("attacks", f"bayes: defense {d.name!r} declares no mechanism bayes has a likelihood for "
                                            "(declare one of fltr_audit.privacy.mechanisms: Clipping, Laplace, Gaussian, GammaShares, "
                                            "RandomizedResponse)")
    agg = stack.aggregator
    m = mech.declared(agg)
    if isinstance(m, mech.Shuffle):
        raise ParameterError("attacks", f"bayes: defense {stack.name!r} shuffles the messages, so the server cannot "
                                        "link a message to the list it was shown on")
    if isinstance(m, mech.AGGREGATOR_NOISE):
        if noise:
            raise two
        if isinstance(m, mech.AggregatorGaussian) and m.adaptive:
            raise ParameterError("attacks", f"bayes: defense {stack.name!r} adapts its clip norm every round "
                                            "(quantile > 0); bayes needs the fixed clip (quantile=0)")
        clips.append(ClipStep(m.clip, "update", "l2"))
        if isinstance(m, mech.AggregatorGaussian):
            std = m.std_multiplier * m.clip
        else:
            from defenses.ddgauss import decoded_noise_std

            std = decoded_noise_std(agg, members)
        noise = {"kind": "gaussian", "scale": std}
    elif m is None and np.isfinite(getattr(agg, "claim", PrivacyClaim()).epsilon):
        raise ParameterError("attacks", f"bayes: aggregator {agg.name!r} claims an epsilon but declares no mechanism, so "
                                        "bayes has no likelihood for it")
    return NoiseModel(clips=tuple(clips), defense=stack.name, **noise)


def _final_ndcg(config: RunSpec, splits: Any, result: TrainResult) -> tuple[float, float]:
    """Offline nDCG@10 and nDCG@5 of a trained model on the test split."""
    algorithm = build_algorithm(config, splits, config.algorithm.train_click_model)
    scores = algorithm.ranker.score(result.params, splits.test.features)
    return float(metrics.mean_ndcg(scores, splits.test, k=10)), float(metrics.mean_ndcg(scores, splits.test, k=5))


def natural_messages(config: RunSpec, splits: Any, base: TrainResult
                     ) -> tuple[np.ndarray, np.ndarray, str, tuple[np.ndarray, np.ndarray]] | None:
    """Natural neighbours for the epsilon audit (None for seed+metric messages).

    Returns the undefended updates of the first ``AUDIT_POOL`` probe clients under the base
    model (the other cohort members of an aggregate audit), the global model, the vector kind
    and the neighbouring pair: for FPDGD, one probe client's real message *with and without
    one of its clicks* -- its local PDGD step replayed deterministically on the same shown
    list with that click removed (``attacks.bayes.Bayes.replay``), the client and click whose
    removal moves the message most; for messages that cannot be replayed (FedIPS updates), the
    two probe messages farthest apart.
    """
    from attacks.bayes import Bayes

    algorithm = build_algorithm(config, splits, config.algorithm.train_click_model)
    data = splits.get(config.probe.split)
    qpc = config.probe.queries_per_client
    first = data.subset(np.arange(min(AUDIT_POOL * qpc, data.n_queries)))  # one undefended cohort suffices
    batches = probe(algorithm, base.params, first, seed=config.seed, queries_per_client=qpc,
                    cohort_size=AUDIT_POOL)
    messages = batches[0].view.messages
    if messages is None or messages.vector is None:
        return None
    g = np.asarray(base.params, dtype=np.float64)
    pool = messages.updates(g)
    replayable = algorithms.algorithm_spec(config.algorithm.name).message_kind == "weights"  # FPDGD's PDGD step
    pair = _one_click_pair(Bayes(algorithm), batches[0]) if replayable else None
    return pool, g, messages.vector_kind, pair if pair is not None else _farthest_pair(pool)


def _one_click_pair(replayer: Any, batch: RoundBatch) -> tuple[np.ndarray, np.ndarray] | None:
    """(without, with) one click: every probe client's clicks and each of its clicks removed,
    replayed as the client's local step, vectorized over clients; the pair farthest apart in L2
    (None when no client clicked)."""
    clicks = np.asarray(batch.truth.clicks, dtype=bool)                  # (n, B, k)
    n, B, k = clicks.shape
    removed = np.repeat(clicks.reshape(n, 1, B * k), B * k + 1, axis=1)  # candidate 0: the real clicks
    slots = np.arange(B * k)
    removed[:, 1 + slots, slots] = False                                 # candidate 1 + j: click j removed
    updates = replayer.replay(batch.view, removed.reshape(n, B * k + 1, B, k), np.arange(n))  # (n, 1 + B k, P)
    moved = np.linalg.norm(updates[:, 1:] - updates[:, :1], axis=2)
    moved[~clicks.reshape(n, B * k)] = -1.0                              # only removing a real click counts
    i, j = np.unravel_index(np.argmax(moved), moved.shape)
    if moved[i, j] <= 0:
        return None
    return updates[i, 1 + j], updates[i, 0]

def hides_messages(stack: DefenseStack, dim: int) -> bool:
    """Whether the stack's aggregator shows the server only the aggregate."""
    msgs = Messages(n_interactions=np.ones(2, dtype=np.int64), vector=np.zeros((2, dim)))
    return stack.aggregator.aggregate(msgs, np.arange(2), np.random.default_rng(0)).messages is None


def _audit_defense(config: RunSpec, splits: Any, stack: DefenseStack, base: TrainResult) -> dict | None:
    """Empirical epsilon of the stack on natural neighbours (None for seed+metric messages): a
    probe client's real undefended message with and without one click (``natural_messages``),
    through the stack's client transforms -- one client's message, or, when the
    aggregator hides messages, the cohort mean with the other members drawn from the probe
    clients' messages -- scored by the stack's mechanism-aware test (``attacks.mechanism_audit``)."""
    found = natural_messages(config, splits, base)
    if found is None:
        return None
    pool, g, kind, (u0, u1) = found
    hides = hides_messages(stack, pool.shape[1])
    result = audit_stack(stack, claim=stack.claim, inputs=(u0, u1), neighbours="natural",
                         scope="aggregate" if hides else "message",
                         trials=shuffle_trials(stack, audit_trials(config, stack), config.probe.cohort, (u0, u1)),
                         cohort=config.probe.cohort, seed=audit_seed(config.seed, config.data.fold, stack.name, "natural"), others=pool,
                         g=g, kind=kind, min_trials=4)
    return {**{key: value for key, value in result.as_dict().items() if key in AUDIT_COLUMNS},
            **_run_privacy(config, stack)}


def _run_privacy(config: RunSpec, stack: DefenseStack) -> dict:
    """The stack's claim composed over the run's training rounds (``defenses.accounting.privacy_spent``)
    for the participation schedule of the run's seed and population: the ``RunPrivacy`` columns
    (against the server: worst and 99th percentile user; against an observer: Poisson-sampled)."""
    algo = config.algorithm
    schedule = ParticipationSchedule.of_run(config.seed, algo.rounds, algo.clients, algo.population)
    spent = privacy_spent(stack, schedule)
    return {f.name: getattr(spent, f.name) for f in dataclasses.fields(RunPrivacy)}


def _farthest_pair(updates: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The two rows of ``updates`` farthest apart in L2 (the strongest neighbouring pair on hand)."""
    sq = (updates**2).sum(1)
    dist = sq[:, None] + sq[None, :] - 2 * updates @ updates.T
    i, j = np.unravel_index(np.argmax(dist), dist.shape)
    return updates[i], updates[j]
