"""``fltr-audit data info`` and ``fltr-audit data synth`` (``fltr_audit.api.data``)."""

from __future__ import annotations

from pathlib import Path

import typer

from fltr_audit.cli import options as o
from fltr_audit.cli.app import data_app
from fltr_audit.cli.common import emit_json, print_table
from fltr_audit.cli.progress import progress


def _hist(labels: dict) -> str:
    return "  ".join(f"{k}: {v:,}" for k, v in labels.items())


@data_app.command("info")
def info_command(
    spec: str = typer.Argument(..., help="A 5-fold folder, a train/vali/test folder, a file, or synthetic:PROFILE."),
    json_out: o.Json = False,
) -> None:
    """Queries, documents, features, docs per query and labels: totals and each fold's splits."""
    from fltr_audit.api.data import data_info  # start-up: the engine loads when the command runs

    info = data_info(spec)
    if json_out:
        emit_json(info)
        return
    dpq = info["docs_per_query"]
    typer.echo(
        f"{info['spec']} ({info['layout']}): {info['queries']:,} queries, {info['documents']:,} documents, "
        f"{info['features']} features, {info['levels']} levels\n"
        f"docs per query: min {dpq['min']}, mean {dpq['mean']:.1f}, max {dpq['max']}; labels {_hist(info['labels'])}\n"
        f"every query once per fold (train + vali + test): {'yes' if info['queries_once_per_fold'] else 'NO'}"
    )
    rows = []
    for fold in info["folds"]:
        for split in ("train", "vali", "test"):
            s = fold[split]
            d = s["docs_per_query"]
            rows.append({"fold": str(fold["fold"]), "split": split, "queries": f"{s['queries']:,}",
                         "documents": f"{s['documents']:,}",
                         "docs/query min / mean / max": f"{d['min']} / {d['mean']:.1f} / {d['max']}",
                         "labels": _hist(s["labels"])})
    print_table("splits per fold", rows)


@data_app.command("synth")
def synth_command(
    profile: str = typer.Option("mq2008", help="mq2007, mq2008, mslr10k, yahoo or istella."),
    queries: int = typer.Option(None, help="Number of queries (default: the profile's own)."),
    seed: int = typer.Option(0, help="Same seed, same data."),
    out: Path = typer.Option(..., help="Folder to create with Fold1..Fold5/{train,vali,test}.txt."),
    quiet: o.Quiet = False,
    json_out: o.Json = False,
) -> None:
    """Write a synthetic data set in the 5-fold LETOR layout (all or nothing)."""
    from fltr_audit.api.data import synth_data  # start-up: the engine loads when the command runs

    with progress(20, f"writing {profile}", quiet or json_out) as bar:
        result = synth_data(profile, out=out, queries=queries, seed=seed, progress=bar)
    if json_out:
        emit_json(result)
        return
    typer.echo(f"wrote {out}/Fold1..Fold5/{{train,vali,test}}.txt: synthetic:{profile} seed {seed}, "
               f"{result['queries']:,} queries, {result['documents']:,} documents, {result['features']} features, "
               f"{result['levels']} levels")
