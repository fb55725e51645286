"""``fltr_audit.compare`` and ``fltr_audit.report``: what a results store shows -- the privacy-utility
table with both verdicts (``fltr-audit compare``) and the audit report (``fltr-audit report``)."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import pandas as pd

from fltr_audit.base.atomic import write_files
from fltr_audit.constraints import OPEN_UNIT, Options, ParameterError, check
from fltr_audit.errors import FltrError
from fltr_audit.store.results import load
from reports.compare import as_references, compare as compare_tables
from reports.leakage import MIN_EFFECT
from reports.sweeps import swept_axes

AVERAGING = ("macro", "micro")
GROUPABLE = ("defense", "click_model", "algo", "data", "threat_model", "probe_cohort", "fold", "seed")


def min_effect_of(value: float | None) -> float:
    """``min_effect`` (None: ``reports.leakage.MIN_EFFECT``), checked to lie in (0, 1)."""
    value = MIN_EFFECT if value is None else value
    check("min_effect", value, OPEN_UNIT, "an AUC difference")
    return float(value)


def compare(store: str | Path, by: Sequence[str] = ("defense",), averaging: str = "macro",
            min_effect: float | None = None, pool: Sequence[str] = ()) -> pd.DataFrame:
    """Per group (``by``: attack-table columns, and every setting the campaign sweeps unless named
    in ``pool``: ``reports.sweeps``) and attack: AUC against real and counterfactual clicks,
    leakage with a 95 % CI over lists, the leakage verdict and the claim verdict (epsilon audits
    pooled over seeds and folds), precision/recall/F1, and the nDCG@10 change against no defense."""
    min_effect = min_effect_of(min_effect)
    check("averaging", averaging, (Options(AVERAGING),))
    tables = load(store)
    attacks = tables["attacks"]
    if attacks.empty:
        raise FltrError(f"--store {store}: no attack results ({int((tables['runs']['status'] == 'done').sum())} done runs)")
    for key in by:
        if key not in attacks.columns or key in ("attack", "f1", "precision", "recall"):
            raise ParameterError("by", f"unknown column {key!r} (choose from {', '.join(GROUPABLE)})")
    swept = swept_axes(tables["runs"])
    for axis in pool:
        if axis not in swept:
            raise ParameterError("pool", f"{axis!r} is not swept by these runs"
                                         f"{' (swept: ' + ', '.join(swept) + ')' if swept else ''}")
    return as_references(compare_tables(tables, by=list(by), averaging=averaging, min_effect=min_effect,
                                        pool=tuple(pool)))


def report(store: str | Path, out: str | Path, title: str = "fltr-audit privacy audit",
           min_effect: float | None = None, force: bool = False) -> Path:
    """Write ``report.html`` (self-contained), ``report.md``, the plots and CSVs of a results store
    into the folder ``out`` (atomically, file by file); return the HTML file."""
    min_effect = min_effect_of(min_effect)
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise FltrError(f"--out {out}: exists and is not a directory")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise FltrError(f"--out {out}: folder is not empty (use --force to write into it)")
    tables = load(store)
    if tables["runs"].empty:
        raise FltrError(f"--store {store}: no runs recorded")
    # start-up: matplotlib and the plots (0.3 s) load for a report, not for `compare`
    from reports.render import render_report

    files = render_report(tables, title=title, methods={"Store": str(store)}, min_effect=min_effect)
    try:
        write_files(out, files)
    except OSError as exc:
        raise FltrError(f"--out {out}: {exc.strerror or exc}") from None
    return out / "report.html"
