"""The typed run spec: one audit run's full configuration as frozen dataclasses.

A ``RunSpec`` is built once at the door -- by ``campaign_grid.expand`` from a validated
campaign (the ``audit`` command and ``fltr_audit.audit`` build campaigns too), or by
``RunSpec.from_json`` from a run config (a stored run, a test) -- and carried to the engine
(``audit_pipeline.run_audit``, the executors) as an object. Its parts::

    RunSpec(campaign, seed,
            data=DataSettings(spec, fold, normalization, queries),
            algorithm=AlgorithmSettings(name, rounds, clients, queries_per_client, ranker,
                                        train_click_model, params, population),
            probe=ProbeSettings(split, click_models, cohort, queries_per_client, min_shown,
                                require_click, counterfactual, threat_model, manipulation),
            defense=DefenseSpec(name),      # a value: each run builds a fresh stack from it
            attacks=("olsr", ...),
            audit=AuditSettings(epsilon_audit, trials, run_canaries, run_runs))

``to_json()`` is the canonical run config, the same dict the runs always had (flat keys, the
probe's under ``"probe"``); ``key()`` hashes it without the campaign name
(``run_key``), so the run keys of existing stores and campaigns are unchanged
(``tests/test_campaign_run_keys.py``). The spec is hashable and its hash is the run key. A spec
pickles for process-pool and Dask workers as its JSON (plug-ins load there by entry point).

Random streams: training and the probe draw from streams of the run's ``seed`` (and fold), so that
the runs of one seed share their clicks (common random numbers: defenses and settings are compared
on the same users); every audit draws from the stream of its ``audit_key`` -- the run's settings (its data named by
content, ``content_key``: the same data in another folder gives the same audit) and the audit's
kind -- so that two runs differing in any setting get independent audits, and a report
pooling runs counts each audit once (``audit_key`` is a column of the ``audits`` rows).

Adding a setting
----------------
One line in its section, with a default, declared ``optional``::

    neighbours: str = optional("natural")               # in AuditSettings

An ``optional`` setting is left out of ``to_json()`` while it equals its default, so every
run that does not set it keeps its key; set to anything else it is written (and hashed) under
its field name at the top level of the run config (``optional("natural", key="audit_x")``
renames it; ``nested=True`` writes a probe setting inside ``"probe"``). Then let the campaign
reader and the CLI fill it (``campaign_spec`` schema and defaults, ``campaign_grid.expand``).
A setting declared with ``setting(...)`` instead is always written: that changes every key.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Mapping

from fltr_audit.constraints import SEED, Constraint, InstanceOf, Interval, Options, ParameterError, check
from fltr_audit.engine.data.identity import data_identity
from fltr_audit.engine.footprint import check_counterfactual_memory, check_population_memory
from fltr_audit.engine.population import parse_non_iid
from fltr_audit.spec.defense import DefenseSpec
from fltr_audit.spec.poison import PoisonSpec, parse_poison
from fltr_audit.store.defense_spelling import legacy_spelling
from fltr_audit.errors import FltrError

_MISSING = dataclasses.MISSING


def setting(default: Any = _MISSING, *, key: str | None = None, nested: bool | None = None,
            constraints: tuple[Constraint, ...] = ()) -> Any:
    """A setting always written to the run config, under ``key`` (default: the field name),
    valid when it satisfies any of ``constraints`` (``fltr_audit.constraints``; none: anything).

    ``nested`` overrides the section's place (``ProbeSettings`` writes inside ``"probe"``)."""
    return field(default=default, metadata={"key": key, "nested": nested, "optional": False,
                                            "constraints": constraints})


def optional(default: Any, *, key: str | None = None, nested: bool = False,
             constraints: tuple[Constraint, ...] = ()) -> Any:
    """A setting written to the run config only when it differs from ``default`` (so adding it
    leaves existing run keys unchanged); at the top level unless ``nested``."""
    return field(default=default, metadata={"key": key, "nested": nested, "optional": True,
                                            "constraints": constraints})


