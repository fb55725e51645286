"""Claim verdicts: a defense's claimed epsilon against audited lower bounds pooled over runs.

An epsilon audit runs a distinguishing test on two neighbouring inputs and counts its errors on
an evaluation half: ``fp`` of ``n0`` outputs of input 0, ``fn`` of ``n1`` of input 1. Every
(epsilon, delta)-DP mechanism forces every test to satisfy ``FPR + e^eps FNR >= 1 - delta`` and
``FNR + e^eps FPR >= 1 - delta``, so with one-sided Clopper-Pearson upper limits of both rates
(Bonferroni over the two: each at ``1 - (1 - confidence) / 2``)

    epsilon_lb = max(ln((1 - delta - FPR_u) / FNR_u), ln((1 - delta - FNR_u) / FPR_u))

is a lower bound valid with probability ``confidence`` (as ``attacks/epsilon_bounds.py`` computes it per run).

Several runs: the bound is recomputed from the summed error counts and sizes, after orienting
every run alike: a run whose held-out half chose a test that keeps the false-negative rate small
(``small_error == "fn"``) has its two inputs relabelled (fp <-> fn, n0 <-> n1), so that every run
keeps its small error on the same side and the pooled rates do not average one run's small
error with another's large one. This is sound because both constraints hold in every run (the
relabelled run satisfies them as well: they are symmetric in the two inputs), the choice is made
on held-out data only, and the constraints are linear in the error rates: when every run's test
satisfies them, so does their trial-weighted average, which is the pooled rate the counts
estimate; a binomial bound on the pooled counts is then one bound at ``confidence`` (runs must be
independent: audits draw streams keyed by seed, fold, defense and audit kind). The maximum of per-run 95 %
bounds is not a 95 % bound (with 15 runs a true epsilon is exceeded about 30 % of the time) and
is never taken. Only distinct audits are pooled: rows with the same ``audit_key`` (the audit's
random stream: a bit-identical copy, e.g. campaign runs that differ in settings the audit does not
read) count once (``distinct_audits``; issue 37: 2 / 4 / 8 / 16 copies of a correct claim's audit
raise its false ``violated`` from 5 % to 12.5 / 21 / 30 / 39 %); rows without the column (older
stores) are pooled as they come. When a defense has several pooled audits (tests, neighbours), the strongest is
used with Bonferroni over them (each recomputed at ``1 - (1 - confidence) / m``).

A bound that rests on a zero error count grows with the number of trials, not with the
mechanism's leakage; it is flagged ``trial_limited`` and printed as the trial count's limit.

The pooled verdict is the per-run rule (``fltr_audit.privacy.claim_decision.decide``) on the
pooled counts: ``no claim`` when the claimed epsilon is infinite; ``outside scope`` when the claim
covers the aggregate (``claimed_scope == "aggregate"``) but the audit saw single messages
(``audited_scope == "message"``); else ``violated`` when the deciding bound exceeds the claim --
for a declared Gaussian law (``mu`` finite) the mu-GDP bound of the pooled mu-test counts
(``mu_fp``, ``mu_fn``: the GDP region is convex and symmetric, so pooled rates stay in it), when
the runs' normality tests pass Bonferroni over the runs, else the epsilon bound; ``consistent``
when the pooled trials had the power (0.9) to catch a mechanism at twice the claim, else
``untestable`` with the ``trials_needed`` per input (``tightness`` = bound / claim). A defense's verdict rests on its worst-case audit (``neighbours ==
"worst-case"``) where it has one; the natural audit's verdict is kept beside it
(``claim_verdict_natural``).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats
from scipy.special import ndtri

from fltr_audit.privacy.claim_decision import decide
from fltr_audit.privacy.error_bounds import clopper_pearson_upper, epsilon_lower_bound, epsilon_of_rates

POOL_BY = ("mechanism", "attack", "test", "neighbours", "threat_model", "claimed_epsilon", "claimed_delta",
           "claimed_scope", "audited_scope", "confidence")
HUGE = 1e300  # audits record an unbounded estimate as the largest float




def oriented(audits: pd.DataFrame) -> pd.DataFrame:
    """Each run's counts relabelled so that its held-out test's small error is the false positive:
    rows with ``small_error == "fn"`` get fp <-> fn and n0 <-> n1 (module docstring); rows without
    the column (older stores) are left as they are."""
    if "small_error" not in audits.columns:
        return audits
    flip = (audits["small_error"] == "fn").to_numpy()
    out = audits.copy()
    for a, b in (("fp", "fn"), ("n0", "n1"), ("fpr", "fnr")):
        if a in out.columns and b in out.columns:
            out.loc[flip, [a, b]] = audits.loc[flip, [b, a]].to_numpy()
    return out


def _counts(audits: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """Error counts and sizes of each audit: as stored, else (older rows) rebuilt from the rates
    and the trial count, with evaluation halves of ``n_trials - n_trials // 2`` each."""
    half = audits["n_trials"] - audits["n_trials"] // 2
    rebuilt = {"n0": half, "n1": half, "fp": (audits.get("fpr", np.nan) * half).round(),
               "fn": (audits.get("fnr", np.nan) * half).round()}  # rates absent: the stored counts decide
    out = audits.copy()
    missing = pd.Series(False, index=audits.index)
    for col, value in rebuilt.items():
        stored = out[col] if col in out else pd.Series(np.nan, index=out.index)
        missing |= stored.isna()
        out[col] = stored.fillna(value)
    basis = "pooled error counts" + (" (some rebuilt from fpr, fnr, n_trials)" if missing.any() else "")
    return out, basis


