"""The checks of a campaign's values: every value that would fail inside a run fails here, before
any store is written, naming its key (a ParameterError naming the engine's parameter, renamed by
the reader, or a FltrError naming the key). Validation builds the named defenses and attacks once."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from attacks.registry import make_attack
from defenses.robust.compose import check_cohort
from fltr_audit.constraints import OPEN_UNIT, Options, ParameterError, check
from fltr_audit.engine.algorithms.registry import algorithm_spec, manipulable_names
from fltr_audit.engine.clicks import CCM_TABLES
from fltr_audit.engine.data.load import _layout, _synthetic_spec
from fltr_audit.engine.data.synthetic import max_queries
from fltr_audit.engine.unlearning import METHODS
from fltr_audit.errors import FltrError
from fltr_audit.spec.campaign_tables import DEFAULTS, SCHEMA, as_list
from fltr_audit.spec.defense import DefenseSpec
from fltr_audit.spec.poison import parse_poison
from fltr_audit.spec.run import (AlgorithmSettings, AuditSettings, DataSettings, ProbeSettings, RunSpec, check_population,
                                  check_setting)
from fltr_audit.spec.unlearning import UnlearningOptions, check_unlearning
from fltr_audit.spec.whole_run import canary_problem


def family_defaults(spec: dict, raw: dict) -> None:
    """Algorithms whose users click by PBM (declared on their spec, ``click_models = "pbm"``)
    train and are probed with the spec's click model unless the file names one: the cascade
    defaults never fit them. Cascade algorithms keep the defaults (and their run keys)."""
    names = as_list(spec["algorithm"]["name"])
    try:
        specs = [algorithm_spec(name, auditable=True) for name in names]
    except FltrError:
        return  # an unknown name: check_values names it
    if {s.click_models for s in specs} != {"pbm"}:
        return
    if "train_click_model" not in raw.get("algorithm", {}):
        spec["algorithm"]["train_click_model"] = specs[0].train_click_model
    if "click_models" not in raw.get("probe", {}):
        spec["probe"]["click_models"] = list(specs[0].probe_click_models())



def check_table(table: dict, name: str, source: str) -> None:
    """Every key of the table ``name`` known and of its type (a key whose default is unset may be
    None: a mapping merged over the defaults, ``CampaignSpec.table``, is read again as it is)."""
    schema = SCHEMA[name]
    unset = {k for k, v in (DEFAULTS.get(name, {}) if name else DEFAULTS).items() if v is None}
    unset |= {"power"} if name == "probe" else set()  # None from Python: one pass, no plan
    for key, value in table.items():
        where = f"{name}.{key}" if name else key
        if key not in schema:
            raise FltrError(f"{source}: unknown key '{where}' (known: {', '.join(sorted(schema))})")
        if value is None and key in unset:
            continue
        if not isinstance(value, schema[key]) or (isinstance(value, bool) and bool not in schema[key]):
            kinds = " or ".join(t.__name__ for t in schema[key])
            raise FltrError(f"{source}: key '{where}' must be {kinds}, not {type(value).__name__}")
        if isinstance(value, list):
            if not value:
                raise FltrError(f"{source}: key '{where}' is an empty list, so the grid is empty")
            scalar = [t for t in schema[key] if t is not list]
            for item in value:
                if not isinstance(item, tuple(scalar)) or isinstance(item, bool) and bool not in scalar:
                    raise FltrError(f"{source}: key '{where}' holds {item!r}, expected {scalar[0].__name__} items")
            twice = next((item for i, item in enumerate(value) if item in value[:i]), None)
            if twice is not None:
                raise FltrError(f"{source}: key '{where}' holds {twice!r} twice (the grid would repeat runs)")



_SETTINGS: dict[str, tuple[type, str]] = {
    "seeds": (RunSpec, "seed"),
    "data.spec": (DataSettings, "spec"), "data.folds": (DataSettings, "fold"),
    "data.normalization": (DataSettings, "normalization"), "data.queries": (DataSettings, "queries"),
    **{f"algorithm.{k}": (AlgorithmSettings, k) for k in ("name", "rounds", "clients", "queries_per_client",
                                                          "ranker", "train_click_model", "population")},
    "probe.probe_cohort": (ProbeSettings, "cohort"),
    **{f"probe.{k}": (ProbeSettings, k) for k in ("split", "queries_per_client", "min_shown",
                                                  "require_click", "counterfactual", "threat_model", "manipulation",
                                                  "lists", "rounds")},
    "audit.epsilon_audit": (AuditSettings, "epsilon_audit"), "audit.trials": (AuditSettings, "trials"),
    "audit_run.canaries": (AuditSettings, "run_canaries"), "audit_run.runs": (AuditSettings, "run_runs"),
    "unlearning.forget": (AuditSettings, "unlearning_forget"),
    "unlearning.canaries": (AuditSettings, "unlearning_canaries"),
    "unlearning.poison_check": (AuditSettings, "unlearning_poison_check"),
}
"""Campaign keys checked by the run spec's own constraints (each value of a grid axis)."""


