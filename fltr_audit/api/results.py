"""``AuditResult``: what ``fltr_audit.audit`` and ``fltr_audit.audit_campaign`` return -- the
inputs, the campaign and every result table, with the verdicts, the summary the ``audit``
command prints, and the report (statsmodels-style results object)."""

from __future__ import annotations

import io
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import pandas as pd
from rich.console import Console

from fltr_audit.api import verdict_tables
from fltr_audit.base.atomic import write_files
from fltr_audit.spec.campaign import CampaignSpec
from reports.attack_tables import attack_table, manipulation_table
from reports.compare import MIN_EFFECT, verdicts
from reports.leakage import roc_rows

UNSCORED_COLUMNS = ["run_key", "defense", "click_model", "attack", "reason", "cohorts_lost", "queries_left_out"]
"""The columns of ``AuditResult.unscored``: which run and attack scored no list, and why."""
NO_COHORT, NO_SCORABLE_LIST = "no probe cohort", "no scorable list"
"""The reasons of ``AuditResult.unscored``."""


@dataclass(frozen=True)
class AuditResult:
    """The result of :func:`fltr_audit.audit` or :func:`fltr_audit.audit_campaign`: its inputs and the result tables.

    Attributes
    ----------
    inputs : mapping
        The keywords as resolved, defaults included (for ``campaign``: the validated spec).
    spec : mapping
        The campaign spec the runs were expanded from (``fltr_audit.runs.campaign``).
    tables : mapping of str to DataFrame
        Every table of the runs (``docs/store.md``): ``attacks``, ``per_query``, ``utility``,
        ``curves``, ``audits``, ``epsilon``.
    """

    inputs: Mapping[str, Any]
    spec: CampaignSpec
    tables: Mapping[str, pd.DataFrame] = field(repr=False)

    def _table(self, name: str) -> pd.DataFrame:
        return self.tables.get(name, pd.DataFrame())

    @property
    def attacks(self) -> pd.DataFrame:
        """One row per attack x click model x defense x threat model: what ``audit --json``
        prints under ``attacks`` (macro averages over the probed lists)."""
        return attack_table(self.tables) if "attacks" in self.tables else pd.DataFrame()

    @property
    def unscored(self) -> pd.DataFrame:
        """The attack rows that scored no list (``n_queries`` 0), which ``attacks`` leaves out, with
        their ``reason``: ``NO_COHORT`` when the probe formed no cohort (every cohort lost to
        dropouts, or the probed split too small for the aggregator's cohort: ``cohorts_lost``,
        ``queries_left_out``), ``NO_SCORABLE_LIST`` when none of its lists was scorable (too few
        shown documents, no click, every one clicked)."""
        rows = self._table("attacks")
        rows = rows[rows["n_queries"] == 0] if "n_queries" in rows else rows
        probed = rows["threat_model"].notna() if "threat_model" in rows else pd.Series(False, index=rows.index)
        rows = rows.assign(reason=probed.map({True: NO_SCORABLE_LIST, False: NO_COHORT}))
        return rows[[c for c in UNSCORED_COLUMNS if c in rows.columns]]

    @property
    def utility(self) -> pd.DataFrame:
        """Final offline nDCG of each defended model and its change against no defense."""
        return self._table("utility")

    @property
    def audits(self) -> pd.DataFrame:
        """The empirical epsilon audits of the defenses' claims."""
        return self._table("audits")

    @property
    def verdicts(self) -> pd.DataFrame:
        """Per defense and context: the leakage verdict (against the counterfactual baseline) and
        the claim verdict (from the epsilon audits), as ``reports.compare.verdicts``."""
        if "attacks" not in self.tables:
            return pd.DataFrame()
        return verdicts(dict(self.tables), min_effect=self.min_effect)

    @property
    def roc(self) -> pd.DataFrame:
        """ROC points per attack x click model x defense: the runs' ``roc`` table (FPR, TPR per
        curve, real and counterfactual clicks) where they stored one; else the per-run pooled ROC
        curves stored with the attack rows (TPR at 61 log-spaced FPRs from 0.1 % to 100 %,
        ``reports.leakage.roc_rows``; what ``audit --json`` prints under ``roc``); else the TPR at
        FPR 0.1 % and 1 % of the attack rows (``curve`` "real")."""
        if not self._table("roc").empty:
            return self._table("roc")
        stored = roc_rows(self.tables.get("attacks"))
        if not stored.empty:
            return stored
        attacks = self.attacks
        points = [(0.001, "tpr_at_fpr_0_001"), (0.01, "tpr_at_fpr_0_01")]
        if attacks.empty or not any(col in attacks for _, col in points):
            return pd.DataFrame(columns=["attack", "click_model", "defense", "curve", "fpr", "tpr"])
        keys = ["attack", "click_model", "defense"]
        return pd.concat([attacks[keys].assign(curve="real", fpr=fpr, tpr=attacks[col])
                          for fpr, col in points if col in attacks], ignore_index=True)

    def summary(self, file: Any = None) -> str:
        """The two verdicts per defense -- leakage verdict and claim verdict, nDCG beside them --
        as the ``audit`` command prints them; printed (to ``file``, default stdout) and returned."""
        buffer = io.StringIO()
        verdicts = self.verdicts
        if verdicts.empty:
            text = "no verdicts: the runs have no attack rows"
        else:
            verdict_tables.print_verdicts(verdicts, self.min_effect,
                                          console=Console(file=buffer, width=verdict_tables.WIDTH, force_jupyter=False,
                                                          color_system=None))
            text = buffer.getvalue().rstrip("\n")
        print(text, file=file or sys.stdout)
        return text

    @property
    def min_effect(self) -> float:
        """The smallest leak the leakage verdicts were asked to find (``min_effect``; default 0.05)."""
        value = self.inputs.get("min_effect") if isinstance(self.inputs, Mapping) else None
        return MIN_EFFECT if value is None else float(value)

    @property
    def manipulation(self) -> pd.DataFrame:
        """What a malicious server's manipulation costs the other members (empty unless ``server-malicious``)."""
        return manipulation_table(self.tables) if "attacks" in self.tables else pd.DataFrame()

    def as_json(self) -> dict[str, Any]:
        """What ``fltr-audit audit --json`` prints as its result."""
        audits = self.audits.drop(columns=[c for c in ("verdict",) if c in self.audits.columns])  # claim_verdict
        return {"attacks": self.attacks.to_dict(orient="records"),
                "roc": roc_rows(self.tables.get("attacks")).to_dict(orient="records"),
                "verdicts": self.verdicts.to_dict(orient="records"),
                "manipulation": self.manipulation.to_dict(orient="records"),
                "audits": audits.to_dict(orient="records"),
                "utility": self.utility.to_dict(orient="records"),
                "unscored": self.unscored.to_dict(orient="records"),
                "zero_division": "0 (precision of a list with no positive guess, recall of a list without clicks)"}

    def report(self, path: str | Path, title: str = "fltr-audit privacy audit") -> Path:
        """Write the audit report (HTML, Markdown, plots, CSVs) into the folder ``path``
        (atomically, file by file); return the HTML file."""
        # start-up: matplotlib and the plots (0.3 s) load for a report, not for every audit
        from reports.render import render_report

        files = render_report(dict(self.tables), title=title, min_effect=self.min_effect,
                              methods={"api": f"fltr_audit.audit({_call_text(self.inputs)})"})
        write_files(Path(path), files)
        return Path(path) / "report.html"


def _call_text(inputs: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in inputs.items() if v is not None)
