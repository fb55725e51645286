"""Storage: the SQLite results store (``results``), its typed records (``records``) and the
recording format of intercepted messages (``recording``).

``from fltr_audit.store import load, ResultsStore`` keeps working (the results store's names)."""

from fltr_audit.store.results import *  # noqa: F401,F403
