"""What a campaign sweeps, read from its runs' stored configurations, kept apart in every table.

A campaign's grid varies some settings across its runs (the probe cohort, the clients per round,
the rounds, the fraction of poisoning clients, an algorithm parameter, ...). Seeds and folds are
the samples a verdict pools over; every other setting that differs between runs is a *swept axis*,
and the verdict rules never pool over it: :func:`with_sweeps` adds each swept axis as a column of
the attack, utility and audit rows (joined by ``run_key``), and ``reports.compare`` groups by it.

A defense parameter swept across defense strings (``dp-local-laplace(eps=1)``, ``...(eps=2)``)
needs no column: the defenses already differ. :func:`defense_axes` finds such families, so that a
plot can draw them as one line against the parameter.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pandas as pd

RUN_AXES = {  # column -> path in a run's config (fltr_audit.spec.run's canonical JSON)
    "data": ("data",), "algo": ("algo",), "rounds": ("rounds",), "clients": ("clients",),
    "queries_per_client": ("queries_per_client",), "ranker": ("ranker",), "non_iid": ("non_iid",),
    "population": ("population",), "split": ("probe", "split"), "probe_cohort": ("probe", "cohort"),
    "threat_model": ("probe", "threat_model"), "probe_lists": ("probe", "lists"), "poison": ("poison",),
}
"""Settings a grid may sweep, as table columns; ``params`` entries become ``param_<name>``."""
OTHER_MEANING = {"audits": {"rounds": "audit_rounds"}}
"""Stored columns named like a swept axis that mean something else -- an audit's ``rounds`` is the
rounds its mechanism composes, not the run's training rounds: renamed in the table before the axis
joins it (a claim verdict swept over rounds found no audit row of its rounds otherwise)."""
POOLED = ("seed", "fold")
"""What a verdict pools over: the samples, never a swept axis."""
NUMERIC = ("rounds", "clients", "queries_per_client", "population", "probe_cohort", "probe_lists", "fraction")
"""Swept axes drawn against their value (one point per value, with its interval)."""
NAMES = {"probe_cohort": "probe cohort", "queries_per_client": "queries per client", "probe_lists": "probe lists",
         "fraction": "fraction of malicious clients", "clients": "clients per round", "eps": "claimed ε",
         "noise_multiplier": "noise multiplier", "sigma": "noise σ", "p": "p"}
"""Axis names as a reader reads them."""
FRACTION = re.compile(r"fraction=([0-9.eE+-]+)")
PARAMETER = re.compile(r"([A-Za-z_]\w*)=(-?[0-9][0-9.eE+-]*)")


def axis_name(axis: str) -> str:
    """``probe_cohort`` -> ``probe cohort``; ``param_lr`` -> ``lr``."""
    return NAMES.get(axis, axis.removeprefix("param_").replace("_", " "))


def _value(config: dict, path: tuple[str, ...]) -> Any:
    for key in path:
        config = config.get(key) if isinstance(config, dict) else None
    return json.dumps(config, sort_keys=True) if isinstance(config, (list, dict)) else config


def run_settings(runs: pd.DataFrame | None) -> pd.DataFrame:
    """One row per run with a configuration: ``run_key`` and every :data:`RUN_AXES` setting, the
    algorithm's ``param_<name>`` values and, under poisoning, the ``fraction``."""
    if runs is None or runs.empty or "config" not in runs.columns:
        return pd.DataFrame(columns=["run_key"])
    rows = []
    for key, text in zip(runs["run_key"], runs["config"]):
        try:
            config = json.loads(text) if isinstance(text, str) else None
        except ValueError:
            config = None
        if not isinstance(config, dict) or "probe" not in config:
            continue  # not an audit run (an epsilon table, a whole-run audit)
        row = {"run_key": key, **{axis: _value(config, path) for axis, path in RUN_AXES.items()}}
        for name, value in (config.get("params") or {}).items():
            row[f"param_{name}"] = value
        found = FRACTION.search(str(config.get("poison") or ""))
        row["fraction"] = float(found.group(1)) if found else (0.0 if config.get("poison") else None)
        rows.append(row)
    return pd.DataFrame(rows) if rows else pd.DataFrame(columns=["run_key"])