class _Section:
    """A part of the run spec, called ``NAME``; ``NESTED`` names the run-config table its
    settings sit in (None: the top level). Every setting is checked against its constraints
    when the section is built: ParameterError names it as ``NAME.field``."""

    NAME = ""
    NESTED: str | None = None

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            check(f"{self.NAME}.{f.name}", getattr(self, f.name), f.metadata.get("constraints", ()))

    def _items(self) -> list[tuple[str, bool, Any]]:
        """(JSON key, nested?, JSON value) of every setting to write."""
        out = []
        for f in dataclasses.fields(self):
            meta = f.metadata
            value = getattr(self, f.name)
            if meta.get("optional") and value == f.default:
                continue
            nested = meta.get("nested")
            out.append((meta.get("key") or f.name, self.NESTED is not None if nested is None else nested,
                        _json_value(value)))
        return out

    @classmethod
    def _from(cls, config: Mapping[str, Any], nested: Mapping[str, Any], used: set[str], used_nested: set[str]
              ) -> Any:
        values = {}
        for f in dataclasses.fields(cls):
            meta = f.metadata
            key = meta.get("key") or f.name
            inside = cls.NESTED is not None if meta.get("nested") is None else meta.get("nested")
            source, seen = (nested, used_nested) if inside else (config, used)
            if key in source:
                values[f.name] = source[key]
                seen.add(key)
            elif f.default is _MISSING and f.default_factory is _MISSING:
                where = f"{cls.NESTED}.{key}" if inside else key
                raise FltrError(f"run config: missing key {where!r}")
        return cls(**values)


