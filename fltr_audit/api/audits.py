"""``fltr_audit.audit``: pre-train, probe every click model under every defense, attack, score, audit
each defense's claim -- the ``fltr-audit audit`` command as a Python call.

``fltr_audit.spec.audit_options.AuditOptions`` is the one place the audit's settings and defaults
are declared (the command reads them from there); its tuple fields are lists (repeatable or
comma-separated on the command line). ``audit_campaign_of`` turns the options into the same typed
``CampaignSpec`` a campaign file gives, so ``audit``, ``audit_campaign`` and the CLI run the same
runs and get the same numbers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from attacks.registry import attack_spec
from fltr_audit.api.keywords import as_tuple, check_keywords, renamed
from fltr_audit.api.results import AuditResult
from fltr_audit.api.run_tables import campaign_tables
from fltr_audit.constraints import OPEN_UNIT, Interval, ParameterError, check
from fltr_audit.engine.algorithms.registry import algorithm_spec
from fltr_audit.engine.clicks import CCM_TABLES
from fltr_audit.engine.data.load import load_splits
from fltr_audit.engine.population import parse_non_iid
from fltr_audit.engine.probe import MAX_PROBE_ROUNDS
from fltr_audit.engine.training import check_population
from fltr_audit.errors import FltrError
from fltr_audit.runs.executors import Executor
from fltr_audit.spec.audit_options import LISTS, AuditOptions, audit_defaults
from fltr_audit.spec.campaign import CampaignSpec, validate_spec
from reports.leakage import MIN_EFFECT, planned_lists

ALIASES = {"algo": "algorithm", "train_rounds": "rounds"}
"""Deprecated keywords of :func:`audit` and their current names."""

KEYWORDS = {
    "data.spec": "data", "data.fold": "folds", "fold": "folds", "data.normalization": "normalization",
    "algo": "algorithm", "algorithm.name": "algorithm", "algorithm.rounds": "rounds", "algorithm.clients": "clients",
    "algorithm.queries_per_client": "queries_per_client", "algorithm.ranker": "ranker",
    "algorithm.population": "population", "algorithm.non_iid": "non_iid", "algorithm.poison": "poison",
    "probe.split": "split",
    "probe.click_models": "click_models", "click_model": "click_models", "probe.cohort": "probe_cohort",
    "probe.queries_per_client": "probe_queries", "probe.min_shown": "min_shown",
    "probe.require_click": "require_click", "probe.counterfactual": "counterfactual",
    "probe.threat_model": "threat_model", "probe.manipulation": "manipulation", "probe.lists": "probe_lists",
    "audit.trials": "trials", "audit.epsilon_audit": "epsilon_audit", "seed": "seeds", "defense": "defenses",
}
"""The engine's parameter names as :func:`audit`'s keywords: a ParameterError is renamed by it once."""


def audit_options(options: Mapping[str, Any], function: str = "audit") -> AuditOptions:
    """The options of keywords (deprecated spellings renamed, unknown ones refused, lists as
    tuples, scalar types checked up front)."""
    options = renamed(function, options, ALIASES)
    defaults = audit_defaults()
    check_keywords(function, options, defaults)
    values = {}
    for key, value in options.items():
        if value is not None and key in LISTS:
            value = as_tuple(function, key, value, LISTS[key])
        elif value is not None:
            _check_type(function, key, value, defaults[key])
        values[key] = value
    return AuditOptions(**values)


def audit_campaign_of(options: AuditOptions, name: str = "audit") -> CampaignSpec:
    """The campaign ``options`` run (named ``name``); a bad value is a ParameterError naming the
    engine's parameter (``probe.cohort``), which each door renames for its user."""
    return validate_spec({**_campaign_table(options), "name": name}, source="audit options", keys=False)


def _campaign_table(opts: AuditOptions) -> dict[str, Any]:
    """The TOML-shaped campaign of ``opts`` (the algorithm's declared defaults filled in)."""
    algorithm = algorithm_spec(opts.algorithm, auditable=True)
    if opts.min_effect is not None:
        check("min_effect", opts.min_effect, OPEN_UNIT, "an AUC difference")
    check_population(opts.population, opts.clients)
    users = parse_non_iid(opts.non_iid)
    if users.per_user_clicks and not algorithm.user_clicks:
        raise ParameterError("non_iid", f"{users.setting} gives each user its own clicks, which "
                                        f"{opts.algorithm} does not simulate")
    attacks = list(opts.attacks or algorithm.default_attacks)
    normalization = algorithm.default_normalization if opts.normalization == "auto" else opts.normalization
    lists = plan_probe_lists(opts, attacks, normalization)
    probe = {"split": opts.split, "click_models": list(_click_models(opts, algorithm)), "probe_cohort": opts.probe_cohort,
             "queries_per_client": opts.probe_queries, "min_shown": algorithm.k if opts.min_shown is None
             else opts.min_shown, "require_click": opts.require_click, "counterfactual": opts.counterfactual,
             "threat_model": opts.threat_model, "manipulation": opts.manipulation, "lists": lists,
             "min_effect": MIN_EFFECT if opts.min_effect is None else opts.min_effect,
             "power": opts.power if opts.probe_lists is None else None}  # given lists: no plan
    return {
        "name": "audit", "seeds": list(opts.seeds),
        "data": {"spec": [opts.data], "folds": list(opts.folds), "normalization": normalization},
        "algorithm": {"name": opts.algorithm, "rounds": opts.rounds, "clients": opts.clients,
                      "queries_per_client": opts.queries_per_client, "ranker": opts.ranker,
                      "train_click_model": algorithm.train_click_model,
                      **({"population": opts.population} if opts.population is not None else {}),
                      **({"non_iid": users.name} if users.name != "iid" else {}),
                      **({"poison": ["none", *[p for p in opts.poison if p != "none"]]} if opts.poison else {})},
        "probe": probe,
        "audit": {"defenses": list(opts.defenses), "attacks": attacks, "epsilon_audit": opts.epsilon_audit,
                  "trials": trials_value(opts.trials)},
    }


