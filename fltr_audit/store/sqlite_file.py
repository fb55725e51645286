"""The SQLite file behind the results store: its schema (one table per record of
``fltr_audit.store.records``, plus ``runs``, ``registered``, ``meta`` and ``claims``), opening it
(WAL mode, a busy timeout, refusing files that are not a store of this version) and the one-line
errors of a file that cannot be used."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fltr_audit.constraints import ParameterError
from fltr_audit.errors import FltrError
from fltr_audit.store.read_only import read_only_fs, read_only_mode
from fltr_audit.store.records import RECORDS, columns

SCHEMA_VERSION = "1"

BUSY_TIMEOUT_MS = 60_000

RUN_COLUMNS: dict[str, str] = {
    "run_key": "TEXT", "campaign": "TEXT", "status": "TEXT", "config": "TEXT", "env": "TEXT",
    "seed": "INTEGER", "seconds": "REAL", "finished_at": "TEXT", "error": "TEXT",
}

# One schema: the columns of each data table are the fields of its record (fltr_audit/store/records.py).
TABLES: dict[str, dict[str, str]] = {name: columns(record) for name, record in RECORDS.items()}

def ddl() -> str:
    parts = [
        "CREATE TABLE IF NOT EXISTS runs (run_key TEXT PRIMARY KEY, campaign TEXT, status TEXT "
        "CHECK (status IN ('done', 'failed')), config TEXT, env TEXT, seed INTEGER, seconds REAL, "
        "finished_at TEXT, error TEXT);",
        "CREATE TABLE IF NOT EXISTS registered (run_key TEXT PRIMARY KEY, campaign TEXT, "
        "config TEXT, registered_at TEXT);",
        "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);",
        "CREATE TABLE IF NOT EXISTS claims (run_key TEXT PRIMARY KEY, host TEXT, pid INTEGER, expires REAL);",
    ]
    for name, cols in TABLES.items():
        body = ", ".join(f'"{c}" {t}' for c, t in cols.items())
        parts.append(f"CREATE TABLE IF NOT EXISTS {name} (run_key TEXT NOT NULL, {body}, extra TEXT);")
        parts.append(f"CREATE INDEX IF NOT EXISTS {name}_run_key ON {name}(run_key);")
    return "\n".join(parts)

def add_missing_columns(conn: sqlite3.Connection) -> None:
    """Add schema columns a store written by an older version lacks (read back as NULL)."""
    for name, cols in TABLES.items():
        have = {r[1] for r in conn.execute(f"PRAGMA table_info({name})")}
        for col, kind in cols.items():
            if col not in have:
                conn.execute(f'ALTER TABLE {name} ADD COLUMN "{col}" {kind}')

def connect(path: Path, *, readonly: bool = False, init: bool = False) -> sqlite3.Connection:
    """Open ``path``; ``init`` creates the schema (WAL mode), ``readonly`` opens it read-only
    (never writing, also on a read-only file system) and checks it is complete. A symbolic
    link, an SQLite file of another schema, a newer ``schema_version`` or a corrupt file is a
    FltrError naming the store; nothing is written before those checks."""
    if path.is_symlink():
        raise ParameterError("store", f"{path}: a symbolic link (links are never followed)")
    conn = None
    try:
        if readonly:
            conn = sqlite3.connect(f"{path.resolve().as_uri()}?{read_only_mode(path)}", uri=True,
                                   isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000)
        else:
            conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA synchronous = FULL")
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        version = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() \
            if "meta" in tables else None
    except sqlite3.DatabaseError as exc:
        if conn is not None:
            conn.close()
        raise unusable(path, exc, "open") from None
    try:
        check_ours(path, tables, version[0] if version else None, readonly)
    except FltrError:
        conn.close()
        raise
    if init:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.executescript(ddl())
            add_missing_columns(conn)
            conn.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (SCHEMA_VERSION,))
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise unusable(path, exc, "write") from None
    return conn

def check_ours(path: Path, tables: set[str], version: Any, readonly: bool) -> None:
    """Refuse an SQLite file that is not a results store of this version (an empty one is
    made a store, unless opened read-only)."""
    if not tables and not readonly:
        return
    if "meta" not in tables or version is None:
        shown = ", ".join(sorted(tables)[:5]) + (", ..." if len(tables) > 5 else "")
        raise ParameterError("store", f"{path}: an SQLite file of another schema (tables: {shown or 'none'}), "
                                      "not a fltr-audit results store")
    if not str(version).isdigit():
        raise ParameterError("store", f"{path}: not a fltr-audit results store (schema_version {version!r})")
    if int(version) > int(SCHEMA_VERSION):
        raise ParameterError("store", f"{path}: written by a newer fltr-audit (schema_version {version}; this version "
                                      f"reads up to {SCHEMA_VERSION}); upgrade fltr-audit to use it")
    if readonly and not {"meta", "runs", "registered", *TABLES} <= tables:
        raise ParameterError("store", f"{path}: not a fltr-audit results store (tables missing)")

def unusable(path: Path, exc: sqlite3.DatabaseError, doing: str) -> FltrError:
    """The one-line error of an SQLite failure on the store: corrupt, not SQLite, or not
    openable / writable (saying when its file system is read-only)."""
    text = str(exc)
    if "malformed" in text or "not a database" in text:
        return ParameterError("store", f"{path}: corrupt, or not an SQLite file ({text})")
    if read_only_fs(path):
        text += "; its file system is read-only"
    return ParameterError("store", f"{path}: cannot {doing} ({text})")

@contextmanager
def session(path: Path, *, readonly: bool = False) -> Iterator[sqlite3.Connection]:
    """A connection to the store whose SQLite errors become one-line FltrErrors."""
    conn = connect(path, readonly=readonly)
    try:
        yield conn
    except sqlite3.DatabaseError as exc:
        if not file_fault(exc):
            raise
        raise unusable(path, exc, "read") from None
    finally:
        conn.close()

def file_fault(exc: sqlite3.DatabaseError) -> bool:
    """Whether the error is the file's (corrupt, unreadable, unwritable, locked), not a bug
    of ours such as a value sqlite3 cannot bind (``ProgrammingError``, ``IntegrityError``)."""
    return type(exc) in (sqlite3.OperationalError, sqlite3.DatabaseError)
