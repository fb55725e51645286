"""``fltr-audit attacks list`` and ``fltr-audit algorithms list`` (like ``defenses list``)."""

from __future__ import annotations

from typing import Callable

from fltr_audit.cli import options as o
from fltr_audit.cli.app import algorithms_app, attacks_app
from fltr_audit.cli.common import emit_json, print_table


def show(rows: list[dict], json_out: bool, title: str, shown: Callable[[dict], dict], min_width: int | None = None
         ) -> None:
    """``rows`` as JSON records on stdout with ``--json``, else as a rich table of ``shown(row)``."""
    if json_out:
        emit_json(rows)
    else:
        print_table(title, [shown(r) for r in rows], min_width=min_width)


@attacks_app.command("list")
def list_attacks(json_out: o.Json = False) -> None:
    """Every attack (built-in and registered plug-ins): reference baseline or not, and what it needs."""
    from fltr_audit.api.listing import attack_rows  # start-up: the registries load when the command runs

    show(attack_rows(), json_out, "Attacks (privacy: use with --attack, reference: a baseline that does not read the "
         "message; poisoning: use with --poison NAME(fraction=F,...))",
         lambda r: {"name": r["name"] + (f" [{r['distribution']}]" if r["distribution"] else ""), "kind": r["kind"],
                    "reference": "yes" if r["reference"] else "", "what it does": r["summary"],
                    "needs / carried by": ", ".join(r["needs"] if r["kind"] == "privacy" else r["carries"])},
         min_width=100)


@algorithms_app.command("list")
def list_algorithms(json_out: o.Json = False) -> None:
    """Every algorithm: what a client sends, what it reveals, and an audit's defaults."""
    from fltr_audit.api.listing import algorithm_rows  # start-up: the registries load when the command runs

    show(algorithm_rows(), json_out, "Algorithms (use as ALGORITHM; train-only ones have no message to audit)",
         lambda r: {"name": r["name"] + (f" [{r['distribution']}]" if r["distribution"] else ""),
                    "audit": "yes" if r["auditable"] else "train only",
                    "message": r["message_kind"], "reveals": r["reveals"], "click models": r["click_models"],
                    "defaults": f"normalization {r['default_normalization']}; "
                                f"attacks {', '.join(r['default_attacks']) or '-'}",
                    "params": "-" if not r["params"] else ", ".join(f"{p['name']}={p['default']}" for p in r["params"])},
         min_width=100)