def _click_models(opts: AuditOptions, algorithm: Any) -> tuple[str, ...]:
    if opts.click_models is None:
        return tuple(algorithm.probe_click_models())
    known = tuple(sorted({m for m, _ in CCM_TABLES})) + ("pbm",)
    for model in opts.click_models:
        if model not in known:
            raise ParameterError("click_model", f"unknown value {model!r} (choose from {', '.join(known)})")
    return opts.click_models


def _check_type(function: str, key: str, value: Any, default: Any) -> None:
    """FltrError naming ``key`` when a scalar keyword has the wrong type (checked against its default's)."""
    if key == "trials" and value == "auto" or default is None:
        return
    for kind, name in ((bool, "True or False"), (int, "an int"), (float, "a number"), (str, "a str")):
        if isinstance(default, kind):
            wrong = not isinstance(value, kind) or (kind is not bool and isinstance(value, bool))
            if kind is float:
                wrong = not isinstance(value, (int, float)) or isinstance(value, bool)
            if wrong:
                raise FltrError(f"fltr_audit.{function}: {key} must be {name}, not {value!r}")
            return


def trials_value(value: int | str) -> int | str:
    """``trials``: a number of trials per input, or ``auto`` (sized to each defense's claim)."""
    text = str(value).strip()
    if text == "auto":
        return text
    try:
        return int(text.replace("_", "").replace(",", ""))
    except ValueError:
        raise ParameterError("trials", f"must be a number of trials or 'auto', got {text!r}") from None


def plan_probe_lists(options: AuditOptions, attacks: list[str], normalization: str) -> int | None:
    """The lists to score per click model: ``probe_lists`` as given, else planned from
    ``min_effect`` and ``power`` (``reports.leakage.planned_lists`` over the informed attacks) and
    capped at the lists the probe split offers (the plan printed says so), else None (one pass
    over the probe split). ParameterError naming ``probe.lists`` beyond the available lists (the
    probe split's queries times ``MAX_PROBE_ROUNDS``) or ``power`` outside (0, 1)."""
    if options.probe_lists is None and options.power is None:
        return None
    min_effect = MIN_EFFECT if options.min_effect is None else options.min_effect
    check("min_effect", min_effect, OPEN_UNIT)
    available = available_lists(options.data, list(options.folds), options.split, normalization, list(options.seeds))
    lists = options.probe_lists
    if lists is None:
        check("power", options.power, OPEN_UNIT)
        informed = sum(not attack_spec(a).reference for a in attacks)
        try:
            lists = min(planned_lists(min_effect, options.power, informed), available)
        except ValueError as exc:  # beyond any count: the minimum effect is too small to plan for
            raise ParameterError("min_effect", str(exc).removeprefix("min_effect: ")) from None
    check("probe.lists", lists, (Interval(int, 1, available),),
          f"the probe split's queries times {MAX_PROBE_ROUNDS} probe rounds")
    return lists


def available_lists(data: str, folds: list[int], split: str, normalization: str, seeds: list[int]) -> int:
    """Lists the probe can issue per click model: the smallest probe split over the folds times
    ``MAX_PROBE_ROUNDS`` (the data loaded once here, cached for the runs)."""
    sizes = [load_splits(data, f, normalization=normalization, seed=seeds[0]).get(split).n_queries for f in folds]
    return min(sizes) * MAX_PROBE_ROUNDS


def audit(*, workers: int = 1, scheduler: str | None = None, **options: Any) -> AuditResult:
    """Audit a federated ranker: train, probe under each defense, attack, score, audit claims.

    Keywords (each optional; ``audit_defaults()`` lists them with their defaults, ``AuditOptions``
    documents them): ``algorithm``, ``data``, ``defenses``, ``attacks``, ``click_models``,
    ``seeds``, ``folds``, ``rounds``, ``clients``, ``queries_per_client``, ``split``,
    ``probe_cohort``, ``probe_queries``, ``probe_lists`` / ``power`` / ``min_effect``,
    ``normalization``, ``ranker``, ``min_shown``, ``require_click``, ``epsilon_audit``, ``trials``,
    ``store`` (also record the runs in this SQLite store), ... ``algo=`` and ``train_rounds=`` are
    deprecated spellings of ``algorithm=`` and ``rounds=``. ``workers`` / ``scheduler``: where the
    runs compute (the same numbers on every executor).

    Returns
    -------
    AuditResult
        With the tables ``attacks``, ``utility``, ``audits``, ``verdicts`` and ``.report(path)``.

    Raises
    ------
    FltrError
        One line naming the keyword, before anything runs, for an unknown keyword, a value
        of the wrong type or an unknown name (algorithm, attack, defense, click model).
    """
    opts = audit_options(options)
    try:
        spec = audit_campaign_of(opts)
    except ParameterError as exc:  # named as the engine calls it: say the keyword typed
        raise (exc if exc.door else exc.renamed(KEYWORDS)) from None
    store = None if opts.store is None else Path(opts.store)
    tables = campaign_tables(spec, store, Executor(workers=workers, scheduler=scheduler))
    return AuditResult(inputs=opts.resolved(), spec=spec, tables=tables)
