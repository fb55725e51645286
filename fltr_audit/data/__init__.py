"""LETOR data: loading, caching, normalization, synthetic profiles."""
