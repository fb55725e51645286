"""Attack campaigns: a TOML grid of audits, expanded into runs, executed and stored.

A campaign file has these tables (every key optional except ``name``)::

    name = "defense-comparison"
    seeds = [0, 1, 2]

    [data]
    spec = ["synthetic:mq2008"]          # paths or synthetic:PROFILE
    folds = [1]
    normalization = "zscore"             # none | query-minmax | zscore

    [algorithm]
    name = ["fpdgd"]                     # fpdgd | foltr-es | fedips | fedavg
    rounds = [20]
    clients = [1000]
    queries_per_client = [4]
    ranker = ["linear"]
    train_click_model = "perfect"
    params = { lr = 0.1 }                # algorithm-specific; list values expand too

    [probe]
    split = "vali"
    click_models = ["perfect", "navigational", "informational"]
    cohort = [100]
    queries_per_client = 1
    min_shown = 10
    require_click = true

    [audit]
    defenses = ["none", "clip(delta=5)+dp-distributed(eps=4.5)", "secagg"]
    attacks = ["olsr", "score", "prob", "distance", "random3", "random4"]
    epsilon_audit = true
    trials = 10000                       # per input of the empirical epsilon audit

Grid axes: ``seeds``, ``data.spec``, ``data.folds``, every list of ``[algorithm]``
(including inside ``params``), ``probe.split``, ``probe.cohort`` and ``audit.defenses``.
The click models and attacks of a run are evaluated inside it, on the same trained model
and the same probe, so they are lists but not axes. Each grid point is one run whose key is
the SHA-256 of its resolved configuration (canonical JSON), so the key is stable across
processes and machines and changes with any setting.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

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
    },
    "probe": {
        "split": (str, list),
        "click_models": (str, list),
        "cohort": (int, list),
        "queries_per_client": (int,),
        "min_shown": (int,),
        "require_click": (bool,),
    },
    "audit": {"defenses": (str, list), "attacks": (str, list), "epsilon_audit": (bool,), "trials": (int,)},
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
    },
    "audit": {
        "defenses": ["none"],
        "attacks": ["olsr", "score", "prob", "distance", "random3", "random4"],
        "epsilon_audit": True,
        "trials": 10000,
    },
}


@dataclass(frozen=True)
class Run:
    """One grid point: its key and resolved configuration (JSON-able)."""

    key: str
    config: dict


def run_key(config: dict) -> str:
    """SHA-256 of the canonical JSON of ``config`` without its campaign name (16 hex digits)."""
    body = {k: v for k, v in config.items() if k != "campaign"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def load_spec(path: str | Path) -> dict:
    """Read and validate a campaign TOML file; return it merged over the defaults."""
    path = Path(path)
    if not path.is_file():
        raise FltrError(f"{path}: no such campaign file")
    try:
        raw = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise FltrError(f"{path}: not valid TOML: {exc}") from None
    return validate_spec(raw, source=str(path))


def validate_spec(raw: dict, source: str = "campaign") -> dict:
    """Check keys and types (errors name the key), merge over the defaults, check values."""
    if "name" not in raw:
        raise FltrError(f"{source}: missing key 'name'")
    _check_table(raw, "", source)
    spec: dict[str, Any] = {"name": raw["name"], "seeds": _as_list(raw.get("seeds", DEFAULTS["seeds"]))}
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
    from fltr_audit.clicks import CCM_TABLES

    known_models = sorted({name for name, _ in CCM_TABLES}) + ["pbm"]
    for data in _as_list(spec["data"]["spec"]):
        if not data.startswith("synthetic:") and not Path(data).exists():
            raise FltrError(f"{source}: key 'data.spec': no such path {data!r} (relative paths start at the current directory)")
    for name in _as_list(spec["algorithm"]["name"]):
        algorithm_spec(name, option=f"{source}: key 'algorithm.name'", auditable=True)
    for model in _as_list(spec["probe"]["click_models"]) + [spec["algorithm"]["train_click_model"]]:
        if model not in known_models:
            raise FltrError(f"{source}: unknown click model {model!r} in 'probe.click_models' or 'algorithm.train_click_model'")
    for key in ("rounds", "clients", "queries_per_client"):
        if any(v < 1 for v in _as_list(spec["algorithm"][key])):
            raise FltrError(f"{source}: key 'algorithm.{key}' must be at least 1")
    if spec["audit"]["trials"] < 4:
        raise FltrError(f"{source}: key 'audit.trials' must be at least 4")
    if any(v < 1 for v in _as_list(spec["probe"]["cohort"])):
        raise FltrError(f"{source}: key 'probe.cohort' must be at least 1")
    for split in _as_list(spec["probe"]["split"]):
        if split not in ("train", "vali", "test"):
            raise FltrError(f"{source}: key 'probe.split' has unknown split {split!r}")
    _check_each(spec["audit"]["defenses"], parse_defense, "audit.defenses", source)
    _check_each(spec["audit"]["attacks"], make_attack, "audit.attacks", source)


def _check_each(values: Any, build: Callable[[str], Any], key: str, source: str) -> None:
    """Build every named object once so that a bad name fails before any run, naming the key."""
    for value in _as_list(values):
        try:
            build(value)
        except FltrError as exc:
            raise FltrError(f"{source}: key '{key}': {exc}") from None


def _as_list(value: Any) -> list:
    return value if isinstance(value, list) else [value]


def _canonical_defense(text: str) -> str:
    return parse_defense(text).name


def expand(spec: dict) -> list[Run]:
    """Every grid point of a validated spec, in a stable order."""
    data, algo, probe, audit = spec["data"], spec["algorithm"], spec["probe"], spec["audit"]
    param_names = sorted(algo["params"])
    param_lists = [_as_list(algo["params"][p]) for p in param_names]
    axes = itertools.product(
        _as_list(data["spec"]),
        _as_list(data["folds"]),
        _as_list(algo["name"]),
        _as_list(algo["rounds"]),
        _as_list(algo["clients"]),
        _as_list(algo["queries_per_client"]),
        _as_list(algo["ranker"]),
        itertools.product(*param_lists),
        _as_list(probe["split"]),
        _as_list(probe["cohort"]),
        [_canonical_defense(d) for d in _as_list(audit["defenses"])],
        spec["seeds"],
    )
    runs = []
    for dspec, fold, name, rounds, clients, qpc, ranker, params, split, cohort, defense, seed in axes:
        config = {
            "campaign": spec["name"],
            "data": dspec,
            "fold": fold,
            "normalization": data["normalization"],
            "queries": data.get("queries"),
            "algo": name,
            "rounds": rounds,
            "clients": clients,
            "queries_per_client": qpc,
            "ranker": ranker,
            "train_click_model": algo["train_click_model"],
            "params": dict(zip(param_names, params)),
            "probe": {
                "split": split,
                "click_models": _as_list(probe["click_models"]),
                "cohort": cohort,
                "queries_per_client": probe["queries_per_client"],
                "min_shown": probe["min_shown"],
                "require_click": probe["require_click"],
            },
            "defense": defense,
            "attacks": _as_list(audit["attacks"]),
            "epsilon_audit": audit["epsilon_audit"],
            "audit_trials": audit["trials"],
            "seed": seed,
        }
        runs.append(Run(run_key(config), config))
    keys = [r.key for r in runs]
    if len(set(keys)) != len(keys):
        raise FltrError(f"campaign {spec['name']!r}: the grid repeats a configuration (duplicate list entries)")
    return runs


def environment() -> dict:
    """Package versions and interpreter of this process, stored with every run."""
    import platform

    import numpy
    import pandas
    import scipy
    import sklearn
    import statsmodels

    from fltr_audit import __version__

    return {
        "fltr_audit": __version__,
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "scipy": scipy.__version__,
        "scikit-learn": sklearn.__version__,
        "statsmodels": statsmodels.__version__,
        "pandas": pandas.__version__,
        "machine": platform.machine(),
        "cores": os.cpu_count(),
    }


def execute_run(config: dict) -> dict:
    """Compute one run in this process: its tables, timing and environment (picklable)."""
    from fltr_audit.audit_run import run_audit

    start = time.perf_counter()
    tables = run_audit(config)
    return {"tables": tables, "seconds": time.perf_counter() - start, "env": environment()}


def run_campaign(
    spec: dict,
    store: Any,
    *,
    workers: int | None = None,
    scheduler: str | None = None,
    on_done: Callable[[Run, str | None], None] | None = None,
    run_fn: Callable[[dict], dict] = execute_run,
) -> dict[str, int]:
    """Run every pending grid point of ``spec`` and record each in ``store`` as it finishes.

    Runs already completed in the store are skipped. Runs go to a local process pool of
    ``workers`` processes (default: the number of cores; 1 runs in this process) or, with
    ``scheduler``, to a Dask cluster at that address. A run that fails is recorded as failed
    with its error and the others go on. Each finished run is written in one transaction by
    this process alone, so an interrupted campaign leaves only whole runs behind.

    Returns counts: ``{"done": ..., "failed": ..., "skipped": ...}``.
    """
    runs = expand(spec)
    done_keys = store.completed_keys()
    pending = [r for r in runs if r.key not in done_keys]
    store.register_pending([(r.key, r.config) for r in pending], campaign=spec["name"])
    counts = {"done": 0, "failed": 0, "skipped": len(runs) - len(pending)}

    def finish(run: Run, result: dict | None, error: str | None) -> None:
        if error is None:
            store.record_run(run.key, spec["name"], run.config, result["env"], run.config["seed"],
                             result["seconds"], result["tables"])
            counts["done"] += 1
        else:
            store.record_failure(run.key, spec["name"], run.config, error)
            counts["failed"] += 1
        if on_done is not None:
            on_done(run, error)

    for run, result, error in _execute(pending, run_fn, workers, scheduler):
        finish(run, result, error)
    return counts


def _execute(runs: list[Run], run_fn: Callable[[dict], dict], workers: int | None,
             scheduler: str | None) -> Iterable[tuple[Run, dict | None, str | None]]:
    if not runs:
        return
    if scheduler is not None:
        yield from _execute_dask(runs, run_fn, scheduler)
        return
    workers = workers or os.cpu_count() or 1
    if workers < 1:
        raise FltrError("--workers must be at least 1")
    if workers == 1:
        for run in runs:
            try:
                yield run, run_fn(run.config), None
            except Exception as exc:  # a failed run is recorded; the others go on
                yield run, None, _describe(exc)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    with ProcessPoolExecutor(max_workers=min(workers, len(runs)),
                             mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {pool.submit(run_fn, run.config): run for run in runs}
        for future in as_completed(futures):
            run = futures[future]
            try:
                yield run, future.result(), None
            except Exception as exc:
                from concurrent.futures.process import BrokenProcessPool

                if isinstance(exc, BrokenProcessPool):
                    raise FltrError("a worker process died; finished runs are stored, re-run the campaign to complete it") from None
                yield run, None, _describe(exc)


def _execute_dask(runs: list[Run], run_fn: Callable[[dict], dict], scheduler: str
                  ) -> Iterable[tuple[Run, dict | None, str | None]]:
    try:
        from distributed import Client, as_completed
    except ImportError:
        raise FltrError("--scheduler needs dask.distributed: pip install 'fltr-audit[dask]'") from None
    try:
        client = Client(scheduler, timeout="10s")
    except (OSError, TimeoutError, ValueError) as exc:
        raise FltrError(f"--scheduler: cannot reach {scheduler}: {exc}") from None
    try:
        futures = {client.submit(run_fn, run.config, key=f"run-{run.key}", pure=False): run for run in runs}
        for future in as_completed(futures):
            run = futures[future]
            try:
                yield run, future.result(), None
            except Exception as exc:
                yield run, None, _describe(exc)
    finally:
        client.close()


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"
