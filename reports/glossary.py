"""The words fltr-audit prints, defined once: ``fltr-audit explain TERM`` prints an entry, the docs'
glossary page (``docs/concepts/glossary.md``) is generated from this list, and terminal output
points here once per run."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Term:
    """One printed word: its name as printed, other spellings, the definition and the page that
    explains it at length (relative to ``docs/``)."""

    name: str
    text: str
    see: str
    aliases: tuple[str, ...] = ()


TERMS = (
    Term("leakage", "An attack's AUC against the user's real clicks minus its AUC against counterfactual clicks "
         "(AUC real - counterfactual): what the message reveals beyond what the attack could guess without it. "
         "0 means nothing learned; it is never F1 against a random guesser.", "concepts/leakage.md",
         ("leakage (auc)", "auc real - counterfactual")),
    Term("counterfactual", "Clicks redrawn from the same click model on the same shown list, scored with the same "
         "message: what an attack would guess from the list, the positions and the click model alone. 'AUC cf.' is "
         "the attack's AUC against them; the dashed ROC curves are drawn against them.", "concepts/leakage.md",
         ("auc cf.", "auc counterfactual", "cf", "dashed curve")),
    Term("below chance", "A ROC curve under the dotted diagonal: the attack ranks clicked documents below "
         "unclicked ones more often than a coin would. Under pure noise (the noise-only control) an attack can be "
         "misled systematically, by the noise or by the list positions; its counterfactual curve dips alike, so "
         "the leakage (the gap between the two) stays near 0.", "concepts/leakage.md",
         ("below the diagonal", "pure-noise control", "noise-only control")),
    Term("leaks", "Leakage verdict: a one-sided test of zero leakage rejects at 0.05 for at least one informed "
         "attack, Holm-corrected over the defense's attacks in that click model.", "concepts/verdicts.md"),
    Term("no measurable leakage", "Leakage verdict: every informed attack's simultaneous 95 % upper bound lies "
         "below the minimum effect (--min-effect, default 0.05 AUC): a leak that large would have been seen. "
         "Smaller leaks are not ruled out.", "concepts/verdicts.md"),
    Term("inconclusive", "Leakage verdict: neither 'leaks' nor 'no measurable leakage': too few lists to tell "
         "(see ±detect). Plan more with --min-effect and --power, or raise --probe-lists.", "concepts/verdicts.md"),
    Term("±detect", "The half-width of the deciding attack's interval: the smallest leak (AUC) these lists could "
         "tell from zero. Below the minimum effect, the audit could decide; above it, it could not.",
         "concepts/verdicts.md", ("detect", "lists ±detect", "detectable", "detectable effect")),
    Term("sim. CI", "An interval simultaneous over the informed attacks (Bonferroni): it covers all of them at "
         "once, so printing the attack that decided does not overstate it.", "concepts/verdicts.md",
         ("simultaneous", "leakage [sim. ci]", "simultaneous ci")),
    Term("minimum effect", "The smallest leak (AUC) worth finding (--min-effect, default 0.05): 'no measurable "
         "leakage' needs every upper bound below it, and the lists are planned to find a leak of that size.",
         "concepts/verdicts.md", ("min effect", "min-effect", "min_effect")),
    Term("plan", "The lists probed per click model, computed from the minimum effect and the power (--power, "
         "default 0.9) so that the leakage verdict can come out either way; printed with its expected time before "
         "an audit starts.", "concepts/verdicts.md", ("power", "planned lists", "lists")),
    Term("informed attack", "An attack that reads the message. Only informed attacks decide a verdict.",
         "concepts/verdicts.md", ("informed",)),
    Term("reference attack", "A baseline that does not read the message (random3, prior, ...), marked (ref.): its "
         "leakage should straddle 0 and it never decides a verdict.", "concepts/verdicts.md",
         ("ref.", "reference", "(ref.)")),
    Term("violated", "Claim verdict: the audited 95 % lower bound on ε exceeds the claimed ε.", "concepts/claims.md"),
    Term("consistent", "Claim verdict: the audited bound stays below the claim (see lb/claim).", "concepts/claims.md"),
    Term("untestable", "Claim verdict: the claim is at or above the largest ε these trials could show; the "
         "output says how many trials would test it (--trials auto sizes them).", "concepts/claims.md"),
    Term("outside scope", "Claim verdict: the claim covers what the audit did not observe (a claim about the "
         "aggregate, audited on single messages); what single messages reveal is shown beside it.",
         "concepts/claims.md", ("outside the audit's scope",)),
    Term("no claim", "The defense states no ε; the audited bound is shown for information.", "concepts/claims.md"),
    Term("lb/claim", "Tightness: the audited lower bound divided by the claimed ε. Near 1: the audit came close "
         "to the claim; near 0: the claim may be loose, or the test weak.", "concepts/claims.md",
         ("tightness", "lb / claim")),
    Term("limit of N trials", "'ε ≥ 7.21 (limit of 10,000 trials)': the bound rests on zero errors, so it is the "
         "largest bound that many trials can show, not a measurement of the mechanism; more trials would raise "
         "it.", "concepts/claims.md", ("limit of 10,000 trials", "trial limit", "trial ceiling", "ceiling")),
    Term("worst-case", "The claim audit on crafted neighbouring inputs beyond the clip the defense declares, "
         "scored by the test of the mechanism it declares: the audit a claim verdict rests on.",
         "concepts/claims.md", ("worst-case neighbours",)),
    Term("natural", "The claim audit on two real users' messages (with and without one click): how much a "
         "realistic pair is exposed, shown beside the verdict, never the verdict.", "concepts/claims.md",
         ("natural neighbours",)),
    Term("natural: outside scope", "The natural audit saw single messages while the claim covers the aggregate: "
         "its bound says what one message reveals, not whether the claim is met.", "concepts/claims.md"),
    Term("runs pooled", "Claim audits of several runs combined by summing their error counts (each run oriented "
         "by its held-out test), never by taking the largest per-run bound; seeds and folds only, never a swept "
         "setting.", "concepts/claims.md", ("audited, runs pooled", "pooled")),
    Term("swept", "A setting a campaign varies across its runs (probe cohort, clients, rounds, a defense "
         "parameter, ...). Verdicts pool over seeds and folds only; each swept value keeps its own row, and the "
         "report draws the verdict's statistic against it (compare --pool AXIS pools on request).",
         "commands/campaign.md", ("sweep", "swept axis", "swept setting")),
    Term("server (aggregate only)", "The threat model behind secure aggregation: the server sees the cohort's "
         "aggregate, not each message; attacks read the aggregate and are scored against the cohort's clicks.",
         "concepts/threat-models.md", ("aggregate only",)),
    Term("server-blind", "A server that sees the messages and the global model but not which documents were "
         "shown (e.g. a Flower app that records no shown lists): no attack can be scored against clicks there.",
         "concepts/threat-models.md", ("server blind",)),
    Term("ΔnDCG@10", "The change in the trained ranker's nDCG@10 against no defense: what the defense costs.",
         "concepts/metrics.md", ("delta ndcg", "ndcg10_delta", "dndcg@10")),
)
"""Every defined word, in the order the glossary page lists them."""


def _key(text: str) -> str:
    return re.sub(r"[^a-z0-9/ε:@.]+", " ", text.lower().replace("±", "")).strip()


def lookup(text: str) -> Term | None:
    """The term ``text`` names (its name or an alias, case, ``±`` and punctuation ignored); None if none."""
    wanted = _key(text)
    for term in TERMS:
        if wanted in {_key(term.name), *(_key(a) for a in term.aliases)}:
            return term
    if re.fullmatch(r"limit of [0-9, ]+ trials", wanted):
        return lookup("limit of N trials")
    return None


def glossary_markdown() -> str:
    """The glossary page's table: term, definition, where to read more."""
    rows = ["| term | means | more |", "|---|---|---|"]
    for term in TERMS:
        page = term.see.split("/")[-1].removesuffix(".md").replace("-", " ")
        link = f"../{term.see}" if not term.see.startswith("concepts/") else term.see.split("/")[-1]
        rows.append(f"| <span id=\"{anchor(term.name)}\"></span>`{term.name}` | {term.text} | [{page}]({link}) |")
    return "\n".join(rows)


def anchor(name: str) -> str:
    """The page anchor of a term (``±detect`` -> ``detect``)."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower().replace("ε", "epsilon").replace("δ", "delta")).strip("-") or "term"
