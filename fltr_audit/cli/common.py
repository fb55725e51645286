"""Shared CLI plumbing: --json output, tables, timing, atomic output folders, one-line errors
(progress: ``cli.progress``)."""

from __future__ import annotations

import json
import math
import numbers
import sys
import time
from typing import Any, Callable

from fltr_audit._version import __version__
from fltr_audit.cli.app import RUNNING_COMMAND
from fltr_audit.constraints import ParameterError

SPEC_PARAMETERS = {
    "data.spec": "data", "data.fold": "fold", "data.normalization": "normalization", "algorithm.name": "ALGORITHM",
    "algorithm.rounds": "rounds", "algorithm.clients": "clients", "algorithm.queries_per_client": "queries_per_client",
    "algorithm.ranker": "ranker", "algorithm.population": "population", "algorithm.non_iid": "non_iid",
    "algorithm.poison": "poison", "probe.split": "split", "probe.click_models": "click_model", "probe.cohort": "probe_cohort",
    "probe.queries_per_client": "probe_queries", "probe.min_shown": "min_shown", "probe.require_click": "require_click",
    "probe.counterfactual": "counterfactual", "probe.threat_model": "threat_model", "probe.manipulation": "manipulation",
    "probe.lists": "probe_lists", "audit.trials": "trials", "audit.epsilon_audit": "epsilon_audit", "seed": "seed",
    "defense": "defense", "attacks": "attack",
}
"""The run spec's parameters (``fltr_audit.spec.run``) as the ``audit`` command's parameters."""

OPTIONS: dict[str, str] = {
    **{spec: name if name.isupper() else "--" + name.replace("_", "-") for spec, name in SPEC_PARAMETERS.items()},
    # the engine's keywords where the option is spelled otherwise
    "attacks": "--attack", "C": "--svm-c", "epochs": "--rounds", "claim_verdict": "--claim-verdict",
    "nodes": "--supernodes", "algo": "ALGORITHM", "algorithm": "ALGORITHM", "audit.run_canaries": "--canaries",
    "audit.run_runs": "--runs", "algorithm.train_click_model": "--click-model", "cohort": "--probe-cohort",
    "probe_cohort": "--probe-cohort", "min_shown": "--min-shown", "term": "TERM", "audit.unlearning": "--method",
    "audit.unlearning_forget": "--forget", "audit.unlearning_canaries": "--canaries",
    "audit.unlearning_poison_check": "--poison-check",
    # the engine's keywords spelled as options
    **{name: "--" + name.replace("_", "-") for name in (
        "data", "fold", "queries", "normalization", "split", "clients", "rounds", "queries_per_client",
        "eval_every", "ranker", "population", "non_iid", "poison", "click_model", "threat_model", "manipulation",
        "record_rounds", "store", "workers", "scheduler", "trials", "neighbours", "test", "canaries",
        "runs", "confidence", "power", "min_effect", "format", "k", "lr", "sigma", "gamma", "propensity",
        "lr_local", "lr_global", "clicks_per_client", "em_rounds", "logging_fraction", "batch_queries",
        "length", "p", "levels", "by", "pool", "averaging", "runtime", "server_sees", "timeout", "eval_split",
        "max_pairs", "profile", "repeats", "degree", "drop", "round_clients", "dim", "messages", "features", "noise",
        "lists", "queries", "docs", "cohorts", "method", "forget", "interval", "calibration", "unlearn_rounds",
        "scale", "poison_check")},
}
"""The CLI's one map from a parameter as the engine names it (``ParameterError.parameter``) to the
option a command-line user typed; ``main`` renames every ParameterError by it, once."""


def as_option_error(exc: ParameterError) -> ParameterError:
    """``exc`` naming the option its command-line user typed (``trials`` -> ``--trials``),
    unless a door has already renamed it."""
    return exc if exc.door else exc.renamed(OPTIONS)


JSON_SCHEMA = 1
"""The version of the ``--json`` envelope (``docs/json-envelope.schema.json``); raised when the
envelope's own keys change, not when a command's result gains a key."""