def _check_settings(spec: dict) -> None:
    """Every value of every key in ``_SETTINGS`` against its setting's constraints
    (ParameterError naming the run spec's parameter)."""
    for key, (section, name) in _SETTINGS.items():
        table, _, field = key.rpartition(".")
        value = (spec[table] if table else spec).get(field)
        if value is None and key in ("data.queries", "algorithm.population", "probe.lists", "probe.rounds",
                                     "audit_run.canaries"):
            continue
        for item in as_list(value):
            check_setting(section, name, item)


def check_values(spec: dict, source: str) -> None:
    """Every value that would fail inside a run fails here, before any store is written: a
    ParameterError naming the engine's parameter, or a FltrError naming the key."""

    _check_settings(spec)
    for key in ("min_effect", "power"):
        if spec["probe"].get(key) is not None:
            check(f"probe.{key}", spec["probe"][key], OPEN_UNIT)
    for non_iid in as_list(spec["algorithm"].get("non_iid", "iid")):
        check_population(spec["algorithm"].get("population"), non_iid)
    known_models = sorted({name for name, _ in CCM_TABLES}) + ["pbm"]
    queries = spec["data"].get("queries")
    for data in as_list(spec["data"]["spec"]):
        _check_data_spec(data, queries, source)
    _check_params(spec["algorithm"], source)
    for name in as_list(spec["algorithm"]["name"]):
        algorithm_spec(name, auditable=True)
    models = as_list(spec["probe"]["click_models"]) + [spec["algorithm"]["train_click_model"]]
    for model in models:
        if model not in known_models:
            raise FltrError(f"{source}: unknown click model {model!r} in 'probe.click_models' or 'algorithm.train_click_model'")
    for name in as_list(spec["algorithm"]["name"]):
        family = algorithm_spec(name, auditable=True).click_models  # declared on the algorithm's spec
        for model in models:
            if (model == "pbm") != (family == "pbm"):
                raise FltrError(f"{source}: click model {model!r} in 'probe.click_models' or "
                                f"'algorithm.train_click_model' does not fit algorithm {name!r} "
                                f"({'pbm only' if family == 'pbm' else 'its users click by a cascade model'})")
    defenses = _check_each(spec["audit"]["defenses"], DefenseSpec.parse, "defense")  # parsed once, here
    if spec["audit"]["trials"] == "auto":  # sized to each defense's claim: one that claims none has nothing to size by
        for stack in defenses:
            if stack.name != "none" and stack.claim.epsilon == float("inf"):
                raise FltrError(f"{source}: key 'audit.trials' = \"auto\": defense {stack.name!r} claims no epsilon, "
                                "so there is nothing to size its trials by; give a number of trials")
    _check_messages(spec, defenses)
    _check_each(spec["audit"]["attacks"], make_attack, "attacks")
    _check_robustness(spec, defenses)
    _check_threat_models(spec, source)
    _check_audit_run(spec, source, defenses)
    _check_unlearning(spec, defenses)


MESSAGE_KINDS = {"vector": ("weights", "update"), "metric": ("seed+metric",)}
"""What a client defense transforms (its declared ``privatizes``) -> the message kinds that carry it."""


def _check_messages(spec: dict, defenses: list[DefenseSpec]) -> None:
    """Every client defense transforms what every algorithm's messages carry (read from the
    defense's declared ``privatizes`` and the algorithm's declared ``message_kind``)."""
    for name in as_list(spec["algorithm"]["name"]):
        kind = algorithm_spec(name, auditable=True).message_kind
        for stack in defenses:
            for defense in stack.build().client:
                if kind not in MESSAGE_KINDS[defense.privatizes]:
                    raise ParameterError("defense", f"{defense.name} transforms "
                                    f"{'FOLtR-ES metric values' if defense.privatizes == 'metric' else 'vector messages'}"
                                    f"; algorithm {name!r} sends {kind} messages")


def _check_threat_models(spec: dict, source: str) -> None:
    """server-malicious only with an algorithm it supports."""

    if "server-malicious" in as_list(spec["probe"]["threat_model"]):
        for name in as_list(spec["algorithm"]["name"]):
            if not algorithm_spec(name, auditable=True).server_manipulable:
                raise ParameterError("threat_model", f"server-malicious: supported for {', '.join(manipulable_names())} "
                                     f"(vector messages of PDGD steps), not {name}")


def _check_audit_run(spec: dict, source: str, defenses: list[DefenseSpec]) -> None:
    """``[audit_run]``: the canaries fit in every run's population (``algorithm.population``, else
    its cohort), and every defense and algorithm can carry canaries (``canary_problem``)."""

    canaries = spec["audit_run"]["canaries"]
    if canaries is None:
        return
    population = spec["algorithm"].get("population")
    users = population if population is not None else min(as_list(spec["algorithm"]["clients"]))
    if canaries > users:
        raise FltrError(f"{source}: key 'audit_run.canaries': {canaries:,} canaries exceed the population of "
                        f"{users:,} users ('algorithm.population', or the smallest 'algorithm.clients' without it)")
    for name in as_list(spec["algorithm"]["name"]):
        for stack in defenses:
            problem = canary_problem(name, stack.build())
            if problem:
                raise FltrError(f"{source}: key 'audit_run.canaries': {problem}")


