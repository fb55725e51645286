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
    threat_model = "server"              # server | server-blind | server-malicious (a grid axis)
    manipulation = "isolate"             # server-malicious: isolate | inconsistent

    [audit]
    defenses = ["none", "clip(delta=5)+dp-distributed(eps=4.5)", "secagg"]
    attacks = ["olsr", "score", "prob", "distance", "random3", "random4"]
    epsilon_audit = true
    trials = 10000                       # per input of the empirical epsilon audit

Grid axes: ``seeds``, ``data.spec``, ``data.folds``, every list of ``[algorithm]``
(including inside ``params``), ``probe.split``, ``probe.cohort``, ``probe.threat_model`` and
``audit.defenses``.
The click models and attacks of a run are evaluated inside it, on the same trained model
and the same probe, so they are lists but not axes. Each grid point is one run whose key is
the SHA-256 of its resolved configuration (canonical JSON), so the key is stable across
processes and machines and changes with any setting.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, NoReturn

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
    for fold in _as_list(spec["data"]["folds"]):
        if not 1 <= fold <= 5:
            fail("data.folds", f"holds {fold}, folds are 1..5")
    if spec["data"]["normalization"] not in NORMALIZATIONS + ("auto",):
        fail("data.normalization", f"is {spec['data']['normalization']!r} (choose {', '.join(NORMALIZATIONS)})")
    queries = spec["data"].get("queries")
    if queries is not None and queries < 1:
        fail("data.queries", f"must be at least 1, got {queries}")
    for data in _as_list(spec["data"]["spec"]):
        _check_data_spec(data, queries, source)
    for ranker in _as_list(spec["algorithm"]["ranker"]):
        if ranker not in RANKERS:
            fail("algorithm.ranker", f"has unknown ranker {ranker!r} (choose {', '.join(RANKERS)})")
    for key, option in (("rounds", "--rounds"), ("clients", "--clients"),
                        ("queries_per_client", "--queries-per-client")):
        largest = max(_as_list(spec["algorithm"][key]))
        if largest > BUDGET_LIMITS[option]:
            fail(f"algorithm.{key}", f"must be at most {BUDGET_LIMITS[option]:,}, got {largest:,}")
    _check_params(spec["algorithm"], source)
    models = _as_list(spec["probe"]["click_models"]) + [spec["algorithm"]["train_click_model"]]
    for name in _as_list(spec["algorithm"]["name"]):
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
    if spec["probe"]["counterfactual"] < 1:
        raise FltrError(f"{source}: key 'probe.counterfactual' must be at least 1 (counterfactual click draws per list)")
    for split in _as_list(spec["probe"]["split"]):
        if split not in ("train", "vali", "test"):
            raise FltrError(f"{source}: key 'probe.split' has unknown split {split!r}")
    _check_each(spec["audit"]["defenses"], parse_defense, "audit.defenses", source)
    _check_each(spec["audit"]["attacks"], make_attack, "audit.attacks", source)
    _check_threat_models(spec, source)


def _check_threat_models(spec: dict, source: str) -> None:
    """Known threat models; server-malicious only with an algorithm and manipulation it supports."""
    from fltr_audit.malicious import MANIPULATIONS, SUPPORTED
    from fltr_audit.messages import THREAT_MODELS

    models = _as_list(spec["probe"]["threat_model"])
    for model in models:
        if model not in THREAT_MODELS:
            raise FltrError(f"{source}: key 'probe.threat_model' (--threat-model) has unknown threat model {model!r} "
                            f"(choose from {', '.join(THREAT_MODELS)})")
    if "server-malicious" in models:
        for name in _as_list(spec["algorithm"]["name"]):
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
        for item in _as_list(value):
            if isinstance(item, (dict, list)) or not isinstance(item, (int, float, str, bool)):
                raise FltrError(f"{source}: key '{where}' holds {item!r}; a parameter is a number, a string, "
                                "a boolean or a list of them (a grid axis)")
        if isinstance(value, list) and not value:
            raise FltrError(f"{source}: key '{where}' is an empty list, so the grid is empty")
        for name in _as_list(algo["name"]):
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
    for value in _as_list(values):
        try:
            build(value)
        except FltrError as exc:
            raise FltrError(f"{source}: key '{key}': {exc}") from None


def _as_list(value: Any) -> list:
    return value if isinstance(value, list) else [value]


def _canonical_defense(text: str) -> str:
    return parse_defense(text).name


MAX_RUNS = 1000
"""Default cap on a campaign's grid size (``campaign run --max-runs`` raises it)."""


def grid_size(spec: dict) -> int:
    """The number of runs of a validated spec, computed without expanding the grid."""
    data, algo, probe, audit = spec["data"], spec["algorithm"], spec["probe"], spec["audit"]
    axes = [data["spec"], data["folds"], algo["name"], algo["rounds"], algo["clients"], algo["queries_per_client"],
            algo["ranker"], probe["split"], probe["cohort"], audit["defenses"], spec["seeds"],
            *algo["params"].values()]
    return math.prod(len(_as_list(a)) for a in axes)


