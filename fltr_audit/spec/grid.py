"""The campaign grid: a validated ``CampaignSpec`` expanded into runs, each keyed by the SHA-256 of
its resolved configuration (canonical JSON, ``spec.run.run_key``)."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from fltr_audit.engine.population import parse_non_iid
from fltr_audit.errors import FltrError
from fltr_audit.spec.campaign import CampaignSpec
from fltr_audit.spec.run import AlgorithmSettings, AuditSettings, DataSettings, ProbeSettings, RunSpec, run_key

__all__ = ["MAX_RUNS", "Run", "expand", "grid_size", "run_key"]


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


def _axes(spec: CampaignSpec) -> list[tuple]:
    """The grid's axes, in the order of the run configs' expansion."""
    data, algo, probe = spec.data, spec.algorithm, spec.probe
    return [data.specs, data.folds, algo.names, algo.rounds, algo.clients, algo.queries_per_client, algo.rankers,
            tuple(itertools.product(*(values for _, values in algo.params))), probe.splits, probe.cohorts,
            spec.audit.defenses, spec.seeds, probe.threat_models,
            tuple(parse_non_iid(s).name for s in algo.non_iid), algo.poison]  # poison last: (None,) keeps old keys


def grid_size(spec: CampaignSpec) -> int:
    """The number of runs of a validated spec, computed without expanding the grid."""
    return math.prod(len(axis) for axis in _axes(spec))


def expand(spec: CampaignSpec, max_runs: int | None = MAX_RUNS) -> list[Run]:
    """Every grid point of a validated spec, in a stable order; FltrError when the grid holds
    more than ``max_runs`` runs (None: no cap)."""
    size = grid_size(spec)
    if max_runs is not None and size > max_runs:
        raise FltrError(f"campaign {spec.name!r}: the grid has {size:,} runs, more than the cap of {max_runs:,} "
                        "(--max-runs raises it)")
    data, algo, probe, audit, whole = spec.data, spec.algorithm, spec.probe, spec.audit, spec.audit_run
    param_names = [name for name, _ in algo.params]
    runs = []
    for (dspec, fold, name, rounds, clients, qpc, ranker, params, split, cohort, defense, seed, threat,
         non_iid, poison) in itertools.product(*_axes(spec)):
        if algo.population is not None and algo.population < clients:
            raise FltrError(f"campaign {spec.name!r}: key 'algorithm.population' ({algo.population}) must be "
                            f"at least the cohort of {clients} clients drawn from it each round")
        run = RunSpec(
            campaign=spec.name,
            data=DataSettings(spec=dspec, fold=fold, normalization=data.normalization, queries=data.queries),
            algorithm=AlgorithmSettings(name=name, rounds=rounds, clients=clients, queries_per_client=qpc,
                                        ranker=ranker, train_click_model=algo.train_click_model,
                                        params=tuple(zip(param_names, params)), population=algo.population,
                                        non_iid=non_iid, poison=poison),
            probe=ProbeSettings(split=split, click_models=probe.click_models, cohort=cohort,
                                queries_per_client=probe.queries_per_client, min_shown=probe.min_shown,
                                require_click=probe.require_click, counterfactual=probe.counterfactual,
                                threat_model=threat, manipulation=probe.manipulation,
                                lists=probe.lists, rounds=probe.rounds),
            defense=defense,
            attacks=audit.attacks,
            audit=AuditSettings(epsilon_audit=audit.epsilon_audit, trials=audit.trials,
                                run_canaries=whole.canaries, run_runs=whole.runs),
            seed=seed,
        )
        runs.append(Run(run.key(), run))
    keys = [r.key for r in runs]
    if len(set(keys)) != len(keys):
        raise FltrError(f"campaign {spec.name!r}: the grid repeats a configuration (duplicate list entries)")
    return runs
