"""Storage: the SQLite results store (``results``: ``ResultsStore`` and ``load``; its file,
``sqlite_file``, and rows, ``table_rows``), its typed records (``records``) and the recording format
of intercepted messages (``recording``).

``from fltr_audit.store import load, ResultsStore`` keeps working (the results store's names)."""

from fltr_audit.store.results import ResultsStore, load

__all__ = ["ResultsStore", "load"]
