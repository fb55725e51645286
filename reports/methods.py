"""The report's methods section and provenance: conventions, statistics, both verdict rules in
plain words, the runs' configurations and the package versions.
"""

from __future__ import annotations

import json
from importlib import metadata

import pandas as pd

from reports.tables import BAYES

REPORT_PACKAGES = ("fltr-audit", "numpy", "scipy", "pandas", "statsmodels", "scikit-learn",
                   "matplotlib", "jinja2")
ZERO_DIVISION = {
    "0": "Policy \"0\": a query where an attack guesses no click has precision 0, a query "
         "without clicks has recall 0, F1 is 0 when precision + recall is 0.",
    "skip": "Policy \"skip\": a query where a metric is undefined (no guess, no click) is left "
            "out of that metric's macro mean.",
}


BAYES_METHOD = ("bayes: the Bayes posterior of each shown list's clicks given the message. Every click vector "
                "the click model allows (FedIPS: every count matrix of the client's logged clicks) is replayed "
                "through the client's local step and weighed by the defense's noise density times a prior; "
                "the score is the posterior log-odds of a click, the guess the clicks with posterior above "
                "0.5. Its prior is the click model on the documents' labels, which also predicts the "
                "counterfactual clicks: it is the AUC ceiling of passive attacks under the click and noise "
                "model it assumes, not a ceiling on leakage. bayes-uniform: the same posterior under a "
                "uniform prior (what the message alone tells). -approx: a search (several lists per message "
                "beyond 2^14 joint click vectors: OLSR-ranked prefixes, then coordinate ascent) or a replay "
                "in one canonical click order (FedIPS).")


def default_methods(min_effect: float) -> dict[str, str]:
    """The fixed methods entries (name -> text)."""
    return {
        "nDCG": "nDCG@10 with gain 2^rel - 1 and discount log2(rank + 1); the ideal DCG is taken "
                "over all judged documents of the query; queries without any relevant document "
                "are left out of the mean.",
        "Baseline": "Every attack gives each shown document a score (higher: more likely clicked). "
                    "Its AUC is measured against the clicks the user really made and, for the same "
                    "list and the same intercepted message, against clicks redrawn from the same "
                    "click model (K independent draws, averaged): the counterfactual. What an attack "
                    "could guess without the message (the click rate, which documents are relevant, "
                    "the list positions) predicts counterfactual clicks as well as real ones, so only "
                    "what the message reveals about this user's clicks makes the real AUC higher. "
                    "Leakage = real - counterfactual AUC, per list, averaged over lists pooled over "
                    "seeds and folds with a 95 % Student-t interval (per run when per-list results "
                    "are not stored). Normalized leakage divides by 1 - counterfactual AUC, the room "
                    "left above the counterfactual, so that click models stay comparable. Reference "
                    "attacks (random guessing, guess-all, prior) do not read the message and show "
                    "leakage near 0; they are reported, never used as the baseline.",
        "Leakage verdict": "A defense leaks when, for at least one informed attack, a one-sided "
                           "t-test rejects zero leakage at 0.05 after Holm's correction over that "
                           "defense's informed attacks. It shows no measurable leakage when the upper "
                           "end of every informed attack's 95 % interval is below the minimum effect "
                           f"({min_effect:g} AUC): a leak that large would have been seen. Otherwise "
                           "the verdict is inconclusive (too few lists, or a leak smaller than the "
                           "interval can resolve); the sentences say how large a leak could have been "
                           "missed. Adding a reference attack cannot change a verdict.",
        "Claim verdict": "A defense's claimed epsilon is set against an audited lower bound: a "
                         "distinguishing test on two neighbouring inputs; its false-positive and "
                         "false-negative counts give, through one-sided Clopper-Pearson limits "
                         "(Bonferroni over the two rates), a bound valid with 95 % probability. "
                         "The verdict rests on worst-case neighbours (inputs crafted beyond the clip "
                         "the defense declares, scored by the test of the mechanism it declares, or a "
                         "learned test when it declares none); natural neighbours (a real message with "
                         "and without one click) are shown beside it. Runs are pooled by summing the "
                         "error counts after orienting every run by the error its held-out test keeps "
                         "small (the DP constraints FPR + e^eps FNR >= 1 - delta hold both ways round "
                         "and are linear, so averaged error rates of valid tests satisfy them too; each "
                         "audit draws its own noise, keyed by seed, fold, defense and kind); the maximum "
                         "of per-run bounds is never taken, and several audits of one kind are "
                         "Bonferroni-corrected. violated: the bound exceeds the claim; untestable: the "
                         "claim is at or above the largest bound the trials can show (the trials that "
                         "would test it are named); consistent: neither (tightness = bound / claim); "
                         "outside scope: the claim covers the aggregate, the audit saw single messages "
                         "(what single messages reveal is shown); no claim: no finite epsilon claimed. "
                         "A bound that rests on zero errors is the limit of the trial count, printed "
                         "as such, not a measurement.",
        "Statistics": "Precision, recall, F1 and AUC: means over seeds and folds with two-sided 95 % "
                      "Student-t intervals. F1 is compared with the same attack under defense none by "
                      "Welch's t-test, Bonferroni-corrected (statsmodels multipletests); F1 depends "
                      "on how many documents an attack guesses and is not a leakage measure.",
    }


