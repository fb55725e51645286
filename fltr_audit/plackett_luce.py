"""Plackett-Luce rankings: Gumbel top-k sampling and log-probabilities (DESIGN.md).

CONTRACT (filled in by the primitives work):

sample_topk(scores, valid, k, rng) -> (..., k) int64
    Positions along the last axis of a PL sample without replacement (Gumbel top-k),
    only among ``valid`` entries; -1 where fewer than k entries are valid.
topk(scores, valid, k) -> (..., k) int64
    Deterministic ranking by score (ties by position), same layout.
log_denominators(scores, ranking) -> (..., k) float64
    For each position i of ``ranking`` (-1 padded), log sum of exp(score) over the
    entries not placed before position i (among valid entries: pass the full valid set).
    Signature: log_denominators(scores, valid, ranking).
log_prob(scores, valid, ranking) -> (...) float64
    log P(ranking prefix | scores) under PL.
"""
