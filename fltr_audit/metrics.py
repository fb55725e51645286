"""Ranking metrics, vectorized over queries (DESIGN.md, Conventions: nDCG rule).

CONTRACT (filled in by the primitives work):

dcg(ranked_labels, k=10) -> (...)       gain 2^rel - 1, discount log2(rank + 1); -1 = empty slot
ideal_dcg(dataset, k=10) -> (n_queries,)  over all judged documents of each query
ndcg_at_k(scores, dataset, k=10, empty="skip") -> (n_queries,)
    rank every query of ``dataset`` by ``scores`` (n_docs,); NaN for queries with no
    relevant document when empty="skip", 0 when empty="zero".
mean_ndcg(scores, dataset, k=10, empty="skip") -> float
ndcg_of_shown(shown, dataset, k=10) -> (...)   nDCG@k of shown lists (row indices, -1 pad)
max_rr(clicks) -> (...)                 reciprocal rank of the topmost click, 0 if none
online_performance(ndcg_sequence, gamma=0.9995) -> float   FPDGD Eq. 17
"""