def swept_axes(runs: pd.DataFrame | None) -> list[str]:
    """The settings that differ between the audit runs (never the seed or the fold)."""
    settings = run_settings(runs)
    return [c for c in settings.columns if c != "run_key" and settings[c].nunique(dropna=False) > 1]


def with_sweeps(tables: dict[str, pd.DataFrame], pool=()) -> tuple[dict[str, pd.DataFrame], list[str]]:
    """The tables with every swept axis (less those in ``pool``) as a column of their ``attacks``,
    ``utility`` and ``audits`` rows, and the list of those axes. A column a table already has
    (``probe_cohort`` of the attack rows) is kept as stored."""
    axes = [a for a in swept_axes(tables.get("runs")) if a not in pool]
    if not axes:
        return tables, []
    settings = run_settings(tables.get("runs"))[["run_key", *axes]]
    out = dict(tables)
    for name in ("attacks", "utility", "audits", "curves"):
        frame = tables.get(name)
        if frame is None or frame.empty or "run_key" not in frame.columns:
            continue
        frame = frame.rename(columns={c: new for c, new in OTHER_MEANING.get(name, {}).items() if c in axes})
        missing = [a for a in axes if a not in frame.columns]
        out[name] = frame.merge(settings[["run_key", *missing]], on="run_key", how="left") if missing else frame
    return out, axes


def with_swept_settings(status: pd.DataFrame, configs: pd.DataFrame) -> pd.DataFrame:
    """``campaign status`` rows with a column per swept setting after ``defense`` (the seed is
    already a column); ``.attrs["swept"]`` names them."""
    settings = run_settings(configs)
    axes = [c for c in settings.columns if c not in ("run_key", "data", "algo", "threat_model")
            and settings[c].nunique(dropna=False) > 1]
    if not axes or status.empty:
        status.attrs["swept"] = []
        return status
    out = status.merge(settings[["run_key", *axes]], on="run_key", how="left")
    at = list(out.columns).index("defense") + 1 if "defense" in out.columns else len(status.columns)
    out = out[[*status.columns[:at], *axes, *status.columns[at:]]]
    out.attrs["swept"] = axes
    return out


def swept_in(frame: pd.DataFrame) -> list[str]:
    """The swept-axis columns of a result table (those that vary in it)."""
    known = set(RUN_AXES) | {"fraction"}
    return [c for c in frame.columns if (c in known or c.startswith("param_")) and c not in ("data", "algo",
            "threat_model") and frame[c].nunique(dropna=False) > 1]


def sweep_label(row, axes: list[str]) -> str:
    """``probe cohort 2, rounds 10``: a row's values of the swept axes."""
    return ", ".join(f"{axis_name(a)} {_number(row[a])}" for a in axes if a in row and pd.notna(row[a]))


def _number(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def defense_axes(defenses) -> dict[str, tuple[str, str, dict[str, float]]]:
    """Families of defense strings that differ in one numeric parameter only:
    ``{family: (parameter, family label, {defense: value})}``; the label writes the swept value
    as ``·`` (``dp-local-laplace(eps=·)``). A defense belongs to at most one family (its first)."""
    families: dict[tuple[str, str], dict[str, float]] = {}
    for defense in dict.fromkeys(str(d) for d in defenses):
        for found in PARAMETER.finditer(defense):
            try:
                value = float(found.group(2))
            except ValueError:
                continue
            template = defense[:found.start(2)] + "·" + defense[found.end(2):]
            families.setdefault((template, found.group(1)), {})[defense] = value
    out, taken = {}, set()
    for (template, parameter), members in families.items():
        members = {d: v for d, v in members.items() if d not in taken}
        if len(set(members.values())) > 1:
            out[template] = (parameter, template, members)
            taken |= set(members)
    return out