def audited_scope(audits: pd.DataFrame) -> pd.Series:
    """What an audit saw: the ``audited_scope`` column, else (older rows) "aggregate" for audits
    under the aggregate-only threat model and "message" otherwise."""
    tm = audits.get("threat_model", pd.Series("", index=audits.index)).astype(str)
    inferred = pd.Series(np.where(tm.str.contains("aggregate"), "aggregate", "message"), index=audits.index)
    return audits["audited_scope"].fillna(inferred) if "audited_scope" in audits.columns else inferred


def distinct_audits(audits: pd.DataFrame, by: list[str]) -> tuple[pd.DataFrame, pd.Series]:
    """The rows of ``audits`` with each ``audit_key`` once per ``by`` group (the first row kept),
    and how many copies each group lost; rows without a key (the column absent, or null) all stay."""
    if "audit_key" not in audits.columns:
        return audits, pd.Series(dtype=np.float64)
    copy = audits["audit_key"].notna() & audits.duplicated(subset=[*by, "audit_key"], keep="first")
    lost = copy.groupby([audits[c] for c in by], sort=False, dropna=False).sum()
    return audits[~copy], lost


def pooled_audits(audits: pd.DataFrame | None, keys: list[str]) -> pd.DataFrame:
    """One row per ``keys`` group (columns of ``audits``) and audit kind (:data:`POOL_BY`), over
    its distinct audits (``distinct_audits``): summed ``fp``, ``fn``, ``n0``, ``n1``, ``n_trials``,
    ``runs`` (distinct audits pooled), ``copies`` (rows with an ``audit_key`` already counted;
    NaN for rows without the column); the recomputed ``epsilon_point`` (from the pooled rates),
    ``epsilon_lb``, ``ceiling`` (bound with no error at these sizes), ``trial_limited``,
    ``claim_verdict``, ``tightness`` and the ``claim_basis`` (how runs were pooled)."""
    if audits is None or audits.empty or not {"epsilon_lb", "n_trials"} <= set(audits.columns):
        return pd.DataFrame()
    audits = audits.assign(audited_scope=audited_scope(audits))
    if "claimed_delta" not in audits:
        audits = audits.assign(claimed_delta=0.0)
    if "confidence" not in audits:
        audits = audits.assign(confidence=0.95)
    audits, basis = _counts(oriented(audits))
    basis += ", each run oriented by its held-out test" if "small_error" in audits.columns else ""
    by = [c for c in keys if c in audits.columns] + [c for c in POOL_BY if c in audits.columns]
    keyed = "audit_key" in audits.columns
    audits, lost = distinct_audits(audits, by)
    basis += ", distinct audits only (one per audit_key)" if keyed else ""
    sums = ["fp", "fn", "n0", "n1", "n_trials"] + [c for c in ("mu_fp", "mu_fn") if c in audits.columns]
    groups = audits.groupby(by, sort=False, dropna=False)
    out = groups[sums].sum().reset_index()
    out["runs"] = groups.size().to_numpy()
    out["copies"] = lost.to_numpy(dtype=np.float64) if keyed else np.nan
    for column, how in (("mu", "first"), ("gof_pvalue", "min"), ("verdict_note", "max")):
        if column in audits.columns:
            out[column] = getattr(groups[column], how)().to_numpy()
    return finish_bounds(out, basis=basis)


