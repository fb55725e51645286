"""Learning-to-rank data sets: ``fltr_audit.data_info`` (queries, documents, features and labels of a
set and of each fold's splits; ``fltr-audit data info``) and ``fltr_audit.synth_data`` (a synthetic
set written in the 5-fold LETOR layout; ``fltr-audit data synth``)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from fltr_audit.base.atomic import write_file
from fltr_audit.constraints import Interval, check
from fltr_audit.engine.data.letor_write import format_letor
from fltr_audit.engine.data.load import data_info
from fltr_audit.engine.data.synthetic import PROFILES, fold_parts, generate
from fltr_audit.errors import FltrError
from fltr_audit.runs.progress import NO_PROGRESS, Progress
from fltr_audit.store.run_folder import atomic_out_dir, check_out_dir

__all__ = ["data_info", "synth_data"]


def synth_data(profile: str = "mq2008", *, out: str | Path, queries: Optional[int] = None, seed: int = 0,
               progress: Progress = NO_PROGRESS) -> dict:
    """Write ``synthetic:PROFILE`` (``queries`` of them, default the profile's own) into ``out`` as
    ``Fold1..Fold5/{train,vali,test}.txt`` (all or nothing); 20 progress steps."""
    if profile not in PROFILES:
        raise FltrError(f"--profile: unknown profile {profile!r} (choose {', '.join(PROFILES)})")
    check_out_dir(out)
    check("queries", queries, (Interval(int, 5, None), None), "five folds need five queries")
    out = Path(out)
    ds = generate(profile, queries, seed)
    parts = fold_parts(ds.n_queries)
    with atomic_out_dir(out) as tmp:
        texts = []
        for part in parts:  # each part is formatted once and reused by the five folds
            texts.append(format_letor(ds.subset(part)))
            progress.advance()
        for k in range(5):
            folder = tmp / f"Fold{k + 1}"
            folder.mkdir()
            order = {"train": [k, k + 1, k + 2], "vali": [k + 3], "test": [k + 4]}
            for split, idx in order.items():
                write_file(folder / f"{split}.txt", b"".join(texts[i % 5] for i in idx))
                progress.advance()
    return {"out": str(out), "profile": profile, "seed": seed, "queries": ds.n_queries,
              "documents": ds.n_docs, "features": ds.n_features, "levels": ds.n_levels}