def expand(spec: dict, max_runs: int | None = MAX_RUNS) -> list[Run]:
    """Every grid point of a validated spec, in a stable order; FltrError when the grid holds
    more than ``max_runs`` runs (None: no cap)."""
    size = grid_size(spec)
    if max_runs is not None and size > max_runs:
        raise FltrError(f"campaign {spec['name']!r}: the grid has {size:,} runs, more than the cap of {max_runs:,} "
                        "(--max-runs raises it)")
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
        _as_list(probe.get("threat_model", "server")),
    )
    runs = []
    for dspec, fold, name, rounds, clients, qpc, ranker, params, split, cohort, defense, seed, threat in axes:
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
                "counterfactual": probe["counterfactual"],
            },
            "defense": defense,
            "attacks": _as_list(audit["attacks"]),
            "epsilon_audit": audit["epsilon_audit"],
            "audit_trials": audit["trials"],
            "seed": seed,
        }
        if algo.get("population") is not None:  # absent by default: run keys of older campaigns unchanged
            if algo["population"] < clients:
                raise FltrError(f"campaign {spec['name']!r}: key 'algorithm.population' ({algo['population']}) must be "
                                f"at least the cohort of {clients} clients drawn from it each round")
            config["population"] = algo["population"]
        if threat != "server":  # the honest server's runs keep the keys they had before threat models
            config["threat_model"] = threat
            if threat == "server-malicious":
                config["manipulation"] = probe.get("manipulation", "isolate")
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
    """Compute one run in this process: its tables, timing and environment (picklable).

    The run computes with single-threaded BLAS: a multi-threaded BLAS sums in an order that
    depends on its thread count (which Dask pins to 1 and a process pool does not), so the
    same seed would give different last bits, and attacks that threshold or rank (OLSR on a
    secure aggregate) different rows."""
    from threadpoolctl import threadpool_limits

    from fltr_audit.audit_run import run_audit

    start = time.perf_counter()
    with threadpool_limits(limits=1, user_api="blas"):
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
    max_runs: int | None = MAX_RUNS,
) -> dict[str, int]:
    """Run every pending grid point of ``spec`` and record each in ``store`` as it finishes.

    Runs already completed in the store are skipped. Runs go to a local process pool of
    ``workers`` processes (default: the number of cores; 1 runs in this process) or, with
    ``scheduler``, to a Dask cluster at that address. A run that fails is recorded as failed
    with its error and the others go on. Each finished run is written in one transaction by
    this process alone, so an interrupted campaign leaves only whole runs behind.

    Pending runs are claimed in the store first (:meth:`ResultsStore.claim`); runs another
    live campaign process has claimed are left to it (``running_elsewhere``), so two
    campaigns on one store share the grid instead of both computing all of it. This process
    renews its claims while it works and releases the ones it did not finish.

    Returns counts: ``{"done": ..., "failed": ..., "skipped": ..., "running_elsewhere": ...}``.
    """
    runs = expand(spec, max_runs)
    done_keys = store.completed_keys()
    pending = [r for r in runs if r.key not in done_keys]
    store.register_pending([(r.key, r.config) for r in pending], campaign=spec["name"])
    mine = set(store.claim([r.key for r in pending]))
    counts = {"done": 0, "failed": 0, "skipped": len(runs) - len(pending),
              "running_elsewhere": sum(r.key not in mine for r in pending)}
    pending = [r for r in pending if r.key in mine]

    def finish(run: Run, result: dict | None, error: str | None) -> None:
        if error is None:
            store.record_run(run.key, spec["name"], run.config, result["env"], run.config["seed"],
                             result["seconds"], result["tables"])
            counts["done"] += 1
        else:
            store.record_failure(run.key, spec["name"], run.config, error)
            counts["failed"] += 1
        mine.discard(run.key)
        if on_done is not None:
            on_done(run, error)

    with _renewing(store, mine):
        for run, result, error in _execute(pending, run_fn, workers, scheduler):
            finish(run, result, error)
    return counts


@contextmanager
def _renewing(store: Any, held: set[str]) -> Iterator[None]:
    """Renew the claims in ``held`` (a set the caller shrinks as runs finish) every third of
    the lease while the block runs; release what is still held when it ends."""
    from fltr_audit.store import CLAIM_LEASE_SECONDS

    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(CLAIM_LEASE_SECONDS / 3):
            try:
                store.renew_claims(list(held))
            except Exception:  # a busy store: the next beat tries again
                pass

    thread = threading.Thread(target=beat, name="fltr-audit claim lease", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        if held:
            store.release_claims(list(held))


def _exit_with_parent(parent: int) -> None:
    """Initializer of a pool worker: a daemon thread ends the worker as soon as its parent
    (the campaign process) is gone, even after SIGKILL, so no worker outlives the campaign
    (and the multiprocessing resource tracker, which waits for them, exits too)."""
    def watch() -> None:
        while True:
            if os.getppid() != parent:
                os._exit(1)
            time.sleep(0.5)

    threading.Thread(target=watch, name="fltr-audit parent watchdog", daemon=True).start()


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

    with ProcessPoolExecutor(max_workers=min(workers, len(runs)), mp_context=multiprocessing.get_context("spawn"),
                             initializer=_exit_with_parent, initargs=(os.getpid(),)) as pool:
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


def check_scheduler(address: str) -> None:
    """FltrError naming ``--scheduler`` unless a Dask scheduler answers at ``address``."""
    _connect_dask(address).close()


def _connect_dask(address: str) -> Any:
    try:
        from distributed import Client
    except ImportError:
        raise FltrError("--scheduler needs dask.distributed: pip install 'fltr-audit[dask]'") from None
    try:
        return Client(address, timeout="10s")
    except (OSError, TimeoutError, ValueError, TypeError) as exc:
        raise FltrError(f"--scheduler: cannot reach {address}: {' '.join(str(exc).split()) or type(exc).__name__}") from None


def _execute_dask(runs: list[Run], run_fn: Callable[[dict], dict], scheduler: str
                  ) -> Iterable[tuple[Run, dict | None, str | None]]:
    client = _connect_dask(scheduler)
    from distributed import as_completed

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
