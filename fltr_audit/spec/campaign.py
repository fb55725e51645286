"""A campaign as a typed value (``CampaignSpec``), read once from a TOML file (``load_spec``) or a
TOML-shaped mapping (``validate_spec``: the ``audit`` command and the Python API build one too).

Reading checks keys and types (errors name the key), merges the file over the defaults
(``spec.campaign_tables``) and checks every value that would fail inside a run
(``spec.campaign_checks``), so that nothing downstream sees an unchecked value. The grid of runs
is ``spec.grid.expand``.
"""

from __future__ import annotations

import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from fltr_audit.constraints import ParameterError
from fltr_audit.errors import FltrDeprecation, FltrError
from fltr_audit.spec.campaign_checks import check_table, check_values, family_defaults
from fltr_audit.spec.campaign_tables import CAMPAIGN_KEYS, DEFAULTS, DEPRECATED_KEYS, as_list
from fltr_audit.spec.defense import DefenseSpec
from fltr_audit.spec.poison import PoisonSpec, parse_poison
from fltr_audit.spec.plan import planned_lists

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

MAX_CAMPAIGN_BYTES = 1 << 20
"""A campaign file is a few hundred bytes of settings; anything past 1 MiB is not one (read whole)."""

TABLES = ("data", "algorithm", "probe", "audit", "audit_run", "unlearning")


@dataclass(frozen=True)
class CampaignData:
    """``[data]``: data sets and folds (grid axes), normalization, query cap."""

    specs: tuple[str, ...]
    folds: tuple[int, ...]
    normalization: str
    queries: int | None


@dataclass(frozen=True)
class CampaignAlgorithm:
    """``[algorithm]``: every list is a grid axis, ``params`` values included."""

    names: tuple[str, ...]
    rounds: tuple[int, ...]
    clients: tuple[int, ...]
    queries_per_client: tuple[int, ...]
    rankers: tuple[str, ...]
    train_click_model: str
    params: tuple[tuple[str, tuple[Any, ...]], ...]
    population: int | None
    non_iid: tuple[str, ...]
    poison: tuple[PoisonSpec | None, ...] = (None,)


@dataclass(frozen=True)
class CampaignProbe:
    """``[probe]``: splits, cohorts and threat models are grid axes; the click models are probed
    inside every run, each with ``lists`` lists (planned from ``min_effect`` and ``power`` unless
    the table fixes them: ``fltr_audit.spec.plan``)."""

    splits: tuple[str, ...]
    click_models: tuple[str, ...]
    cohorts: tuple[int, ...]
    queries_per_client: int
    min_shown: int
    require_click: bool
    counterfactual: int
    threat_models: tuple[str, ...]
    manipulation: str
    lists: int | None
    rounds: int | None
    min_effect: float
    power: float | None


@dataclass(frozen=True)
class CampaignAudit:
    """``[audit]``: the defenses (a grid axis), the attacks of every run, the epsilon audits."""

    defenses: tuple[DefenseSpec, ...]
    attacks: tuple[str, ...]
    epsilon_audit: bool
    trials: int | str


@dataclass(frozen=True)
class CampaignWholeRun:
    """``[audit_run]``: each run's whole-run canary audit (off without ``canaries``)."""

    canaries: int | None
    runs: int


@dataclass(frozen=True)
class CampaignUnlearning:
    """``[unlearning]``: each run's unlearning audit (off without ``method``; the methods a grid axis)."""

    methods: tuple[str | None, ...]
    forget: int
    canaries: int
    poison_check: bool


@dataclass(frozen=True)
class CampaignSpec:
    """A validated campaign: its name, seeds (a grid axis) and tables; ``table`` is the merged
    TOML-shaped mapping it was read from (what reports show as the campaign's settings)."""

    name: str
    seeds: tuple[int, ...]
    data: CampaignData
    algorithm: CampaignAlgorithm
    probe: CampaignProbe
    audit: CampaignAudit
    audit_run: CampaignWholeRun
    unlearning: CampaignUnlearning
    table: Mapping[str, Any]


def load_spec(path: str | Path) -> CampaignSpec:
    """Read and validate a campaign TOML file (merged over the defaults)."""
    path = Path(path)
    if not path.is_file():
        raise FltrError(f"{path}: no such campaign file")
    try:
        if path.stat().st_size > MAX_CAMPAIGN_BYTES:
            raise FltrError(f"{path}: {path.stat().st_size:,} bytes, larger than any campaign file "
                            f"({MAX_CAMPAIGN_BYTES:,} bytes at most)")
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


