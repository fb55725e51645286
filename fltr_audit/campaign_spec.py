"""Campaign files: their schema, defaults, loading and validation (the format is described in
``fltr_audit.campaign``). Every value that would fail inside a run fails here, naming its key.

Part of the composition root: validation builds the named defenses and attacks.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Callable, Mapping

from attacks.registry import make_attack
from defenses.stack import parse_defense
from fltr_audit.algorithms.registry import algorithm_names, algorithm_spec
from fltr_audit.constraints import ParameterError
from fltr_audit.errors import FltrError
from fltr_audit.run_spec import (AlgorithmSettings, AuditSettings, DataSettings, ProbeSettings, RunSpec,
                                 check_setting)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ALGORITHMS = algorithm_names(auditable=True)
"""The built-in algorithms a campaign can audit (``fltr_audit.algorithms.registry``; plug-ins join on lookup)."""
CLICK_MODELS = ("perfect", "navigational", "informational")

_SCHEMA: dict[str, dict[str, tuple[type, ...]]] = {
    "": {"name": (str,), "seeds": (int, list), "data": (dict,), "algorithm": (dict,), "probe": (dict,), "audit": (dict,),
         "audit_run": (dict,)},
    "data": {"spec": (str, list), "folds": (int, list), "normalization": (str,), "queries": (int,)},
    "algorithm": {
        "name": (str, list),
        "rounds": (int, list),
        "clients": (int, list),
        "queries_per_client": (int, list),
        "ranker": (str, list),
        "train_click_model": (str,),
        "params": (dict,),
        "population": (int,),
        "non_iid": (str, list),
    },
    "probe": {
        "split": (str, list),
        "click_models": (str, list),
        "cohort": (int, list),
        "queries_per_client": (int,),
        "min_shown": (int,),
        "require_click": (bool,),
        "counterfactual": (int,),
        "threat_model": (str, list),
        "manipulation": (str,),
        "lists": (int,),
        "rounds": (int,),
    },
    "audit": {"defenses": (str, list), "attacks": (str, list), "epsilon_audit": (bool,), "trials": (int, str)},
    "audit_run": {"canaries": (int,), "runs": (int,)},
}

DEFAULTS: dict[str, Any] = {
    "seeds": [0],
    "data": {"spec": ["synthetic:mq2008"], "folds": [1], "normalization": "zscore", "queries": None},
    "algorithm": {
        "name": ["fpdgd"],
        "rounds": [20],
        "clients": [1000],
        "queries_per_client": [4],
        "ranker": ["linear"],
        "train_click_model": "perfect",
        "params": {},
    },
    "probe": {
        "split": ["vali"],
        "click_models": list(CLICK_MODELS),
        "cohort": [100],
        "queries_per_client": 1,
        "min_shown": 10,
        "require_click": True,
        "counterfactual": 20,
        "threat_model": ["server"],
        "manipulation": "isolate",
        "lists": None,   # lists to score per click model (probe rounds until then); None: one pass
        "rounds": None,  # probe rounds (passes over the split) at most; None: 1, or 50 with lists
    },
    "audit": {
        "defenses": ["none"],
        "attacks": ["olsr", "score", "prob", "distance", "random3", "random4"],
        "epsilon_audit": True,
        "trials": 10000,
    },
    "audit_run": {  # the whole-run canary audit of every run (run_audits); off without canaries
        "canaries": None,
        "runs": 1,
    },
}


def load_spec(path: str | Path) -> dict:
    """Read and validate a campaign TOML file; return it merged over the defaults."""
    path = Path(path)
    if not path.is_file():
        raise FltrError(f"{path}: no such campaign file")
    try:
        raw = tomllib.loads(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise FltrError(f"{path}: not UTF-8 text (byte {exc.start}: {exc.reason})") from None
    except tomllib.TOMLDecodeError as exc:
        raise FltrError(f"{path}: not valid TOML: {exc}") from None
    except OSError as exc:
        raise FltrError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except RecursionError:
        raise FltrError(f"{path}: not a campaign file (arrays or tables nested too deeply)") from None
    return validate_spec(raw, source=str(path))


def validate_spec(raw: dict, source: str = "campaign", names: Mapping[str, str] | None = None) -> dict:
    """Check keys and types (errors name the key), merge over the defaults, check values.

    ``names`` maps the run spec's parameter names to a door's own (the ``audit`` command's
    options, the API's keywords) so that a bad value names what its user typed; without it,
    errors name the campaign key."""
    if "name" not in raw:
        raise FltrError(f"{source}: missing key 'name'")
    _check_table(raw, "", source)
    spec: dict[str, Any] = {"name": raw["name"], "seeds": as_list(raw.get("seeds", DEFAULTS["seeds"]))}
    for table in ("data", "algorithm", "probe", "audit", "audit_run"):
        _check_table(raw.get(table, {}), table, source)
        spec[table] = {**DEFAULTS[table], **raw.get(table, {})}
    _check_values(spec, source, names)
    return spec


def _check_table(table: dict, name: str, source: str) -> None:
    schema = _SCHEMA[name]
    for key, value in table.items():
        where = f"{name}.{key}" if name else key
        if key not in schema:
            raise FltrError(f"{source}: unknown key '{where}' (known: {', '.join(sorted(schema))})")
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


CAMPAIGN_KEYS = {"data.fold": "data.folds", "seed": "seeds", "audit.run_canaries": "audit_run.canaries",
                 "audit.run_runs": "audit_run.runs"}
"""The run spec's parameter names (``fltr_audit.run_spec``) that a campaign file spells otherwise."""

_SETTINGS: dict[str, tuple[type, str]] = {
    "seeds": (RunSpec, "seed"),
    "data.spec": (DataSettings, "spec"), "data.folds": (DataSettings, "fold"),
    "data.normalization": (DataSettings, "normalization"), "data.queries": (DataSettings, "queries"),
    **{f"algorithm.{k}": (AlgorithmSettings, k) for k in ("name", "rounds", "clients", "queries_per_client",
                                                          "ranker", "train_click_model", "population")},
    **{f"probe.{k}": (ProbeSettings, k) for k in ("split", "cohort", "queries_per_client", "min_shown",
                                                  "require_click", "counterfactual", "threat_model", "manipulation",
                                                  "lists", "rounds")},
    "audit.epsilon_audit": (AuditSettings, "epsilon_audit"), "audit.trials": (AuditSettings, "trials"),
    "audit_run.canaries": (AuditSettings, "run_canaries"), "audit_run.runs": (AuditSettings, "run_runs"),
}
"""Campaign keys checked by the run spec's own constraints (each value of a grid axis)."""


def _check_settings(spec: dict, source: str, names: Mapping[str, str] | None) -> None:
    """Every value of every key in ``_SETTINGS`` against its setting's constraints; the error
    names the key as the door's user wrote it: the campaign key, or (``names``) the option."""
    for key, (section, name) in _SETTINGS.items():
        table, _, field = key.rpartition(".")
        value = (spec[table] if table else spec).get(field)
        if value is None and key in ("data.queries", "algorithm.population", "probe.lists", "probe.rounds",
                                     "audit_run.canaries"):
            continue
        for item in as_list(value):
            try:
                check_setting(section, name, item)
            except ParameterError as exc:
                raise door_error(exc, source, names) from None


def door_error(exc: ParameterError, source: str, names: Mapping[str, str] | None) -> ParameterError:
    """``exc`` as the campaign reader says it (``SOURCE: key 'probe.cohort': ...``), or, with a
    door's ``names`` (the CLI's options, the API's keywords), naming what its user typed."""
    if names is None:
        return exc.renamed(CAMPAIGN_KEYS, where=f"{source}: ", form="key '{}'")
    return exc.renamed(names)


def _check_values(spec: dict, source: str, names: Mapping[str, str] | None = None) -> None:
    """Every value that would fail inside a run fails here, naming its key, before any store
    is written."""
    from fltr_audit.clicks import CCM_TABLES

    _check_settings(spec, source, names)
    known_models = sorted({name for name, _ in CCM_TABLES}) + ["pbm"]
    queries = spec["data"].get("queries")
    for data in as_list(spec["data"]["spec"]):
        _check_data_spec(data, queries, source)
    _check_params(spec["algorithm"], source)
    for name in as_list(spec["algorithm"]["name"]):
        algorithm_spec(name, option=f"{source}: key 'algorithm.name'", auditable=True)
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
    trials = spec["audit"]["trials"]
    if trials == "auto":  # sized to each defense's claim: a defense that claims none has nothing to size by
        for text in as_list(spec["audit"]["defenses"]):
            stack = parse_defense(text)
            if stack.name != "none" and stack.claim.epsilon == float("inf"):
                raise FltrError(f"{source}: key 'audit.trials' = \"auto\": defense {stack.name!r} claims no epsilon, "
                                "so there is nothing to size its trials by; give a number of trials")
    _check_each(spec["audit"]["defenses"], parse_defense, "defense", source, names)
    _check_each(spec["audit"]["attacks"], make_attack, "attacks", source, names)
    _check_threat_models(spec, source)
    _check_audit_run(spec, source)


def _check_threat_models(spec: dict, source: str) -> None:
    """server-malicious only with an algorithm it supports."""
    from fltr_audit.algorithms.registry import manipulable_names

    if "server-malicious" in as_list(spec["probe"]["threat_model"]):
        for name in as_list(spec["algorithm"]["name"]):
            if not algorithm_spec(name, auditable=True).server_manipulable:
                raise FltrError(f"{source}: --threat-model server-malicious: supported for "
                                f"{', '.join(manipulable_names())} (vector messages of PDGD steps), not {name}")


def _check_audit_run(spec: dict, source: str) -> None:
    """``[audit_run]``: the canaries fit in every run's population (``algorithm.population``, else
    its cohort), and every defense and algorithm can carry canaries (``canary_problem``)."""
    from fltr_audit.whole_run import canary_problem

    canaries = spec["audit_run"]["canaries"]
    if canaries is None:
        return
    population = spec["algorithm"].get("population")
    users = population if population is not None else min(as_list(spec["algorithm"]["clients"]))
    if canaries > users:
        raise FltrError(f"{source}: key 'audit_run.canaries': {canaries:,} canaries exceed the population of "
                        f"{users:,} users ('algorithm.population', or the smallest 'algorithm.clients' without it)")
    for name in as_list(spec["algorithm"]["name"]):
        for text in as_list(spec["audit"]["defenses"]):
            problem = canary_problem(name, parse_defense(text))
            if problem:
                raise FltrError(f"{source}: key 'audit_run.canaries': {problem}")


def _check_data_spec(data: str, queries: int | None, source: str) -> None:
    """A synthetic spec must parse (profile, ``?queries=N`` within the limit); a path must exist."""
    if not data.startswith("synthetic:"):
        if not Path(data).exists():
            raise FltrError(f"{source}: key 'data.spec': no such path {data!r} (relative paths start at the current directory)")
        from fltr_audit.data.load import _layout

        try:
            _layout(data)  # a folder must hold Fold1..Fold5 or train/vali/test files
        except FltrError as exc:
            raise FltrError(f"{source}: key 'data.spec': {exc}") from None
        return
    from fltr_audit.data.load import _synthetic_spec
    from fltr_audit.data.synthetic import max_queries

    try:
        name, n = _synthetic_spec(data, queries)
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


_LIST_KEYS = {"defense": "audit.defenses", "attacks": "audit.attacks"}
"""The run spec's name lists as campaign keys."""


def _check_each(values: Any, build: Callable[[str], Any], parameter: str, source: str,
                names: Mapping[str, str] | None = None) -> None:
    """Build every named object once so that a bad name fails before any run, naming the campaign
    key (or, with a door's ``names``, its option or keyword) once."""
    for value in as_list(values):
        try:
            build(value)
        except FltrError as exc:
            problem = str(exc).removeprefix("--attack: ")  # the registry's own wording names the CLI option
            if names is None:
                raise FltrError(f"{source}: key '{_LIST_KEYS[parameter]}': {problem}") from None
            raise FltrError(f"{names.get(parameter, parameter)}: {problem}") from None


def as_list(value: Any) -> list:
    """A list value as is, a scalar as a one-item list (a grid axis of one point)."""
    return value if isinstance(value, list) else [value]