def _check_unlearning(spec: dict, defenses: list[DefenseSpec]) -> None:
    """``[unlearning]``: every method fits every algorithm, defense and cohort of the grid
    (``spec.unlearning.check_unlearning`` on each combination's run spec; a ParameterError naming the
    engine's parameter, renamed to its key by the reader)."""

    table = spec["unlearning"]
    if table["method"] is None:
        return
    algo = spec["algorithm"]
    for method in as_list(table["method"]):
        check("unlearning.method", method, (Options(METHODS),))
        options = UnlearningOptions(method=method, forget=table["forget"], canaries=table["canaries"],
                                    poison_check=table["poison_check"])
        for name in as_list(algo["name"]):
            for clients in as_list(algo["clients"]):
                run = RunSpec(data=DataSettings(spec="synthetic:mq2008", fold=1),
                              algorithm=AlgorithmSettings(name=name, rounds=1, clients=clients, queries_per_client=1,
                                                          population=algo.get("population"),
                                                          non_iid=as_list(algo.get("non_iid", "iid"))[0]),
                              probe=ProbeSettings(), defense="none", attacks=(), audit=AuditSettings(), seed=0)
                for defense in defenses:
                    try:
                        check_unlearning(run.replace(defense=defense), options)
                    except ParameterError as exc:  # the table's keys, not audit_run's canaries
                        key = f"unlearning.{exc.parameter}" if exc.parameter in table else exc.parameter
                        raise ParameterError(key, exc.problem) from None


def _check_data_spec(data: str, queries: int | None, source: str) -> None:
    """A synthetic spec must parse (profile, ``?queries=N`` within the limit); a path must exist."""
    if not data.startswith("synthetic:"):
        if not Path(data).exists():
            raise FltrError(f"{source}: key 'data.spec': no such path {data!r} (relative paths start at the current directory)")

        try:
            _layout(data)  # a folder must hold Fold1..Fold5 or train/vali/test files
        except FltrError as exc:
            raise FltrError(f"{source}: key 'data.spec': {exc}") from None
        return

    name, n = _synthetic_spec(data, queries)  # ParameterError naming data, renamed by validate_spec
    try:
        largest = max_queries(name)
    except FltrError as exc:
        raise FltrError(f"{source}: key 'data.spec': {exc}") from None
    if n is not None and not 5 <= n <= largest:
        raise FltrError(f"{source}: key 'data.spec': {data!r} with {n} queries; synthetic:{name} takes 5..{largest:,}")


def _check_params(algo: dict, source: str) -> None:
    """``algorithm.params``: keys every named algorithm declares, scalar values within their
    constraints (``AlgorithmSpec.params``), or lists of them (a grid axis)."""
    for key, value in algo["params"].items():
        where = f"algorithm.params.{key}"
        if isinstance(value, list) and not value:
            raise FltrError(f"{source}: key '{where}' is an empty list, so the grid is empty")
        for item in as_list(value):
            if isinstance(item, (dict, list)) or not isinstance(item, (int, float, str, bool)):
                raise FltrError(f"{source}: key '{where}' holds {item!r}; a parameter is a number, a string, "
                                "a boolean or a list of them (a grid axis)")
            for name in as_list(algo["name"]):
                try:
                    algorithm_spec(name, auditable=True).check_params({key: item}, prefix="algorithm.params.")
                except ParameterError as exc:
                    raise FltrError(f"{source}: key '{exc.parameter}': algorithm {name!r}: {exc.problem}") from None


def _check_robustness(spec: dict, defenses: list[DefenseSpec]) -> None:
    """``algorithm.poison``: every poisoning parses and every algorithm's messages carry it; every
    defense's aggregator fits every training and probe cohort (``defenses.robust.compose.check_cohort``:
    a robust rule's bound, secure aggregation's smallest cohort)."""

    for text in as_list(spec["algorithm"].get("poison", "none")):
        poison = parse_poison(text)
        for name in as_list(spec["algorithm"]["name"]) if poison is not None else []:
            declared = algorithm_spec(name, auditable=True)
            poison.check_applies(name, declared.message_kind, declared.user_clicks)
    for stack in defenses:
        built = stack.build()
        for parameter, cohorts in (("defense", spec["algorithm"]["clients"]),
                                   ("probe_cohort", spec["probe"]["probe_cohort"])):
            for cohort in as_list(cohorts):
                try:
                    check_cohort(built, cohort)
                except FltrError as exc:
                    raise ParameterError(parameter, str(exc)) from None


def _check_each(values: Any, build: Callable[[str], Any], parameter: str) -> list[Any]:
    """Build every named object once so that a bad name fails before any run: a ParameterError
    naming ``parameter`` (``defense``, ``attacks``); returns what was built."""
    built = []
    for value in as_list(values):
        try:
            built.append(build(value))
        except ParameterError as exc:
            if exc.parameter != parameter or exc.where:
                raise ParameterError(parameter, str(exc)) from None
            raise
        except FltrError as exc:
            raise ParameterError(parameter, str(exc)) from None
    return built


