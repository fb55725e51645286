"""``fltr-audit attacks list`` and ``fltr-audit algorithms list`` (like ``defenses list``)."""

from __future__ import annotations

from typing import Callable

import typer

from fltr_audit.cli.app import algorithms_app, attacks_app
from fltr_audit.cli.common import emit_json, print_table
from fltr_audit.errors import FltrError


def attack_rows() -> list[dict]:
    """Every attack, built-in, registered and installed (plug-ins with their distribution): what
    it does, whether it is a reference baseline, and what it needs (kind ``privacy``); then the
    poisoning attacks (kind ``poisoning``: the message kinds they can be written in, their parameters)."""
    from attacks.poisoning.catalog import list_poisonings
    from attacks.registry import attack_names, attack_spec
    from fltr_audit import plugins

    installed = plugins.installed(plugins.ATTACKS)
    names = list(attack_names()) + [n for n in installed if n not in attack_names()]
    rows = []
    for name in names:
        try:
            spec = attack_spec(name)  # loads an installed plug-in
        except FltrError as exc:  # a broken plug-in is a row saying so, not a failed command
            rows.append({"name": name, "kind": "privacy", "summary": str(exc), "reference": False, "needs": [],
                         "distribution": installed.get(name, "")})
            continue
        rows.append({"name": name, "kind": "privacy", "summary": spec.summary, "reference": spec.reference,
                     "needs": list(spec.needs), "distribution": installed.get(name, "")})
    return rows + [{**row, "reference": False, "needs": [], "distribution": ""} for row in list_poisonings()]


def algorithm_rows() -> list[dict]:
    """Every algorithm, built-in, registered and installed (plug-ins with their distribution),
    with its declared capabilities and parameters."""
    from fltr_audit import plugins
    from fltr_audit.engine.algorithms.registry import algorithm_spec, algorithm_specs

    broken = []
    for name, distribution in plugins.installed(plugins.ALGORITHMS).items():
        try:
            algorithm_spec(name)  # loads and registers it
        except FltrError as exc:  # a broken plug-in is a row saying so, not a failed command
            broken.append({"name": name, "summary": str(exc), "auditable": False, "message_kind": "none",
                           "reveals": "", "click_models": "", "probe_click_models": [], "train_click_model": "",
                           "default_normalization": "", "default_attacks": [], "k": 0, "params": None,
                           "distribution": distribution})
    return [{"name": s.name, "summary": s.summary, "auditable": s.auditable, "message_kind": s.message_kind,
             "reveals": s.reveals, "click_models": s.click_models, "probe_click_models": list(s.probe_click_models()),
             "train_click_model": s.train_click_model, "default_normalization": s.default_normalization,
             "default_attacks": list(s.default_attacks), "k": s.k,
             "params": None if s.params is None else [{"name": p.name, "default": p.default, "help": p.help}
                                                       for p in s.params],
             "distribution": s.distribution} for s in algorithm_specs()] + broken


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
    show(attack_rows(), json_out, "Attacks (privacy: use with --attack, reference: a baseline that does not read the "
         "message; poisoning: use with --poison NAME(fraction=F,...))",
         lambda r: {"name": r["name"] + (f" [{r['distribution']}]" if r["distribution"] else ""), "kind": r["kind"],
                    "reference": "yes" if r["reference"] else "", "what it does": r["summary"],
                    "needs / carried by": ", ".join(r["needs"] if r["kind"] == "privacy" else r["carries"])},
         min_width=100)


@algorithms_app.command("list")
def list_algorithms(json_out: bool = typer.Option(False, "--json", help="Print JSON to stdout.")) -> None:
    """Every algorithm: what a client sends, what it reveals, and an audit's defaults."""
    show(algorithm_rows(), json_out, "Algorithms (use with --algo; train-only ones have no message to audit)",
         lambda r: {"name": r["name"] + (f" [{r['distribution']}]" if r["distribution"] else ""),
                    "audit": "yes" if r["auditable"] else "train only",
                    "message": r["message_kind"], "reveals": r["reveals"], "click models": r["click_models"],
                    "defaults": f"normalization {r['default_normalization']}; "
                                f"attacks {', '.join(r['default_attacks']) or '-'}",
                    "params": "-" if not r["params"] else ", ".join(f"{p['name']}={p['default']}" for p in r["params"])},
         min_width=100)
