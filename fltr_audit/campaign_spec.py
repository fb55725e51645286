"""Campaign files: their schema, defaults, loading and validation (the format is described in
``fltr_audit.campaign``). Every value that would fail inside a run fails here, naming its key.

Part of the composition root: validation builds the named defenses and attacks.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Callable, NoReturn

from attacks.registry import make_attack
from defenses.stack import parse_defense
from fltr_audit.algorithms.registry import algorithm_names, algorithm_spec
from fltr_audit.errors import FltrError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ALGORITHMS = algorithm_names(auditable=True)
"""The built-in algorithms a campaign can audit (``fltr_audit.algorithms.registry``; plug-ins join on lookup)."""
CLICK_MODELS = ("perfect", "navigational", "informational")

_SCHEMA: dict[str, dict[str, tuple[type, ...]]] = {
    "": {"name": (str,), "seeds": (int, list), "data": (dict,), "algorithm": (dict,), "probe": (dict,), "audit": (dict,)},
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
    },
    "audit": {"defenses": (str, list), "attacks": (str, list), "epsilon_audit": (bool,), "trials": (int, str)},
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
    },
    "audit": {
        "defenses": ["none"],
        "attacks": ["olsr", "score", "prob", "distance", "random3", "random4"],
        "epsilon_audit": True,
        "trials": 10000,
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
    return validate_spec(raw, source=str(path))


def validate_spec(raw: dict, source: str = "campaign") -> dict:
    """Check keys and types (errors name the key), merge over the defaults, check values."""
    if "name" not in raw:
        raise FltrError(f"{source}: missing key 'name'")
    _check_table(raw, "", source)
    spec: dict[str, Any] = {"name": raw["name"], "seeds": as_list(raw.get("seeds", DEFAULTS["seeds"]))}
    for table in ("data", "algorithm", "probe", "audit"):
        _check_table(raw.get(table, {}), table, source)
        spec[table] = {**DEFAULTS[table], **raw.get(table, {})}
    _check_values(spec, source)
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


def _check_values(spec: dict, source: str) -> None:
    """Every value that would fail inside a run fails here, naming its key, before any store
    is written."""
    from fltr_audit.clicks import CCM_TABLES
    from fltr_audit.data.normalize import NORMALIZATIONS
    from fltr_audit.federation import BUDGET_LIMITS
    from fltr_audit.randomness import check_seed
    from fltr_audit.rankers import RANKERS

    def fail(key: str, problem: str) -> NoReturn:
        raise FltrError(f"{source}: key '{key}' {problem}")

    known_models = sorted({name for name, _ in CCM_TABLES}) + ["pbm"]
    for seed in spec["seeds"]:
        try:
            check_seed(seed, "seeds")
        except FltrError:
            fail("seeds", f"holds {seed!r}, not an integer 0..2^63-1")
    for fold in as_list(spec["data"]["folds"]):
        if not 1 <= fold <= 5:
            fail("data.folds", f"holds {fold}, folds are 1..5")
    if spec["data"]["normalization"] not in NORMALIZATIONS + ("auto",):
        fail("data.normalization", f"is {spec['data']['normalization']!r} (choose {', '.join(NORMALIZATIONS)})")
    queries = spec["data"].get("queries")
    if queries is not None and queries < 1:
        fail("data.queries", f"must be at least 1, got {queries}")
    for data in as_list(spec["data"]["spec"]):
        _check_data_spec(data, queries, source)
    for ranker in as_list(spec["algorithm"]["ranker"]):
        if ranker not in RANKERS:
            fail("algorithm.ranker", f"has unknown ranker {ranker!r} (choose {', '.join(RANKERS)})")
    for key, option in (("rounds", "--rounds"), ("clients", "--clients"),
                        ("queries_per_client", "--queries-per-client")):
        largest = max(as_list(spec["algorithm"][key]))
        if largest > BUDGET_LIMITS[option]:
            fail(f"algorithm.{key}", f"must be at most {BUDGET_LIMITS[option]:,}, got {largest:,}")
    _check_params(spec["algorithm"], source)
    models = as_list(spec["probe"]["click_models"]) + [spec["algorithm"]["train_click_model"]]
    for name in as_list(spec["algorithm"]["name"]):
        position_based = name in ("fedips", "fedavg")  # FedIPS users click by the PBM (Eq. 11)
        for model in models:
            if (model == "pbm") != position_based:
                raise FltrError(f"{source}: click model {model!r} in 'probe.click_models' or "
                                f"'algorithm.train_click_model' does not fit algorithm {name!r} "
                                f"({'pbm only' if position_based else 'pbm is for fedips and fedavg'})")
    if spec["probe"]["min_shown"] < 0:
        fail("probe.min_shown", f"must be 0 or more, got {spec['probe']['min_shown']}")
    if spec["probe"]["queries_per_client"] < 1:
        fail("probe.queries_per_client", f"must be at least 1, got {spec['probe']['queries_per_client']}")
    for name in as_list(spec["algorithm"]["name"]):
        algorithm_spec(name, option=f"{source}: key 'algorithm.name'", auditable=True)
    for model in as_list(spec["probe"]["click_models"]) + [spec["algorithm"]["train_click_model"]]:
        if model not in known_models:
            raise FltrError(f"{source}: unknown click model {model!r} in 'probe.click_models' or 'algorithm.train_click_model'")
    for key in ("rounds", "clients", "queries_per_client"):
        if any(v < 1 for v in as_list(spec["algorithm"][key])):
            raise FltrError(f"{source}: key 'algorithm.{key}' must be at least 1")
    trials = spec["audit"]["trials"]
    if isinstance(trials, str) and trials != "auto":
        raise FltrError(f"{source}: key 'audit.trials' must be a number of trials or \"auto\", got {trials!r}")
    if trials == "auto":  # sized to each defense's claim: a defense that claims none has nothing to size by
        for text in as_list(spec["audit"]["defenses"]):
            stack = parse_defense(text)
            if stack.name != "none" and stack.claim.epsilon == float("inf"):
                raise FltrError(f"{source}: key 'audit.trials' = \"auto\": defense {stack.name!r} claims no epsilon, "
                                "so there is nothing to size its trials by; give a number of trials")
    elif trials < 4:
        raise FltrError(f"{source}: key 'audit.trials' must be at least 4")
    if any(v < 1 for v in as_list(spec["probe"]["cohort"])):
        raise FltrError(f"{source}: key 'probe.cohort' must be at least 1")
    if spec["probe"]["counterfactual"] < 1:
        raise FltrError(f"{source}: key 'probe.counterfactual' must be at least 1 (counterfactual click draws per list)")
    for split in as_list(spec["probe"]["split"]):
        if split not in ("train", "vali", "test"):
            raise FltrError(f"{source}: key 'probe.split' has unknown split {split!r}")
    _check_each(spec["audit"]["defenses"], parse_defense, "audit.defenses", source)
    _check_each(spec["audit"]["attacks"], make_attack, "audit.attacks", source)
    _check_threat_models(spec, source)


def _check_threat_models(spec: dict, source: str) -> None:
    """Known threat models; server-malicious only with an algorithm and manipulation it supports."""
    from fltr_audit.malicious import MANIPULATIONS, SUPPORTED
    from fltr_audit.messages import THREAT_MODELS

    models = as_list(spec["probe"]["threat_model"])
    for model in models:
        if model not in THREAT_MODELS:
            raise FltrError(f"{source}: key 'probe.threat_model' (--threat-model) has unknown threat model {model!r} "
                            f"(choose from {', '.join(THREAT_MODELS)})")
    if "server-malicious" in models:
        for name in as_list(spec["algorithm"]["name"]):
            if name not in SUPPORTED:
                raise FltrError(f"{source}: --threat-model server-malicious: supported for {', '.join(SUPPORTED)} "
                                f"(vector messages of PDGD steps), not {name}")
        if spec["probe"]["manipulation"] not in MANIPULATIONS:
            raise FltrError(f"{source}: key 'probe.manipulation' (--manipulation) has unknown manipulation "
                            f"{spec['probe']['manipulation']!r} (choose from {', '.join(MANIPULATIONS)})")


def _check_data_spec(data: str, queries: int | None, source: str) -> None:
    """A synthetic spec must parse (profile, ``?queries=N`` within the limit); a path must exist."""
    if not data.startswith("synthetic:"):
        if not Path(data).exists():
            raise FltrError(f"{source}: key 'data.spec': no such path {data!r} (relative paths start at the current directory)")
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
    """``algorithm.params``: keys every named algorithm accepts, scalar values or lists of them."""
    for key, value in algo["params"].items():
        where = f"algorithm.params.{key}"
        for item in as_list(value):
            if isinstance(item, (dict, list)) or not isinstance(item, (int, float, str, bool)):
                raise FltrError(f"{source}: key '{where}' holds {item!r}; a parameter is a number, a string, "
                                "a boolean or a list of them (a grid axis)")
        if isinstance(value, list) and not value:
            raise FltrError(f"{source}: key '{where}' is an empty list, so the grid is empty")
        for name in as_list(algo["name"]):
            accepted = _algorithm_params(name)
            if accepted is not None and key not in accepted:
                raise FltrError(f"{source}: key '{where}': algorithm {name!r} has no parameter {key!r} "
                                f"(parameters: {', '.join(sorted(accepted))})")


def _algorithm_params(name: str) -> frozenset[str] | None:
    """Keyword parameters the campaign may pass to algorithm ``name`` (None: not known here)."""
    import inspect

    if name == "fpdgd":
        from fltr_audit.algorithms.fpdgd import FPDGD as build
        skip = {"ranker", "click_model"}
    elif name == "foltr-es":
        from fltr_audit.algorithms.foltr_es import FOLtRES as build
        skip = {"ranker", "click_model"}
    elif name in ("fedips", "fedavg"):
        from fltr_audit.algorithms.fedips import build_fedips as build
        skip = {"data", "seed", "clients", "queries_per_client"} | ({"propensity"} if name == "fedavg" else set())
    else:
        return None
    return frozenset(inspect.signature(build).parameters) - skip


def _check_each(values: Any, build: Callable[[str], Any], key: str, source: str) -> None:
    """Build every named object once so that a bad name fails before any run, naming the key."""
    for value in as_list(values):
        try:
            build(value)
        except FltrError as exc:
            raise FltrError(f"{source}: key '{key}': {exc}") from None


def as_list(value: Any) -> list:
    """A list value as is, a scalar as a one-item list (a grid axis of one point)."""
    return value if isinstance(value, list) else [value]
