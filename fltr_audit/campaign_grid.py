"""The campaign grid: a validated spec expanded into runs, each keyed by the SHA-256 of its
resolved configuration (canonical JSON).

Part of the composition root: defense names are canonicalized by ``defenses.stack``.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from dataclasses import dataclass

from defenses.stack import parse_defense
from fltr_audit.campaign_spec import as_list
from fltr_audit.defense_spelling import legacy_spelling
from fltr_audit.errors import FltrError


@dataclass(frozen=True)
class Run:
    """One grid point: its key and resolved configuration (JSON-able)."""

    key: str
    config: dict


def run_key(config: dict) -> str:
    """SHA-256 of the canonical JSON of ``config`` without its campaign name (16 hex digits).

    Key compatibility rule: the defense name is hashed in its legacy spelling
    (``clip(sensitivity=5)`` as ``clip(delta=5)``, :mod:`fltr_audit.defense_spelling`), so runs
    keep the keys they had before the parameter was renamed and existing stores resume.
    """
    body = {k: v for k, v in config.items() if k != "campaign"}
    if isinstance(body.get("defense"), str):
        body["defense"] = legacy_spelling(body["defense"])
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


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
    return math.prod(len(as_list(a)) for a in axes)


def expand(spec: dict, max_runs: int | None = MAX_RUNS) -> list[Run]:
    """Every grid point of a validated spec, in a stable order; FltrError when the grid holds
    more than ``max_runs`` runs (None: no cap)."""
    size = grid_size(spec)
    if max_runs is not None and size > max_runs:
        raise FltrError(f"campaign {spec['name']!r}: the grid has {size:,} runs, more than the cap of {max_runs:,} "
                        "(--max-runs raises it)")
    data, algo, probe, audit = spec["data"], spec["algorithm"], spec["probe"], spec["audit"]
    param_names = sorted(algo["params"])
    param_lists = [as_list(algo["params"][p]) for p in param_names]
    axes = itertools.product(
        as_list(data["spec"]),
        as_list(data["folds"]),
        as_list(algo["name"]),
        as_list(algo["rounds"]),
        as_list(algo["clients"]),
        as_list(algo["queries_per_client"]),
        as_list(algo["ranker"]),
        itertools.product(*param_lists),
        as_list(probe["split"]),
        as_list(probe["cohort"]),
        [_canonical_defense(d) for d in as_list(audit["defenses"])],
        spec["seeds"],
        as_list(probe.get("threat_model", "server")),
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
                "click_models": as_list(probe["click_models"]),
                "cohort": cohort,
                "queries_per_client": probe["queries_per_client"],
                "min_shown": probe["min_shown"],
                "require_click": probe["require_click"],
                "counterfactual": probe["counterfactual"],
            },
            "defense": defense,
            "attacks": as_list(audit["attacks"]),
            "epsilon_audit": audit["epsilon_audit"],
            "audit_trials": audit["trials"],
            "seed": seed,
        }
        for key in ("lists", "rounds"):  # absent by default: run keys of older campaigns unchanged
            if probe.get(key) is not None:
                config["probe"][key] = probe[key]
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