def emit_json(result: Any) -> None:
    """Print the ``--json`` envelope of the running command on stdout (``docs/reference/json.md``)::

        {"fltr_audit": "<version>", "schema": 1, "command": "train fpdgd", "result": ...}

    ``command`` is the command path as typed, without the program name; ``result`` is the
    command's payload, numpy types converted, NaN (no value) as null and an infinite value (the
    epsilon of a defense without a DP claim) as the string "inf" or "-inf", never null."""
    from fltr_audit.store.run_folder import jsonable  # start-up: numpy loads when a command prints JSON

    envelope = {"fltr_audit": __version__, "schema": JSON_SCHEMA, "command": command_path(), "result": result}
    sys.stdout.write(json.dumps(jsonable(envelope), indent=2, allow_nan=False) + "\n")


def command_path() -> str:
    """The running command as typed, without the program name (``"train fpdgd"``, ``"audit"``)."""
    return RUNNING_COMMAND.get()


def written(out: str | None) -> str:
    """The end of a training command's line: where the run was written, or that nothing was."""
    return f"-> {out}" if out is not None else "(nothing written; --out FOLDER keeps the run)"


def format_cell(value: Any) -> str:
    """A table cell: floats with 4 decimals, ints with thousands separators, the rest as str."""
    if isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral):
        return f"{value:,.4f}"
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def print_table(title: str, rows: list[dict], *, min_width: int | None = None) -> None:
    """Print ``rows`` (dicts with the same keys, the columns) as a rich table on stdout.

    Cells go through :func:`format_cell`; columns holding a number are right-aligned
    (callers pass preformatted strings where they want another format and alignment).
    ``min_width`` widens the console for tables with long text.
    """
    # start-up: rich loads only when a table is printed (not for a group's --help)
    from rich.console import Console
    from rich.table import Table

    def numeric(value: Any) -> bool:
        return isinstance(value, numbers.Number) and not isinstance(value, bool)

    table = Table(title=title)
    for key in rows[0]:
        table.add_column(key, justify="right" if any(numeric(row[key]) for row in rows) else "left")
    for row in rows:
        table.add_row(*(format_cell(v) for v in row.values()))
    console = Console()
    if min_width is not None and console.width < min_width:
        console = Console(width=min_width)
    console.print(table)


GLOSSARY_URL = "docs/concepts/glossary.md"
"""Where the words of the verdict tables are defined (the docs site's glossary page)."""


def print_glossary_pointer() -> None:
    """The one line, once per run, that says where the tables' words are defined."""
    print(f"Terms (±detect, lb/claim, ...): fltr-audit explain TERM, or {GLOSSARY_URL}")


def warm_up(run_one_round: Callable[[], Any]) -> float:
    """Run one untimed round of a bench (the compiled kernels load or compile, caches fill) and
    return its wall seconds, reported as ``warm_up_seconds`` beside the timed rounds."""
    start = time.perf_counter()
    run_one_round()
    return time.perf_counter() - start


def print_figures(title: str, figures: dict[str, Any], json_out: bool) -> None:
    """A bench command's figures: JSON on stdout with ``--json``, else a figure / value table."""
    if json_out:
        emit_json(figures)
    else:
        print_table(title, [{"figure": key, "value": value} for key, value in figures.items()])


def round_reporter(bar: Any, label: str, total: int, column: str, name: str) -> Callable[[int, dict], None]:
    """An ``on_round`` (or ``on_epoch``) callback of a training loop: advance the :func:`progress`
    ``bar`` and show ``label r/total`` with the row's ``column`` as ``name`` (left out while it
    is NaN, between evaluations)."""
    def report(r: int, row: dict) -> None:
        value = row[column]
        shown = "" if math.isnan(value) else f" {name} {value:.4f}"
        bar.advance(description=f"{label} {r}/{total}{shown}")

    return report


def parse_list(value: str, option: str, allowed: tuple[str, ...] | None = None) -> list[str]:
    """Split a comma-separated value, checking each item against ``allowed``; ParameterError
    naming ``option`` (an option, or a parameter ``main`` renames by ``OPTIONS``)."""
    items = [v.strip() for v in value.split(",") if v.strip()]
    if not items:
        raise ParameterError(option, "empty list")
    if allowed is not None:
        for item in items:
            if item not in allowed:
                raise ParameterError(option, f"unknown value {item!r} (choose from {', '.join(allowed)})")
    return items
