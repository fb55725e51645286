"""LETOR data: loading, caching, normalization, synthetic profiles."""

from fltr_audit.engine.data.dataset import Dataset, Splits
from fltr_audit.engine.data.letor import read_letor
from fltr_audit.engine.data.letor_write import format_letor, write_letor
from fltr_audit.engine.data.load import data_info, load_splits
from fltr_audit.engine.data.normalize import NORMALIZATIONS, drop_single_label, query_minmax, zscore, zscore_stats
from fltr_audit.engine.data.synthetic import PROFILES, fold_split, generate

__all__ = [
    "Dataset", "Splits", "load_splits", "data_info", "read_letor", "write_letor", "format_letor",
    "NORMALIZATIONS", "query_minmax", "zscore", "zscore_stats", "drop_single_label",
    "PROFILES", "generate", "fold_split",
]
