"""Rankers that score documents under per-client parameter batches (DESIGN.md, Ranker).

CONTRACT (filled in by the primitives work; signatures are fixed, other modules rely on them):

Parameters are flat float64 vectors. ``params`` is either (P,) -- one model -- or (n, P) --
one model per client. ``X`` holds feature rows (float32): with (P,) params any shape
(..., F); with (n, P) params shape (n, ..., F), the leading axis matching the clients.

class LinearRanker(n_features)          # f(x) = w . x, no bias, P = F
class MLPRanker(n_features, hidden=10)   # one hidden layer of ReLU units (FOLtR-ES)
    name: str                            # "linear" | "mlp"
    n_features: int
    n_params: int
    init_params(rng=None) -> (P,)        # zeros for linear; documented choice for MLP
    score(params, X) -> ndarray          # X.shape[:-1]
    vjp(params, X, coef) -> ndarray      # sum over documents of coef * d f(x)/d params:
                                         # coef has X.shape[:-1]; returns (P,) or (n, P)
    grad(params, X) -> ndarray           # per-document gradient, X.shape[:-1] + (P,)
make_ranker(name, n_features) -> ranker  # FltrError naming --ranker for an unknown name
"""