def validate_spec(raw: Mapping[str, Any] | CampaignSpec, source: str = "campaign", keys: bool = True) -> CampaignSpec:
    """Check keys and types (errors name the key), merge over the defaults, check values.

    A bad value is a ParameterError naming the campaign key (``SOURCE: key 'audit.trials': ...``,
    ``CAMPAIGN_KEYS``); with ``keys`` False it names the engine's parameter (``trials``), for a
    door that renames it to what its own user typed (the ``audit`` command, the Python API)."""
    if isinstance(raw, CampaignSpec):
        return raw
    if "name" not in raw:
        raise FltrError(f"{source}: missing key 'name'")
    raw = _current_keys(raw, source)
    check_table(dict(raw), "", source)
    spec: dict[str, Any] = {"name": raw["name"], "seeds": as_list(raw.get("seeds", DEFAULTS["seeds"]))}
    for table in TABLES:
        check_table(raw.get(table, {}), table, source)
        spec[table] = {**DEFAULTS[table], **raw.get(table, {})}
    family_defaults(spec, raw)
    if raw.get("probe", {}).get("lists") is not None and "power" not in raw.get("probe", {}):
        spec["probe"]["power"] = None  # lists given, no plan asked for: no plan
    try:
        check_values(spec, source)
    except ParameterError as exc:
        if not keys or exc.door:
            raise
        raise exc.renamed(CAMPAIGN_KEYS, where=f"{source}: ", form="key '{}'") from None
    return _typed(spec)


def _current_keys(raw: Mapping[str, Any], source: str) -> dict[str, Any]:
    """``raw`` with each deprecated key (``DEPRECATED_KEYS``) renamed, one FltrDeprecation per key;
    an old key beside its new one is an error."""
    out = dict(raw)
    for (table, old), new in DEPRECATED_KEYS.items():
        if isinstance(out.get(table), Mapping) and old in out[table]:
            if new in out[table]:
                raise FltrError(f"{source}: keys '{table}.{old}' and '{table}.{new}' both set; keep '{table}.{new}'")
            warnings.warn(f"{source}: key '{table}.{old}' is deprecated: write '{table}.{new}'", FltrDeprecation,
                          stacklevel=2)
            out[table] = {(new if k == old else k): v for k, v in out[table].items()}
    return out


def _axis(value: Any) -> tuple:
    """A list key as a grid axis (a scalar as an axis of one point)."""
    return tuple(as_list(value))


def _lists(probe: dict, audit: dict) -> int | None:
    """``probe.lists`` as given, else planned from ``min_effect`` and ``power`` (None: one pass)."""
    if probe.get("lists") is not None or probe.get("power") is None:
        return probe.get("lists")
    return planned_lists(probe["min_effect"], probe["power"], as_list(audit["attacks"]))


def _typed(spec: dict[str, Any]) -> CampaignSpec:
    """The typed value of a checked, merged campaign mapping."""
    t = _axis
    data, algo, probe, audit, whole, unlearning = (spec[name] for name in TABLES)
    return CampaignSpec(
        name=spec["name"], seeds=t(spec["seeds"]),
        data=CampaignData(t(data["spec"]), t(data["folds"]), data["normalization"], data.get("queries")),
        algorithm=CampaignAlgorithm(t(algo["name"]), t(algo["rounds"]), t(algo["clients"]),
                                    t(algo["queries_per_client"]), t(algo["ranker"]), algo["train_click_model"],
                                    tuple((k, t(v)) for k, v in sorted(algo["params"].items())),
                                    algo.get("population"), t(algo.get("non_iid", "iid")),
                                    tuple(parse_poison(p) for p in as_list(algo.get("poison", "none")))),
        probe=CampaignProbe(t(probe["split"]), t(probe["click_models"]), t(probe["probe_cohort"]),
                            probe["queries_per_client"], probe["min_shown"], probe["require_click"],
                            probe["counterfactual"], t(probe.get("threat_model", "server")),
                            probe.get("manipulation", "isolate"), _lists(probe, audit), probe.get("rounds"),
                            probe["min_effect"], probe.get("power")),
        audit=CampaignAudit(tuple(DefenseSpec.parse(d) for d in as_list(audit["defenses"])), t(audit["attacks"]),
                            audit["epsilon_audit"], audit["trials"]),
        audit_run=CampaignWholeRun(whole.get("canaries"), whole.get("runs", 1)),
        unlearning=CampaignUnlearning(t(unlearning["method"]), unlearning["forget"], unlearning["canaries"],
                                      unlearning["poison_check"]),
        table=spec)
