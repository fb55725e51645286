"""``fltr-audit data info``, ``fltr-audit data synth`` and ``fltr-audit bench data``."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

import typer

from fltr_audit.cli.app import bench_app, data_app
from fltr_audit.cli.common import atomic_out_dir, check_at_least, check_out_dir, emit_json, print_table, progress
from fltr_audit.constraints import Interval, check
from fltr_audit.errors import FltrError

CACHED_LOAD_TARGET_SECONDS = 2.0


def _hist(labels: dict) -> str:
    return "  ".join(f"{k}: {v:,}" for k, v in labels.items())


@data_app.command("info")
def info_command(
    spec: str = typer.Argument(..., help="A 5-fold folder, a train/vali/test folder, a file, or synthetic:PROFILE."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON to stdout."),
) -> None:
    """Queries, documents, features, docs per query and labels: totals and each fold's splits."""
    from fltr_audit.engine.data.load import data_info

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
    quiet: bool = typer.Option(False, "--quiet", help="No progress bar."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON to stdout."),
) -> None:
    """Write a synthetic data set in the 5-fold LETOR layout (all or nothing)."""
    from fltr_audit.atomic import write_file
    from fltr_audit.engine.data.letor import format_letor
    from fltr_audit.engine.data.synthetic import PROFILES, fold_parts, generate

    if profile not in PROFILES:
        raise FltrError(f"--profile: unknown profile {profile!r} (choose {', '.join(PROFILES)})")
    check_out_dir(out)
    check("--queries", queries, (Interval(int, 5, None), None), "five folds need five queries")
    ds = generate(profile, queries, seed)
    parts = fold_parts(ds.n_queries)
    with atomic_out_dir(out) as tmp, progress(20, f"writing {profile}", quiet) as bar:
        texts = []
        for part in parts:  # each part is formatted once and reused by the five folds
            texts.append(format_letor(ds.subset(part)))
            bar.advance()
        for k in range(5):
            folder = tmp / f"Fold{k + 1}"
            folder.mkdir()
            order = {"train": [k, k + 1, k + 2], "vali": [k + 3], "test": [k + 4]}
            for split, idx in order.items():
                write_file(folder / f"{split}.txt", b"".join(texts[i % 5] for i in idx))
                bar.advance()
    result = {"out": str(out), "profile": profile, "seed": seed, "queries": ds.n_queries,
              "documents": ds.n_docs, "features": ds.n_features, "levels": ds.n_levels}
    if json_out:
        emit_json(result)
        return
    typer.echo(f"wrote {out}/Fold1..Fold5/{{train,vali,test}}.txt: synthetic:{profile} seed {seed}, "
               f"{ds.n_queries:,} queries, {ds.n_docs:,} documents, {ds.n_features} features, {ds.n_levels} levels")


@bench_app.command("data")
def bench_data(
    queries: int = typer.Option(6000, help="Queries of the synthetic mslr10k fold (6,000: ~720,000 lines, "
                                           "an MSLR-WEB10K training fold)."),
    repeats: int = typer.Option(3, help="Timed repetitions of the cached load; the best is reported."),
    seed: int = typer.Option(0, help="Seed of the synthetic data."),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bar."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON to stdout."),
) -> None:
    """Time the text load and the cached load of a synthetic MSLR-WEB10K-sized fold."""
    from fltr_audit.engine.data.cache import cached_read
    from fltr_audit.engine.data.letor import read_letor, write_letor
    from fltr_audit.engine.data.synthetic import generate

    check_at_least({"--queries": queries, "--repeats": repeats})
    work = Path(tempfile.mkdtemp(prefix="fltr-bench-data-"))
    saved = os.environ.get("FLTR_AUDIT_CACHE")
    os.environ["FLTR_AUDIT_CACHE"] = str(work / "cache")
    try:
        with progress(3 + repeats, "bench data", quiet) as bar:
            ds = generate("mslr10k", queries, seed)
            path = work / "train.txt"
            write_letor(ds, path)
            bar.advance(description="text load")
            t = time.perf_counter()
            read_letor(path)
            text_s = time.perf_counter() - t
            bar.advance(description="first cached load (parse + store)")
            t = time.perf_counter()
            cached_read(path, read_letor)
            store_s = time.perf_counter() - t
            bar.advance(description="cached load")
            cached_s = float("inf")
            for _ in range(repeats):
                t = time.perf_counter()
                again = cached_read(path, read_letor)
                cached_s = min(cached_s, time.perf_counter() - t)
                bar.advance()
        same = bool((again.features == ds.features).all() and (again.labels == ds.labels).all())
        size_mb = path.stat().st_size / 1e6
    finally:
        if saved is None:
            os.environ.pop("FLTR_AUDIT_CACHE", None)
        else:
            os.environ["FLTR_AUDIT_CACHE"] = saved
        shutil.rmtree(work, ignore_errors=True)
    what = (f"synthetic mslr10k, {ds.n_queries:,} queries, {ds.n_docs:,} lines x {ds.n_features} features, "
            f"{size_mb:,.0f} MB")
    rows = [
        {"task": "text_load", "what": what, "seconds": text_s, "target_seconds": None},
        {"task": "first_cached_load", "what": "parse + write the cache entry", "seconds": store_s,
         "target_seconds": None},
        {"task": "cached_load", "what": f"cache hit (best of {repeats})", "seconds": cached_s,
         "target_seconds": CACHED_LOAD_TARGET_SECONDS},
    ]
    if json_out:
        emit_json({"queries": ds.n_queries, "lines": ds.n_docs, "features": ds.n_features,
                   "file_mb": size_mb, "identical": same, "results": rows})
        return
    print_table("bench data", [
        {"task": r["task"], "what": r["what"], "seconds": f"{r['seconds']:.3f}",
         "target": "" if r["target_seconds"] is None else f"<= {r['target_seconds']:g} s"} for r in rows])
    if not same:
        typer.echo("warning: the cached arrays differ from the generated ones", err=True)
