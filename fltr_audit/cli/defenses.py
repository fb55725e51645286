"""``fltr-audit defenses list`` and ``fltr-audit bench defenses``."""

from __future__ import annotations

import typer

from fltr_audit.cli import options as o
from fltr_audit.cli.app import bench_app, defenses_app
from fltr_audit.cli.progress import progress
from fltr_audit.cli.common import emit_json, print_table


@defenses_app.command("list")
def list_command(json_out: o.Json = False) -> None:
    """Every defense (built-in, registered and installed plug-ins, with their distribution) with its
    parameters, defaults and claimed guarantee."""
    from fltr_audit.api.listing import defense_rows  # start-up: the catalog loads when the command runs

    rows = defense_rows()
    if json_out:
        emit_json(rows)
        return
    print_table("Defenses (combine with '+', e.g. clip(sensitivity=5)+dp-distributed(eps=4.5)+secagg)", [
        {"name": row["name"] + (f" [{row['distribution']}]" if row["distribution"] else ""), "role": row["role"],
         "parameters (default)": ", ".join(f"{p['name']}={p['default']}" for p in row["parameters"]),
         "must see": row.get("sees", ""), "claimed guarantee": row["guarantee"]} for row in rows], min_width=120)


@bench_app.command("defenses")
def bench_defenses(
    clients: int = typer.Option(1000, "--clients", help="Cohort size of the secure-aggregation runs."),
    dim: int = typer.Option(136, "--dim", help="Vector dimension (the linear ranker on MSLR-WEB10K: 136)."),
    degree: int = typer.Option(20, "--degree", help="Neighbour degree of the SecAgg+ run (even)."),
    drop: float = typer.Option(0.0, "--drop", help="Dropout rate after key exchange."),
    full: bool = typer.Option(True, "--full/--no-full", help="Also time the complete graph (slow: ~n^2/2 key agreements)."),
    round_clients: int = typer.Option(100, "--round-clients", help="Cohort size of the timed FPDGD training round."),
    repeats: int = typer.Option(5, "--repeats", help="Timed repetitions of the fast measurements; the best is reported."),
    seed: o.Seed = 0,
    json_out: o.Json = False,
    quiet: o.Quiet = False,
) -> None:
    """Time secure aggregation: the protocol (SecAgg+ degree and complete graph) per round, and
    the ideal mode's overhead over plain FedAvg, alone and within an FPDGD training round."""
    from fltr_audit.api.bench_defenses import bench_defenses as run  # start-up: the engine loads here

    with progress(4 if full else 3, "bench defenses", quiet or json_out) as bar:
        rows = run(clients, dim, degree, drop, full, round_clients, repeats, seed, progress=bar)
    if json_out:
        emit_json(rows)
        return
    print_table("bench defenses (seconds per round; best of --repeats for the fast rows)",
                [_shown_row(r) for r in rows], min_width=120)


def _shown_row(r: dict) -> dict:
    """One row of ``bench defenses`` as the table shows it."""
    note = ""
    if "cpu_seconds" in r:
        note = f"CPU {r['cpu_seconds']:.3g} s"
        if r["target_seconds"]:
            note += f"; target <= {r['target_seconds']:g} s"
    if "aggregation_overhead_fraction" in r:
        note = (f"round {100 * r['overhead_fraction']:+.1f} %; aggregation alone "
                f"{100 * r['aggregation_overhead_fraction']:+.2f} % of a round (target < 5 %)")
    return {"measure": r["measure"], "clients": str(r["clients"]), "seconds": f"{r['seconds']:.4g}",
            "baseline": f"{r['baseline_seconds']:.4g}" if "baseline_seconds" in r else "",
            "key agreements": str(r.get("key_agreements", "")),
            "MB up/down": f"{r['mb_up']:.1f} / {r['mb_down']:.1f}" if "mb_up" in r else "", "note": note}