def finish_bounds(out: pd.DataFrame, *, basis: str = "pooled error counts", tests: int = 1) -> pd.DataFrame:
    """Bounds, ceiling, trial limit and verdict of pooled count rows (Bonferroni over ``tests``)."""
    out = out.copy()
    confidence = 1.0 - (1.0 - out["confidence"].to_numpy(dtype=np.float64)) / tests
    delta = out["claimed_delta"].fillna(0.0).to_numpy(dtype=np.float64)
    fp, fn, n0, n1 = (out[c].to_numpy(dtype=np.float64) for c in ("fp", "fn", "n0", "n1"))
    out["epsilon_point"] = epsilon_of_rates(fp / n0, fn / n1, delta)[0]
    out["epsilon_lb"], out["trial_limited"] = epsilon_lower_bound(fp, fn, n0, n1, delta, confidence)
    out["ceiling"] = epsilon_lower_bound(np.zeros_like(fp), np.zeros_like(fn), n0, n1, delta, confidence)[0]
    _decide(out, confidence, delta)
    claimed = out["claimed_epsilon"].to_numpy(dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        out["tightness"] = np.where(np.isfinite(claimed) & (claimed > 0) & (claimed < HUGE),
                                    out["epsilon_lb"] / claimed, np.nan)
    out["claim_basis"] = basis + (f", Bonferroni over {tests} audits" if tests > 1 else "")
    return out


def _decide(out: pd.DataFrame, confidence: np.ndarray, delta: np.ndarray) -> None:
    """``claim_verdict``, ``verdict_by``, ``power``, ``trials_needed`` and the pooled ``mu_lb`` of
    finished rows, in place (module docstring): ``decide`` on the pooled counts, the normality
    tests' smallest p-value times the runs (Bonferroni)."""
    n = len(out)
    column = lambda c, fill: out[c].to_numpy(dtype=np.float64) if c in out else np.full(n, fill)  # noqa: E731
    mu, mu_fp, mu_fn = column("mu", np.nan), column("mu_fp", 0.0), column("mu_fn", 0.0)
    gof = np.minimum(1.0, column("gof_pvalue", np.nan) * column("runs", 1.0))
    n0, n1 = out["n0"].to_numpy(dtype=np.float64), out["n1"].to_numpy(dtype=np.float64)
    level = 1.0 - (1.0 - confidence) / 2.0
    with np.errstate(invalid="ignore"):
        mu_lb = np.maximum(ndtri(1.0 - clopper_pearson_upper(mu_fp, n0, level))
                           - ndtri(clopper_pearson_upper(mu_fn, n1, level)), 0.0)
    out["mu_lb"] = np.where(np.isfinite(mu), mu_lb, np.nan)
    rows = []
    for i, row in enumerate(out.itertuples(index=False)):
        claimed = row.claimed_epsilon
        if claimed is None or pd.isna(claimed) or claimed >= HUGE:
            claimed = math.inf
        rows.append(decide(float(claimed), float(delta[i]), str(row.claimed_scope), str(row.audited_scope),
                           float(row.epsilon_lb), float(mu[i]), float(out["mu_lb"].iat[i]), float(gof[i]),
                           int(n0[i]), int(n1[i]), float(confidence[i])))
    out["claim_verdict"] = [d.verdict for d in rows]
    out["verdict_by"] = [d.verdict_by for d in rows]
    out["power"] = [d.power for d in rows]
    out["trials_needed"] = [d.trials_needed for d in rows]


NEIGHBOUR_ORDER = ("worst-case", "natural")
"""The audit a verdict rests on, strongest first."""


def _verdict(frame: pd.DataFrame) -> tuple[str, pd.Series, pd.Series | None]:
    """(verdict, the audit row it rests on, the strongest single-message row) of finished rows:
    ``violated`` if any in-scope audit exceeds the claim, ``consistent`` if none does,
    ``untestable`` when every in-scope audit's ceiling is at or below the claim, ``outside scope``
    when only single-message audits of an aggregate claim exist, ``no claim``."""
    claims = frame["claim_verdict"]
    in_scope = frame[claims.isin(["violated", "consistent"])]
    if (claims == "no claim").all():
        pick, verdict = frame, "no claim"
    elif not in_scope.empty:
        pick = in_scope
        verdict = "violated" if (in_scope["claim_verdict"] == "violated").any() else "consistent"
    elif (claims == "untestable").any():
        pick, verdict = frame[claims == "untestable"], "untestable"
    else:
        pick, verdict = frame, "outside scope"
    messages = frame[frame["audited_scope"] == "message"]
    return verdict, pick.loc[pick["epsilon_lb"].idxmax()], \
        messages.loc[messages["epsilon_lb"].idxmax()] if not messages.empty else None


def claim_summary(pooled: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """One claim verdict per ``keys`` group of :func:`pooled_audits` rows.

    The verdict rests on the group's worst-case audits where it has any (``claim_neighbours``
    names the neighbour kind it rests on), else on its natural ones; within one neighbour kind,
    m audits are each recomputed at ``1 - (1 - confidence) / m`` (Bonferroni) and ``_verdict``
    decides. The natural audits' verdict and bound are kept beside it; ``message_lb`` keeps
    what single messages reveal.

    Columns: ``keys``, ``claim_verdict``, ``claim_neighbours``, ``claimed_epsilon``,
    ``claimed_delta``, ``claimed_scope``, ``audited_scope``, ``audit_attack``, ``epsilon_lb``,
    ``epsilon_point``, ``ceiling``, ``trial_limited``, ``n_trials``, ``runs``, ``copies``, ``tightness``,
    ``trials_needed`` (per input, for an ``untestable`` verdict), ``claim_verdict_natural``,
    ``epsilon_lb_natural``, ``trial_limited_natural``, ``n_trials_natural``, ``message_lb``,
    ``message_trial_limited``, ``message_n_trials``, ``claim_basis``.
    """
    if pooled.empty:
        return pd.DataFrame()
    on = [k for k in keys if k in pooled.columns]
    rows = []
    for group, frame in pooled.groupby(on, sort=False, dropna=False) if on else [((), pooled)]:
        kinds = frame["neighbours"].fillna("audited") if "neighbours" in frame else pd.Series("audited", frame.index)
        per = {}
        for kind in dict.fromkeys(kinds):
            part = frame[kinds == kind]
            per[kind] = _verdict(finish_bounds(part, basis=part["claim_basis"].iloc[0], tests=len(part)))
        main = next((k for k in NEIGHBOUR_ORDER if k in per), next(iter(per)))
        verdict, top, msg = per[main]
        natural = per.get("natural") if main != "natural" else None
        needed = top.get("trials_needed", math.nan) if verdict == "untestable" else math.nan
        rows.append(dict(zip(on, group if isinstance(group, tuple) else (group,)), claim_verdict=verdict,
                         claim_neighbours=main,
                         **{c: top[c] for c in ("claimed_epsilon", "claimed_delta", "claimed_scope", "audited_scope",
                                                "epsilon_lb", "epsilon_point", "ceiling", "trial_limited",
                                                "n_trials", "runs", "tightness", "claim_basis")},
                         verdict_by=top.get("verdict_by"), mu=top.get("mu", math.nan), mu_lb=top.get("mu_lb", math.nan),
                         power=top.get("power", math.nan), verdict_note=top.get("verdict_note") or "",
                         copies=top.get("copies", math.nan),
                         audit_attack=top.get("attack"), trials_needed=needed,
                         claim_verdict_natural=natural[0] if natural else None,
                         epsilon_lb_natural=natural[1]["epsilon_lb"] if natural else math.nan,
                         trial_limited_natural=bool(natural[1]["trial_limited"]) if natural else False,
                         n_trials_natural=natural[1]["n_trials"] if natural else math.nan,
                         message_lb=msg["epsilon_lb"] if msg is not None else math.nan,
                         message_trial_limited=bool(msg["trial_limited"]) if msg is not None else False,
                         message_n_trials=msg["n_trials"] if msg is not None else math.nan))
    return pd.DataFrame(rows)


def bound_text(lb, trial_limited, n_trials) -> str:
    """``ε ≥ 0.08``, or ``ε ≥ 7.21 (limit of 10,000 trials)`` when the trial count sets it."""
    if lb is None or pd.isna(lb):
        return "ε not audited"
    text = f"ε ≥ {lb:.2f}" if lb < HUGE else "ε ≥ inf"
    if trial_limited:
        text += f" (limit of {int(n_trials):,} trials)"
    return text


def pooled_text(row) -> str:
    """``, 4 distinct audits pooled (8 copies counted once)`` for rows keyed by ``audit_key``
    (``copies`` not NaN), ``, 12 runs pooled`` for older rows; empty for one audit."""
    runs = int(row["runs"]) if pd.notna(row.get("runs")) else 1
    copies = row.get("copies", math.nan)
    if copies is None or pd.isna(copies):
        return f", {runs} runs pooled" if runs > 1 else ""
    counted = f" ({int(copies)} cop{'y' if int(copies) == 1 else 'ies'} counted once)" if copies > 0 else ""
    return f", {runs} distinct audit{'s' if runs > 1 else ''} pooled{counted}" if runs > 1 or copies > 0 else ""


def claim_text(row) -> str:
    """The claim verdict of one :func:`claim_summary` row in words."""
    verdict = row.get("claim_verdict")
    if verdict is None or pd.isna(verdict):
        return ""
    shown = pd.notna(row.get("claimed_scope")) and str(row["claimed_scope"]) not in ("", "none")
    scope = f" (scope: {row['claimed_scope']})" if shown else ""
    audited = bound_text(row["epsilon_lb"], row["trial_limited"], row["n_trials"])
    on = "the aggregate" if row.get("audited_scope") == "aggregate" else "single messages"
    neighbours = row.get("claim_neighbours")
    if isinstance(neighbours, str) and neighbours != "audited":
        on += f" with {neighbours} neighbours"
    pooled = pooled_text(row)
    natural = ""
    if isinstance(row.get("claim_verdict_natural"), str):
        natural = (f"; natural neighbours: {row['claim_verdict_natural']}, "
                   f"{bound_text(row['epsilon_lb_natural'], row['trial_limited_natural'], row['n_trials_natural'])}")
    if verdict == "no claim":
        return f"No ε claimed{scope}; audited on {on}: {audited}{pooled}"
    claim = f"Claimed ε {row['claimed_epsilon']:.2f}{scope}"
    if verdict == "outside scope":
        reveal = bound_text(row["message_lb"], row["message_trial_limited"], row["message_n_trials"])
        return (f"{claim}: outside the audit's scope — the claim covers the aggregate, the audit saw "
                f"single messages, which reveal {reveal}{pooled}")
    if row.get("verdict_by") == "mu-GDP":
        audited = f"μ ≥ {row['mu_lb']:.2f} against the claim's μ {row['mu']:.2f} (μ-GDP test of the declared " \
                  f"Gaussian law), beside {audited}"
    note = f" — {row['verdict_note']}" if isinstance(row.get("verdict_note"), str) and row["verdict_note"] else ""
    if verdict == "untestable":
        needed = f"; about {int(row['trials_needed']):,} trials per input would test it" \
            if pd.notna(row.get("trials_needed")) else ""
        power = f" (power {row['power']:.2f} < 0.9 to catch twice the claim)" if pd.notna(row.get("power")) else ""
        return (f"{claim}: untestable — {int(row['n_trials']):,} trials on {on} cannot show it{power}, their "
                f"ceiling ε ≤ {row['ceiling']:.2f}{needed}{pooled}{natural}{note}")
    if verdict == "violated":
        return f"{claim}: violated, audited on {on}: {audited}{pooled}{natural}{note}"
    return (f"{claim}: consistent, audited on {on}: {audited} (tightness {row['tightness']:.2f}){pooled}{natural}"
            f"{note}")


def dp_tradeoff(fpr, epsilon, delta=0.0) -> np.ndarray:
    """Smallest FNR an (epsilon, delta)-DP mechanism allows at ``fpr`` (Kairouz et al. 2015;
    Dong et al. 2022, eq. 5): ``max(0, 1 - delta - e^eps FPR, e^-eps (1 - delta - FPR))``."""
    fpr = np.asarray(fpr, dtype=np.float64)
    e = np.exp(np.minimum(epsilon, 700.0))
    return np.maximum.reduce([np.zeros_like(fpr), 1.0 - delta - e * fpr, (1.0 - delta - fpr) / e])


def gdp_tradeoff(fpr, mu) -> np.ndarray:
    """Smallest FNR a mu-GDP mechanism allows at ``fpr`` (Dong et al. 2022, eq. 6):
    ``Phi(Phi^-1(1 - FPR) - mu)``."""
    return stats.norm.cdf(stats.norm.ppf(1.0 - np.asarray(fpr, dtype=np.float64)) - mu)