def _json_value(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


# The engine's own tuples (pinned equal by tests/test_run_spec.py), written here so that reading
# a spec imports no numpy or pandas.
NORMALIZATIONS = ("none", "query-minmax", "zscore", "auto")
RANKERS = ("linear", "mlp")
SPLITS = ("train", "vali", "test")
THREAT_MODELS = ("server", "server-blind", "server-malicious")
MANIPULATIONS = ("isolate", "inconsistent")
UNLEARNING_METHODS = ("retrain", "federaser", "finetune", "pga", "none")
UNLEARNING_CANARIES = 40
"""Canaries of an unlearning audit by default: orthonormal directions in a model of at least 40
parameters (MQ2008's linear ranker has 46)."""
BUDGET = {"clients": 1_000_000, "queries_per_client": 10_000, "rounds": 1_000_000}
_POSITIVE = (Interval(int, 1, None),)
MAX_CANARIES = 100_000
"""At most this many canaries in a whole-run audit (``AuditSettings.run_canaries``)."""
MAX_CANARY_RUNS = 1000
"""At most this many independent canary runs (``AuditSettings.run_runs``)."""


def _frozen_params(params: Mapping[str, Any] | tuple | None) -> tuple[tuple[str, Any], ...]:
    if params is None:
        return ()
    items = params.items() if isinstance(params, Mapping) else params
    return tuple(sorted((str(k), v) for k, v in items))


@dataclass(frozen=True)
class DataSettings(_Section):
    """The data set (path or ``synthetic:PROFILE``), its fold, feature normalization and query cap."""

    NAME = "data"

    spec: str = setting(key="data", constraints=(InstanceOf(str),))
    fold: int = setting(constraints=(Interval(int, 1, 5),))
    normalization: str = setting("none", constraints=(Options(NORMALIZATIONS),))
    queries: int | None = setting(None, constraints=(*_POSITIVE, None))


@dataclass(frozen=True)
class AlgorithmSettings(_Section):
    """The federated algorithm a run trains and probes, with its training budget; ``params`` are
    the algorithm's own keywords as sorted (name, value) pairs (``kwargs()`` as a dict)."""

    NAME = "algorithm"

    name: str = setting(key="algo", constraints=(InstanceOf(str),))
    rounds: int = setting(constraints=(Interval(int, 1, BUDGET["rounds"]),))
    clients: int = setting(constraints=(Interval(int, 1, BUDGET["clients"]),))
    queries_per_client: int = setting(constraints=(Interval(int, 1, BUDGET["queries_per_client"]),))
    ranker: str = setting("linear", constraints=(Options(RANKERS),))
    train_click_model: str = setting("perfect", constraints=(InstanceOf(str),))
    params: tuple[tuple[str, Any], ...] = setting(())
    population: int | None = optional(None, constraints=(*_POSITIVE, None))
    non_iid: str = optional("iid", constraints=(InstanceOf(str),))
    poison: PoisonSpec | None = optional(None)
    """Malicious clients of every training cohort (``fltr_audit.spec.poison``; None: none), written as
    their canonical text."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", _frozen_params(self.params))
        if self.poison is None or isinstance(self.poison, str):
            object.__setattr__(self, "poison", parse_poison(self.poison))
        super().__post_init__()
        if self.population is not None and self.population < self.clients:
            raise ParameterError("algorithm.population", f"must be at least the cohort of {self.clients} clients "
                                 f"drawn from it each round, got {self.population}")
        check_population(self.population, self.non_iid)

    def kwargs(self) -> dict[str, Any]:
        """The algorithm's own parameters as keywords."""
        return dict(self.params)

    def _items(self) -> list[tuple[str, bool, Any]]:
        return [(k, n, dict(self.params) if k == "params" else self.poison.text if k == "poison" else v)
                for k, n, v in super()._items()]


@dataclass(frozen=True)
class ProbeSettings(_Section):
    """The probe: the split and click models probed, the cohort, the scoring filter, the
    counterfactual draws per list, and the server's threat model (``manipulation`` only for
    ``server-malicious``, where it defaults to ``isolate``)."""

    NAME = NESTED = "probe"

    split: str = setting("vali", constraints=(Options(SPLITS),))
    click_models: tuple[str, ...] = setting(("perfect", "navigational", "informational"))
    cohort: int = setting(100, constraints=_POSITIVE)
    queries_per_client: int = setting(1, constraints=_POSITIVE)
    min_shown: int = setting(10, constraints=(Interval(int, 0, None),))
    require_click: bool = setting(True, constraints=(InstanceOf(bool),))
    counterfactual: int = setting(20, constraints=_POSITIVE)
    threat_model: str = optional("server", constraints=(Options(THREAT_MODELS),))
    manipulation: str | None = optional(None, constraints=(Options(MANIPULATIONS), None))
    lists: int | None = optional(None, nested=True, constraints=(*_POSITIVE, None))
    """Lists to score per click model: probe rounds (passes over the split) until then (None: one pass)."""
    rounds: int | None = optional(None, nested=True, constraints=(*_POSITIVE, None))
    """Probe rounds at most (None: 1, or ``fltr_audit.engine.probe.MAX_PROBE_ROUNDS`` with ``lists``)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "click_models", tuple(self.click_models))
        malicious = self.threat_model == "server-malicious"
        object.__setattr__(self, "manipulation", (self.manipulation or "isolate") if malicious else None)
        super().__post_init__()
        # at least min_shown slots per scored list: a floor on what the counterfactual draws hold
        check_counterfactual_memory(self.counterfactual, (self.lists or 1) * max(self.min_shown, 1))


@dataclass(frozen=True)
class AuditSettings(_Section):
    """Whether the defense's claim is audited empirically, and the trials per input of each audit
    (a number, or ``"auto"``: sized to the defense's claim, ``attacks.epsilon_bounds.auto_trials``)."""

    NAME = "audit"

    epsilon_audit: bool = setting(True, constraints=(InstanceOf(bool),))
    trials: int | str = setting(10000, key="audit_trials", constraints=(Interval(int, 4, None), Options(("auto",))))
    run_canaries: int | None = optional(None, key="audit_run_canaries",
                                        constraints=(Interval(int, 1, MAX_CANARIES), None))
    """Canaries of the whole-run audit (``fltr-audit audit-run``; None: no ``run_audits`` row)."""
    run_runs: int = optional(1, key="audit_run_runs", constraints=(Interval(int, 1, MAX_CANARY_RUNS),))
    """Independent canary runs of the whole-run audit (its multi-run bound from 2 on)."""
    unlearning: str | None = optional(None, constraints=(Options(UNLEARNING_METHODS), None))
    """The unlearning method audited with canaries (``fltr-audit audit-unlearning``; None: no
    ``unlearning_audits`` row)."""
    unlearning_forget: int = optional(0, constraints=(Interval(int, 0, None),))
    """Population users forgotten besides the included canaries."""
    unlearning_canaries: int = optional(UNLEARNING_CANARIES, constraints=(Interval(int, 0, None),))
    """Canaries of the unlearning audit, each included with probability 1/2."""
    unlearning_poison_check: bool = optional(False, constraints=(InstanceOf(bool),))
    """The ECIR 2024 poisoning check beside the unlearning audit."""


SECTIONS = ("data", "algorithm", "probe", "audit")


@dataclass(frozen=True, eq=False)
class RunSpec:
    """One run (see the module docstring); equal specs have equal ``to_json()``."""

    data: DataSettings
    algorithm: AlgorithmSettings
    probe: ProbeSettings
    defense: DefenseSpec
    attacks: tuple[str, ...]
    audit: AuditSettings
    seed: int
    campaign: str | None = None

    def __post_init__(self) -> None:
        check("seed", self.seed, SEED)
        if isinstance(self.defense, str):
            object.__setattr__(self, "defense", DefenseSpec.parse(self.defense))
        object.__setattr__(self, "attacks", tuple(self.attacks))

    def to_json(self) -> dict[str, Any]:
        """The canonical run config (JSON-able; the campaign name included, absent when None)."""
        out: dict[str, Any] = {}
        probe: dict[str, Any] = {}
        for section in (self.data, self.algorithm, self.probe, self.audit):
            for key, nested, value in section._items():
                (probe if nested else out)[key] = value
        out["probe"] = probe
        out.update(defense=self.defense.name, attacks=list(self.attacks), seed=self.seed)
        if self.campaign is not None:
            out["campaign"] = self.campaign
        return out

    def key(self) -> str:
        """The run key: ``run_key`` of ``to_json()``."""
        return run_key(self.to_json())

    def audit_key(self, kind: str) -> str:
        """The key of this run's audit ``kind`` (``"worst-case"``, ``"natural"``, ...): SHA-256 of
        the run's ``content_key`` and the kind (16 hex digits). Equal keys mean bit-identical audits."""
        return hashlib.sha256(f"{content_key(self.to_json())}/{kind}".encode()).hexdigest()[:16]

    def audit_seed(self, kind: str) -> int:
        """The seed of this run's audit ``kind``: its ``audit_key`` as a 64-bit integer."""
        return int(self.audit_key(kind), 16)

    @classmethod
    def from_json(cls, config: Mapping[str, Any]) -> "RunSpec":
        """The spec of a run config (``to_json``'s inverse); FltrError naming an unknown or
        missing key."""
        if isinstance(config, RunSpec):
            return config
        nested = config.get("probe", {})
        used, used_nested = {"probe", "defense", "attacks", "seed", "campaign"}, set()
        parts = {name: section._from(config, nested, used, used_nested)
                 for name, section in zip(SECTIONS, (DataSettings, AlgorithmSettings, ProbeSettings, AuditSettings))}
        unknown = sorted(set(config) - used) + sorted(f"probe.{k}" for k in set(nested) - used_nested)
        if unknown:
            raise FltrError(f"run config: unknown key {unknown[0]!r}")
        for key in ("defense", "attacks", "seed"):
            if key not in config:
                raise FltrError(f"run config: missing key {key!r}")
        return cls(defense=config["defense"], attacks=tuple(config["attacks"]), seed=config["seed"],
                   campaign=config.get("campaign"), **parts)

    def replace(self, **changes: Any) -> "RunSpec":
        """A copy with top-level parts replaced (``dataclasses.replace``)."""
        return dataclasses.replace(self, **changes)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RunSpec) and self.to_json() == other.to_json()

    def __hash__(self) -> int:
        return int(self.key(), 16)

    def __reduce__(self) -> tuple:
        return (RunSpec.from_json, (self.to_json(),))



def setting_constraints(section: type, name: str) -> tuple[Constraint, ...]:
    """The constraints a section declares on its setting ``name`` (``seed``: on the run's seed)."""
    if section is RunSpec and name == "seed":
        return SEED
    return next(f.metadata.get("constraints", ()) for f in dataclasses.fields(section) if f.name == name)


def check_population(population: int | None, non_iid: str) -> None:
    """ParameterError naming ``non_iid`` for a setting that does not parse, or ``population`` for
    users that do not fit in this machine's memory under it."""
    check_population_memory(population, parse_non_iid(non_iid).setting)


def check_setting(section: type, name: str, value: Any) -> None:
    """ParameterError naming ``SECTION.name`` (or ``seed``) unless ``value`` fits the setting."""
    where = "seed" if section is RunSpec else f"{section.NAME}.{name}"
    check(where, value, setting_constraints(section, name))


def as_run_spec(config: RunSpec | Mapping[str, Any]) -> RunSpec:
    """``config`` as a RunSpec (a run config dict is read by ``RunSpec.from_json``)."""
    return config if isinstance(config, RunSpec) else RunSpec.from_json(config)


def content_key(config: Mapping[str, Any]) -> str:
    """``run_key`` of ``config`` with its data named by content (``data_identity``), not by place:
    the key audit streams are drawn from, so the same data in another folder gives the same audit."""
    return run_key({**config, "data": data_identity(config["data"], config["fold"])})


def run_key(config: Mapping[str, Any]) -> str:
    """SHA-256 of the canonical JSON of ``config`` without its campaign name (16 hex digits).

    Key compatibility rule: the defense name is hashed in its legacy spelling
    (``clip(sensitivity=5)`` as ``clip(delta=5)``, :mod:`fltr_audit.store.defense_spelling`), so runs
    keep the keys they had before the parameter was renamed and existing stores resume.
    """
    body = {k: v for k, v in config.items() if k != "campaign"}
    if isinstance(body.get("defense"), str):
        body["defense"] = legacy_spelling(body["defense"])
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]
