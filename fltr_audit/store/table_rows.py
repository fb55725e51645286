"""Rows between pandas and the store's tables: values sqlite3 binds (a record's columns, the
rest as JSON in ``extra``), and tables read back with their declared types and defense names in
the current spelling (``fltr_audit.store.defense_spelling``)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fltr_audit.errors import FltrError
from fltr_audit.store.defense_spelling import current_spelling
from fltr_audit.store.sqlite_file import TABLES

def json_default(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON-serializable: {type(obj).__name__}")

def to_json(value: Any, what: str) -> str:
    try:
        return json.dumps(value, sort_keys=True, default=json_default)
    except (TypeError, ValueError) as exc:
        raise FltrError(f"{what}: {exc}") from None

def column_values(series: pd.Series) -> list:
    """A column as Python values sqlite3 binds (missing values as None)."""
    if series.dtype.kind in "iufb":
        return series.to_numpy().tolist()  # float NaN binds as NULL
    out = series.astype(object).where(series.notna(), None).tolist()
    return [v.item() if isinstance(v, np.generic) else v for v in out]

def insert_table(conn: sqlite3.Connection, name: str, run_key: str, frame: pd.DataFrame) -> None:
    if frame.columns.duplicated().any():
        raise FltrError(f"run {run_key}: table {name} has duplicate column names")
    schema = TABLES[name]
    n = len(frame)
    if n == 0:
        return
    columns = [[run_key] * n]
    for col in schema:
        columns.append(column_values(frame[col]) if col in frame.columns else [None] * n)
    extra_cols = [c for c in frame.columns if c not in schema and c != "run_key"]
    if extra_cols:
        records = frame[extra_cols].to_dict(orient="records")
        columns.append([json.dumps({str(k): v for k, v in r.items()}, default=json_default)
                        for r in records])
    else:
        columns.append([None] * n)
    placeholders = ", ".join("?" * (len(schema) + 2))
    names = ", ".join(f'"{c}"' for c in ("run_key", *schema, "extra"))  # by name: old stores append new columns
    conn.executemany(f"INSERT INTO {name} ({names}) VALUES ({placeholders})", zip(*columns))

def coerce(frame: pd.DataFrame, types: Mapping[str, str]) -> pd.DataFrame:
    """Give REAL columns float64, INTEGER columns int64 (float64 with missing values) and BOOLEAN
    columns (stored as 0/1) bool (float64 with missing values)."""
    for col, kind in types.items():
        values = frame[col]
        if kind == "REAL":
            numeric = pd.to_numeric(values, errors="coerce")
            if numeric.notna().sum() == values.notna().sum():
                frame[col] = numeric.astype("float64")
        elif kind == "INTEGER":
            numeric = pd.to_numeric(values, errors="coerce")
            if numeric.notna().sum() == values.notna().sum():
                frame[col] = numeric.astype("int64") if numeric.notna().all() else numeric.astype("float64")
        elif kind == "BOOLEAN":
            numeric = pd.to_numeric(values, errors="coerce")
            if numeric.notna().sum() == values.notna().sum():
                frame[col] = numeric.astype(bool) if numeric.notna().all() else numeric.astype("float64")
    return frame

def current(defense: Any) -> Any:
    """A stored defense name in the current spelling (other values unchanged)."""
    return current_spelling(defense) if isinstance(defense, str) else defense

def current_config(text: Any) -> Any:
    """A stored config (JSON text) whose defense is in the current spelling."""
    if not isinstance(text, str) or "delta=" not in text:
        return text
    config = json.loads(text)
    if not isinstance(config, dict) or current(config.get("defense")) == config.get("defense"):
        return text
    return json.dumps({**config, "defense": current(config["defense"])}, sort_keys=True)

def read_table(conn: sqlite3.Connection, name: str) -> pd.DataFrame:
    schema = TABLES[name]
    cols = ["run_key", *schema]
    quoted = ", ".join(f'"{c}"' for c in cols)
    rows = conn.execute(f"SELECT {quoted}, extra FROM {name} ORDER BY rowid").fetchall()
    frame = coerce(pd.DataFrame.from_records([r[:-1] for r in rows], columns=cols), schema)
    if "defense" in frame.columns:
        frame["defense"] = frame["defense"].map(current)
    extras = [json.loads(r[-1]) if r[-1] is not None else {} for r in rows]
    if any(extras):
        extra_frame = pd.DataFrame.from_records(extras, index=frame.index)
        frame = pd.concat([frame, extra_frame], axis=1)
    return frame