def methods(tables: dict[str, pd.DataFrame], extra: dict | None, min_effect: float) -> list[tuple[str, str]]:
    """The methods section: the fixed entries, the data, zero-division policy and seeds of these
    results, then ``extra`` (name -> text, overriding)."""
    attacks = tables.get("attacks", pd.DataFrame())
    utility = tables.get("utility", pd.DataFrame())
    runs = tables.get("runs", pd.DataFrame())
    items = default_methods(min_effect)
    data = [f"{d}" for d in pd.concat([attacks.get("data", pd.Series(dtype=object)),
                                       utility.get("data", pd.Series(dtype=object))]).dropna().unique()]
    folds = sorted({str(f) for f in attacks.get("fold", pd.Series(dtype=object)).dropna().unique()})
    if data:
        items["Data"] = f"{', '.join(data)}" + (f"; folds {', '.join(folds)}" if folds else "")
    if attacks.get("attack", pd.Series(dtype=object)).isin(BAYES).any():
        items["Bayes attacks"] = BAYES_METHOD
    zd = sorted({str(z) for z in attacks.get("zero_division", pd.Series(dtype=object)).dropna()}) or ["0"]
    items["Zero division"] = " ".join(f"{ZERO_DIVISION.get(z, f'policy {z!r} (as recorded)')}" for z in zd) + (
        " Macro averaging: mean over queries (as Pham); micro: pooled counts.")
    seeds = sorted({int(s) for s in runs.get("seed", pd.Series(dtype=float)).dropna()})
    if seeds:
        items["Seeds"] = ", ".join(map(str, seeds))
    items.update({str(k): str(v) for k, v in (extra or {}).items()})
    return list(items.items())


def versions(runs: pd.DataFrame) -> list[tuple[str, str]]:
    seen: dict[str, set[str]] = {}
    for text in runs.get("env", pd.Series(dtype=object)).dropna():
        try:
            env = json.loads(text)
        except ValueError:
            continue
        for k, v in (env.items() if isinstance(env, dict) else []):
            if isinstance(v, (str, int, float)):
                seen.setdefault(str(k), set()).add(str(v))
    rows = [(f"{k} (runs)", ", ".join(sorted(v))) for k, v in sorted(seen.items())]
    for pkg in REPORT_PACKAGES:
        try:
            rows.append((f"{pkg} (report)", metadata.version(pkg)))
        except metadata.PackageNotFoundError:
            pass
    return rows


def configuration(runs: pd.DataFrame) -> list[dict]:
    """The runs' stored configurations, grouped by their set of keys (training runs, an
    epsilon table, ...): per group a ``title`` and ``(key, value)`` rows, the value shown
    once when the group's runs agree, else every value joined by ``|``."""
    groups: dict[tuple, list[dict]] = {}
    for text in runs.get("config", pd.Series(dtype=object)).dropna():
        try:
            config = json.loads(text)
        except ValueError:
            continue
        if isinstance(config, dict):
            groups.setdefault(tuple(sorted(map(str, config))), []).append(config)
    out = []
    for configs in (c for key, c in groups.items() if key):
        rows = []
        for k in configs[0]:
            shown = list(dict.fromkeys(v if isinstance(v, str) else json.dumps(v, sort_keys=True)
                                       for v in (c[k] for c in configs)))
            rows.append((str(k), " | ".join(shown)))
        kind = f" ({configs[0]['kind']})" if "kind" in configs[0] else ""
        out.append({"title": f"{len(configs)} run{'s' if len(configs) > 1 else ''}{kind}", "rows": rows})
    return out
