"""``fltr-audit attacks list`` and ``fltr-audit algorithms list`` (like ``defenses list``)."""

from __future__ import annotations

from typing import Callable

import typer

from fltr_audit.cli.app import algorithms_app, attacks_app
from fltr_audit.cli.common import emit_json, print_table


def attack_rows() -> list[dict]:
    """Every registered attack: whether it is a reference baseline and what it needs."""
    from attacks.registry import attack_names, attack_needs, is_reference

    return [{"name": name, "reference": is_reference(name), "needs": list(attack_needs(name))}
            for name in attack_names()]


def algorithm_rows() -> list[dict]:
    """Every registered algorithm with its declared capabilities."""
    from fltr_audit.algorithms.registry import algorithm_specs

    return [{"name": s.name, "summary": s.summary, "auditable": s.auditable, "message_kind": s.message_kind,
             "reveals": s.reveals, "click_models": s.click_models, "probe_click_models": list(s.probe_click_models()),
             "train_click_model": s.train_click_model, "default_normalization": s.default_normalization,
             "default_attacks": list(s.default_attacks), "k": s.k} for s in algorithm_specs()]


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
         lambda r: {"name": r["name"], "reference": "yes" if r["reference"] else "", "needs": ", ".join(r["needs"])})


@algorithms_app.command("list")
def list_algorithms(json_out: bool = typer.Option(False, "--json", help="Print JSON to stdout.")) -> None:
    """Every algorithm: what a client sends, what it reveals, and an audit's defaults."""
    show(algorithm_rows(), json_out, "Algorithms (use with --algo; train-only ones have no message to audit)",
         lambda r: {"name": r["name"], "audit": "yes" if r["auditable"] else "train only",
                    "message": r["message_kind"], "reveals": r["reveals"], "click models": r["click_models"],
                    "defaults": f"normalization {r['default_normalization']}; "
                                f"attacks {', '.join(r['default_attacks']) or '-'}"}, min_width=100)
