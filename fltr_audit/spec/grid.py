"""The campaign grid: a validated spec expanded into runs, each keyed by the SHA-256 of its
resolved configuration (canonical JSON).

Part of the composition root: defense names are canonicalized by ``defenses.stack``.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from defenses.stack import parse_defense
from fltr_audit.spec.campaign import as_list
from fltr_audit.errors import FltrError
from fltr_audit.spec.run import AlgorithmSettings, AuditSettings, DataSettings, ProbeSettings, RunSpec, run_key

__all__ = ["MAX_RUNS", "Run", "expand", "grid_size", "run_key"]
from fltr_audit.engine.population import parse_non_iid
from fltr_audit.spec.poison import parse_poison


@dataclass(frozen=True)
class Run:
    """One grid point: its key and typed spec; ``config`` is the spec's canonical JSON."""

    key: str
    spec: RunSpec

    @property
    def config(self) -> dict:
        return self.spec.to_json()


MAX_RUNS = 1000
"""Default cap on a campaign's grid size (``campaign run --max-runs`` raises it)."""


def grid_size(spec: dict) -> int:
    """The number of runs of a validated spec, computed without expanding the grid."""
    data, algo, probe, audit = spec["data"], spec["algorithm"], spec["probe"], spec["audit"]
    axes = [data["spec"], data["folds"], algo["name"], algo["rounds"], algo["clients"], algo["queries_per_client"],
            algo["ranker"], probe["split"], probe["cohort"], audit["defenses"], spec["seeds"],
            as_list(algo.get("non_iid", "iid")), as_list(algo.get("poison", "none")), *algo["params"].values()]
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
        as_list(audit["defenses"]),
        spec["seeds"],
        as_list(probe.get("threat_model", "server")),
        [parse_non_iid(s).name for s in as_list(algo.get("non_iid", "iid"))],
        [parse_poison(p) for p in as_list(algo.get("poison", "none"))],  # absent: no poisoning, keys unchanged
    )
    whole_run = spec.get("audit_run", {})  # absent by default: run keys of older campaigns unchanged
    stacks = {d: parse_defense(d) for d in as_list(audit["defenses"])}  # each defense string parsed once
    runs = []
    for dspec, fold, name, rounds, clients, qpc, ranker, params, split, cohort, defense, seed, threat, non_iid, poison \
            in axes:
        population = algo.get("population")  # absent by default: run keys of older campaigns unchanged
        if population is not None and population < clients:
            raise FltrError(f"campaign {spec['name']!r}: key 'algorithm.population' ({population}) must be "
                            f"at least the cohort of {clients} clients drawn from it each round")
        run = RunSpec(
            campaign=spec["name"],
            data=DataSettings(spec=dspec, fold=fold, normalization=data["normalization"], queries=data.get("queries")),
            algorithm=AlgorithmSettings(name=name, rounds=rounds, clients=clients, queries_per_client=qpc,
                                        ranker=ranker, train_click_model=algo["train_click_model"],
                                        params=tuple(zip(param_names, params)), population=population,
                                        non_iid=non_iid, poison=poison),
            probe=ProbeSettings(split=split, click_models=tuple(as_list(probe["click_models"])), cohort=cohort,
                                queries_per_client=probe["queries_per_client"], min_shown=probe["min_shown"],
                                require_click=probe["require_click"], counterfactual=probe["counterfactual"],
                                threat_model=threat, manipulation=probe.get("manipulation", "isolate"),
                                lists=probe.get("lists"), rounds=probe.get("rounds")),
            defense=stacks[defense],
            attacks=tuple(as_list(audit["attacks"])),
            audit=AuditSettings(epsilon_audit=audit["epsilon_audit"], trials=audit["trials"],
                                run_canaries=whole_run.get("canaries"), run_runs=whole_run.get("runs", 1)),
            seed=seed,
        )
        runs.append(Run(run.key(), run))
    keys = [r.key for r in runs]
    if len(set(keys)) != len(keys):
        raise FltrError(f"campaign {spec['name']!r}: the grid repeats a configuration (duplicate list entries)")
    return runs
