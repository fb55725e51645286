"""``fltr-audit attacks list`` and ``fltr-audit algorithms list`` (like ``defenses list``)."""

from __future__ import annotations

from typing import Callable

import typer

from fltr_audit.cli.app import algorithms_app, attacks_app
from fltr_audit.cli.common import emit_json, print_table


def origins(group: str) -> dict[str, dict]:
    """The installed plug-ins of ``group`` by name: the distribution that declares each, its version
    and the entry point's ``module:attr`` (``plugins.installed_plugins``: metadata only)."""
    from fltr_audit import plugins

    return {p.name: {"distribution": p.distribution, "version": p.version, "entry_point": p.target}
            for p in plugins.installed_plugins(group)}


def with_origins(group: str, rows: list[dict], blank: dict) -> list[dict]:
    """``rows`` (registered entries) with their origin columns ("" for built-ins), then a row per
    installed plug-in no command of this process has used: listed, never imported (the other
    columns ``blank``)."""
    from fltr_audit import plugins

    found = origins(group)
    none = {"distribution": "", "version": "", "entry_point": ""}
    known = {row["name"] for row in rows}
    return ([{**row, **found.get(row["name"], none), "imported": True} for row in rows]
            + [{"name": name, **blank, "summary": plugins.NOT_IMPORTED, **origin, "imported": False}
               for name, origin in found.items() if name not in known])


def attack_rows() -> list[dict]:
    """Every attack, built-in, registered and installed (plug-ins with their distribution; those no
    command has used are listed unimported): what it does, whether it is a reference baseline, and
    what it needs."""
    from attacks.registry import attack_names, attack_spec
    from fltr_audit import plugins

    rows = [{"name": name, "summary": attack_spec(name).summary, "reference": attack_spec(name).reference,
             "needs": list(attack_spec(name).needs)} for name in attack_names()]
    return with_origins(plugins.ATTACKS, rows, {"reference": False, "needs": []})


def algorithm_rows() -> list[dict]:
    """Every algorithm, built-in, registered and installed (plug-ins with their distribution; those
    no command has used are listed unimported), with its declared capabilities and parameters."""
    from fltr_audit import plugins
    from fltr_audit.engine.algorithms.registry import algorithm_specs

    rows = [{"name": s.name, "summary": s.summary, "auditable": s.auditable, "message_kind": s.message_kind,
             "reveals": s.reveals, "click_models": s.click_models, "probe_click_models": list(s.probe_click_models()),
             "train_click_model": s.train_click_model, "default_normalization": s.default_normalization,
             "default_attacks": list(s.default_attacks), "k": s.k,
             "params": None if s.params is None else [{"name": p.name, "default": p.default, "help": p.help}
                                                       for p in s.params]} for s in algorithm_specs()]
    return with_origins(plugins.ALGORITHMS, rows, {
        "auditable": False, "message_kind": "none", "reveals": plugins.NOT_IMPORTED, "click_models": "",
        "probe_click_models": [],
        "train_click_model": "", "default_normalization": "", "default_attacks": [], "k": 0, "params": None})


def show(rows: list[dict], json_out: bool, title: str, shown: Callable[[dict], dict], min_width: int | None = None
         ) -> None:
    """``rows`` as JSON records on stdout with ``--json``, else as a rich table of ``shown(row)``."""
    if json_out:
        emit_json(rows)
    else:
        print_table(title, [shown(r) for r in rows], min_width=min_width)


@attacks_app.command("list")
def list_attacks(json_out: bool = typer.Option(False, "--json", help="Print JSON to stdout.")) -> None:
    """Every attack (built-in and registered plug-ins): reference baseline or not, and what it needs."""
    show(attack_rows(), json_out, "Attacks (use with --attack; reference: a baseline that does not read the message)",
         lambda r: {"name": r["name"] + (f" [{r['distribution']}]" if r["distribution"] else ""),
                    "reference": "yes" if r["reference"] else "", "what it does": r["summary"],
                    "needs": ", ".join(r["needs"])}, min_width=100)


@algorithms_app.command("list")
def list_algorithms(json_out: bool = typer.Option(False, "--json", help="Print JSON to stdout.")) -> None:
    """Every algorithm: what a client sends, what it reveals, and an audit's defaults."""
    show(algorithm_rows(), json_out, "Algorithms (use with --algo; train-only ones have no message to audit)",
         _algorithm_cells, min_width=100)


def _algorithm_cells(r: dict) -> dict:
    """One row of the ``algorithms list`` table; an unimported plug-in's capabilities are unknown."""
    cells = {"name": r["name"] + (f" [{r['distribution']}]" if r["distribution"] else ""),
             "audit": "yes" if r["auditable"] else "train only", "message": r["message_kind"], "reveals": r["reveals"],
             "click models": r["click_models"],
             "defaults": f"normalization {r['default_normalization']}; "
                         f"attacks {', '.join(r['default_attacks']) or '-'}",
             "params": "-" if not r["params"] else ", ".join(f"{p['name']}={p['default']}" for p in r["params"])}
    return cells if r["imported"] else {**{k: "" for k in cells}, "name": cells["name"], "reveals": r["summary"]}
