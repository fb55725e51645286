"""The results store: one SQLite file per campaign (stdlib ``sqlite3`` + pandas only).

Every finished run is written in ONE transaction: its ``runs`` row and all of its result
rows, so an interrupted write leaves nothing of that run and a re-run of the campaign can
rely on :meth:`ResultsStore.completed_keys`. The file is in WAL mode (readers never block
the writer) with a busy timeout, so several processes may write to it.

Schema (``schema_version`` 1; every data table also has ``run_key`` and ``extra``)::

    runs(run_key TEXT PRIMARY KEY, campaign TEXT, status TEXT 'done'|'failed',
         config TEXT (JSON), env TEXT (JSON), seed INTEGER, seconds REAL,
         finished_at TEXT (UTC ISO 8601), error TEXT)
    registered(run_key TEXT PRIMARY KEY, campaign TEXT, config TEXT (JSON),
               registered_at TEXT)        -- runs a campaign announced; pending until in runs
    curves(defense TEXT, round INTEGER, offline_ndcg10 REAL, online_ndcg REAL,
           shown_ndcg REAL)
    attacks(algo TEXT, data TEXT, fold INTEGER, seed INTEGER, click_model TEXT,
            defense TEXT, threat_model TEXT, attack TEXT, averaging TEXT, accuracy REAL,
            precision REAL, recall REAL, f1 REAL, auc REAL, n_queries INTEGER,
            probe_cohort INTEGER, reference BOOLEAN, auc_counterfactual REAL,
            leakage REAL, leakage_normalized REAL, advantage REAL,
            advantage_counterfactual REAL, tpr_at_fpr_0_01 REAL, tpr_at_fpr_0_001 REAL,
            n_counterfactual INTEGER)
    per_query(click_model TEXT, defense TEXT, attack TEXT, client INTEGER, query INTEGER,
              n_shown INTEGER, n_clicked INTEGER, tp INTEGER, fp INTEGER, tn INTEGER,
              fn INTEGER, precision REAL, recall REAL, auc REAL, auc_counterfactual REAL,
              advantage REAL, advantage_counterfactual REAL)
    audits(algo TEXT, defense TEXT, mechanism TEXT, attack TEXT, threat_model TEXT,
           claimed_epsilon REAL, claimed_delta REAL, claimed_scope TEXT,
           epsilon_point REAL, epsilon_lb REAL, confidence REAL, n_trials INTEGER,
           fpr REAL, fnr REAL, neighbours TEXT, audited_scope TEXT, test TEXT, fp INTEGER,
           fn INTEGER, n0 INTEGER, n1 INTEGER, ceiling REAL, trial_limited BOOLEAN, mu REAL,
           mu_lb REAL, rounds INTEGER, claim_verdict TEXT, tightness REAL, small_error TEXT,
           verdict_by TEXT, gof_pvalue REAL, power REAL, trials_needed REAL, mu_fp INTEGER,
           mu_fn INTEGER, pair TEXT, pairs INTEGER, verdict_note TEXT, epsilon_server REAL,
           epsilon_server_q99 REAL, epsilon_observer REAL, delta_total REAL,
           participations_max INTEGER, participations_q99 INTEGER, audit_key TEXT)
    utility(algo TEXT, data TEXT, fold INTEGER, seed INTEGER, click_model TEXT,
            defense TEXT, ndcg10 REAL, ndcg10_delta REAL)
    epsilon(click_model TEXT, levels INTEGER, length INTEGER, p REAL, epsilon REAL,
            theoretical REAL)
    run_audits(algorithm TEXT, defense TEXT, scope TEXT, canaries INTEGER, rounds INTEGER,
               runs INTEGER, sampling_rate REAL, delta REAL, epsilon_lb REAL,
               guesses INTEGER, correct INTEGER, canary_limit REAL,
               limited_by_canaries BOOLEAN, epsilon_estimate REAL, estimate_low REAL,
               estimate_high REAL, epsilon_lb_multi REAL, multi_fp INTEGER,
               multi_fn INTEGER, multi_n INTEGER, epsilon_accounted_canaries REAL,
               canary_participations_max INTEGER, epsilon_server REAL,
               epsilon_server_q99 REAL, epsilon_observer REAL, claimed_epsilon REAL,
               claimed_scope TEXT, claim_verdict TEXT, tightness REAL, mu_lb REAL,
               mu_limit REAL, mu_claimed REAL, epsilon_lb_fdp REAL, fdp_guesses INTEGER,
               fdp_correct INTEGER, fdp_pool INTEGER, fdp_participations INTEGER,
               verdict_by TEXT, ndcg10 REAL, seconds REAL, epsilon_estimate_reason TEXT,
               canaries_needed REAL, float_channel TEXT, float_channel_pvalue REAL, audit_key TEXT)
    unlearning_audits(algorithm TEXT, ranker TEXT, method TEXT, defense TEXT,
                      rounds INTEGER, clients INTEGER, population INTEGER, forget INTEGER,
                      canaries INTEGER, included INTEGER, forgotten INTEGER, scale REAL,
                      delta REAL, eligible INTEGER, epsilon_lb REAL, guesses INTEGER,
                      correct INTEGER, canary_limit REAL, limited_by_canaries BOOLEAN,
                      mu_lb REAL, mu_limit REAL, epsilon_lb_fdp REAL, fdp_pool INTEGER,
                      fdp_participations INTEGER, tpr_at_fpr_0_01 REAL,
                      tpr_at_fpr_0_001 REAL, auc REAL, verdict TEXT,
                      detectable_residue REAL, before_epsilon_lb REAL,
                      server_epsilon_lb REAL, server_auc REAL,
                      before_alone_epsilon_lb REAL, server_pair_only INTEGER,
                      server_before_only INTEGER, server_p_value REAL, server_verdict TEXT,
                      difference_leakage REAL, difference_leakage_ci_high REAL,
                      difference_attack TEXT, difference_verdict TEXT, stored_leakage REAL,
                      stored_verdict TEXT, ndcg10 REAL, ndcg10_before REAL,
                      ndcg10_retrain REAL, ndcg10_delta REAL, weight_distance REAL,
                      poison_ndcg10_before REAL, poison_ndcg10_after REAL,
                      poison_effect_removed REAL, poison_verdict TEXT, seconds REAL,
                      retrain_seconds REAL, client_steps INTEGER,
                      retrain_client_steps INTEGER, stored_bytes INTEGER,
                      peak_bytes INTEGER, retrain_peak_bytes INTEGER, audit_key TEXT)
    meta(key TEXT PRIMARY KEY, value TEXT)
    claims(run_key TEXT PRIMARY KEY, host TEXT, pid INTEGER, expires REAL (Unix time))
                                          -- runs a process is computing now (see ResultsStore.claim)

Columns of a recorded DataFrame that the schema does not name (algorithm metrics in
``curves``, extra metrics in ``utility``, ...) go into the row's ``extra`` column as a JSON
object; :func:`load` expands them back into columns (in order of first appearance). Schema
columns missing from a recorded frame are stored as NULL. NaN is stored as NULL and read
back as NaN; REAL columns load as float64, INTEGER columns as int64 (float64 when a value
is missing), BOOLEAN columns (0/1) as bool. The store sets ``run_key`` on every data row (``epsilon`` included).

Run claiming: a campaign claims the runs it is about to compute (owner host and pid, a lease
renewed while it works); another campaign on the same store skips runs claimed by a live
owner. A claim ends when its run is recorded, when its owner releases it, when the owner (on
this host) is no longer running, or when the lease expires (an owner on another host).

Semantics: re-recording a run whose key is ``done`` is a no-op; recording a run whose key
``failed`` replaces the failure row; a failure is never recorded over a done run.

Defense names: a store written before the sensitivity rename spells ``clip(delta=5)``,
``dp-distributed(eps=4.5,delta=3)``, ...; :func:`load` and :meth:`ResultsStore.status` read every
``defense`` (the tables' column and the runs' configs) in the current spelling
(``clip(sensitivity=5)``, :mod:`fltr_audit.store.defense_spelling`), so old and new rows of one
defense group together. The file is not rewritten, and run keys are unchanged.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import time
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd

from fltr_audit.constraints import ParameterError
from fltr_audit.errors import FltrError
from fltr_audit.store.sqlite_file import RUN_COLUMNS, TABLES, connect, file_fault, session, unusable
from fltr_audit.store.table_rows import coerce, current, current_config, insert_table, read_table, to_json

CLAIM_LEASE_SECONDS = 600.0


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class ResultsStore:
    """Durable results of a campaign in the SQLite file ``path`` (created when missing).

    Parameters
    ----------
    path : str or Path
        The store file.
    create : bool
        When False, a missing file is an error instead of a new empty store.
    readonly : bool
        Open an existing store for reading only (``status``, ``completed_keys``, ``claims``):
        nothing is ever written to the file, and the schema is not created or extended.
    """

    def __init__(self, path: str | Path, *, create: bool = True, readonly: bool = False) -> None:
        self.path = Path(path)
        self.readonly = readonly
        if not self.path.is_file() and not self.path.is_symlink():
            if not create or readonly:
                raise ParameterError("store", f"{self.path}: no such file")
            if not self.path.parent.is_dir():
                raise ParameterError("store", f"{self.path}: directory {self.path.parent} does not exist")
        connect(self.path, readonly=readonly, init=not readonly).close()

    def _write(self, work) -> Any:
        """Run ``work(conn)`` in one IMMEDIATE transaction; a store that cannot be written (full
        disk, read-only, locked past the busy timeout) is a FltrError naming it."""
        if self.readonly:
            raise ParameterError("store", f"{self.path}: opened read-only")
        conn = connect(self.path)
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                result = work(conn)
                conn.execute("COMMIT")
            except BaseException:
                try:
                    conn.execute("ROLLBACK")
                except sqlite3.DatabaseError:
                    pass  # SQLite rolled back already
                raise
            return result
        except (sqlite3.OperationalError, sqlite3.DatabaseError) as exc:
            if not file_fault(exc):
                raise
            raise unusable(self.path, exc, "write") from None
        finally:
            conn.close()

    def journal_mode(self) -> str:
        """The SQLite journal mode of the file (``"wal"``)."""
        with session(self.path, readonly=self.readonly) as conn:
            return conn.execute("PRAGMA journal_mode").fetchone()[0]

    def completed_keys(self) -> set[str]:
        """Keys of the runs recorded as done (a failed run is not completed)."""
        with session(self.path, readonly=self.readonly) as conn:
            return {r[0] for r in conn.execute("SELECT run_key FROM runs WHERE status = 'done'")}

    def register_pending(self, keys_with_configs: Mapping[str, dict] | Iterable[tuple[str, dict]],
                         campaign: str = "") -> int:
        """Announce runs (key -> resolved config) so :meth:`status` lists them as pending.

        Returns the number of keys newly registered.
        """
        items = keys_with_configs.items() if isinstance(keys_with_configs, Mapping) else keys_with_configs
        rows = [(str(k), campaign, to_json(c, f"config of run {k}"), _now()) for k, c in items]

        def work(conn: sqlite3.Connection) -> int:
            before = conn.total_changes
            conn.executemany("INSERT OR IGNORE INTO registered VALUES (?, ?, ?, ?)", rows)
            return conn.total_changes - before

        return self._write(work)

    def claim(self, keys: Iterable[str], lease: float = CLAIM_LEASE_SECONDS) -> list[str]:
        """Claim the runs ``keys`` for this process (host and pid) for ``lease`` seconds.

        Returns the keys now held by this process, in order: those not done and not claimed by
        another live owner (a claim whose lease expired, or whose owner on this host has
        exited, is taken over). Done in one transaction, so two processes never both get a key.
        """
        host, pid = socket.gethostname(), os.getpid()
        keys = list(keys)

        def work(conn: sqlite3.Connection) -> list[str]:
            now = time.time()
            done = {r[0] for r in conn.execute("SELECT run_key FROM runs WHERE status = 'done'")}
            held = {r[0]: r[1:] for r in conn.execute("SELECT run_key, host, pid, expires FROM claims")}
            got = []
            for key in keys:
                if key in done:
                    continue
                owner = held.get(key)
                if owner is not None and (owner[0], owner[1]) != (host, pid) and owner[2] > now \
                        and not (owner[0] == host and not _pid_alive(owner[1])):
                    continue
                got.append(key)
            conn.executemany("INSERT OR REPLACE INTO claims VALUES (?, ?, ?, ?)",
                             [(k, host, pid, now + lease) for k in got])
            return got

        return self._write(work)

    def renew_claims(self, keys: Iterable[str], lease: float = CLAIM_LEASE_SECONDS) -> None:
        """Extend this process's claims on ``keys`` by ``lease`` seconds from now."""
        rows = [(time.time() + lease, k, socket.gethostname(), os.getpid()) for k in keys]
        self._write(lambda conn: conn.executemany(
            "UPDATE claims SET expires = ? WHERE run_key = ? AND host = ? AND pid = ?", rows))

    def release_claims(self, keys: Iterable[str]) -> None:
        """Drop this process's claims on ``keys`` (runs it will not compute after all)."""
        rows = [(k, socket.gethostname(), os.getpid()) for k in keys]
        self._write(lambda conn: conn.executemany(
            "DELETE FROM claims WHERE run_key = ? AND host = ? AND pid = ?", rows))

    def claims(self) -> pd.DataFrame:
        """The current claims: run_key, host, pid, expires (Unix time)."""
        with session(self.path, readonly=self.readonly) as conn:
            rows = conn.execute("SELECT run_key, host, pid, expires FROM claims ORDER BY run_key").fetchall()
        return pd.DataFrame.from_records(rows, columns=["run_key", "host", "pid", "expires"])

    def record_run(self, run_key: str, campaign: str, config: dict, env: dict, seed: int | None,
                   seconds: float, tables: Mapping[str, pd.DataFrame]) -> bool:
        """Write a finished run and all its result rows in one transaction.

        Parameters
        ----------
        tables : mapping of table name -> DataFrame
            Any of ``curves``, ``attacks``, ``per_query``, ``audits``, ``utility``,
            ``epsilon``; columns as in the module docstring (others go to ``extra``).

        Returns
        -------
        bool
            False when the key was already done (nothing written), True otherwise.
        """
        unknown = sorted(set(tables) - set(TABLES))
        if unknown:
            raise FltrError(f"run {run_key}: unknown result table(s) {', '.join(unknown)} "
                            f"(known: {', '.join(TABLES)})")
        for name, frame in tables.items():
            if "run_key" in frame.columns and not (frame["run_key"] == run_key).all():
                raise FltrError(f"run {run_key}: table {name} has rows of another run_key")
        if seed is not None and not -(2**63) <= int(seed) < 2**63:
            raise FltrError(f"run {run_key}: seed {seed} does not fit the store's 64-bit INTEGER")
        run_row = (run_key, campaign, "done", to_json(config, f"config of run {run_key}"),
                   to_json(env, f"env of run {run_key}"), None if seed is None else int(seed),
                   float(seconds), _now(), None)

        def work(conn: sqlite3.Connection) -> bool:
            status = conn.execute("SELECT status FROM runs WHERE run_key = ?", (run_key,)).fetchone()
            if status is not None and status[0] == "done":
                return False
            conn.execute("DELETE FROM runs WHERE run_key = ?", (run_key,))
            conn.execute("DELETE FROM claims WHERE run_key = ?", (run_key,))
            conn.execute("INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", run_row)
            for name, frame in tables.items():
                insert_table(conn, name, run_key, frame)
            return True

        return self._write(work)

    def record_failure(self, run_key: str, campaign: str, config: dict, error: str) -> bool:
        """Record that a run failed with ``error``; no-op (False) when the key is done."""
        row = (run_key, campaign, "failed", to_json(config, f"config of run {run_key}"), None,
               config.get("seed") if isinstance(config.get("seed"), int) else None, None, _now(),
               str(error))

        def work(conn: sqlite3.Connection) -> bool:
            status = conn.execute("SELECT status FROM runs WHERE run_key = ?", (run_key,)).fetchone()
            if status is not None and status[0] == "done":
                return False
            conn.execute("INSERT OR REPLACE INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", row)
            conn.execute("DELETE FROM claims WHERE run_key = ?", (run_key,))
            return True

        return self._write(work)

    def configs(self) -> pd.DataFrame:
        """``run_key`` and ``config`` (JSON text) of every known run, recorded or pending."""
        with session(self.path, readonly=self.readonly) as conn:
            rows = conn.execute("SELECT run_key, config FROM runs UNION ALL SELECT run_key, config FROM registered "
                                "WHERE run_key NOT IN (SELECT run_key FROM runs)").fetchall()
        return pd.DataFrame.from_records(rows, columns=["run_key", "config"])

    def status(self) -> pd.DataFrame:
        """One row per known run: run_key, campaign, status (done|failed|pending), algo, defense,
        seed, seconds, finished_at, error; recorded runs first, then pending ones."""
        with session(self.path, readonly=self.readonly) as conn:
            rows = conn.execute(
                "SELECT run_key, campaign, status, config, seed, seconds, finished_at, error FROM runs "
                "UNION ALL SELECT run_key, campaign, 'pending', config, NULL, NULL, NULL, NULL "
                "FROM registered WHERE run_key NOT IN (SELECT run_key FROM runs)").fetchall()
        configs = [json.loads(r[3]) if r[3] else {} for r in rows]
        rows = [(*r[:3], c.get("algo"), current(c.get("defense")), *r[4:]) for r, c in zip(rows, configs)]
        cols = ["run_key", "campaign", "status", "algo", "defense", "seed", "seconds", "finished_at", "error"]
        frame = pd.DataFrame.from_records(rows, columns=cols)
        return coerce(frame, {"seed": "INTEGER", "seconds": "REAL"})


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True
    return True


def load(path: str | Path) -> dict[str, pd.DataFrame]:
    """Read every table of the store at ``path`` (read-only) as DataFrames.

    Returns a dict with ``runs`` (config and env as JSON text) and the result tables
    ``curves``, ``attacks``, ``per_query``, ``audits``, ``utility``, ``epsilon``.
    """
    path = Path(path)
    if not path.is_file() and not path.is_symlink():
        raise ParameterError("store", f"{path}: no such file")
    conn = connect(path, readonly=True)
    try:
        # runs in the order their campaign registered them (its grid), not the order workers finished
        # them in, so that every table reads the same whatever the executor
        rows = conn.execute(f"SELECT {', '.join('r.' + c for c in RUN_COLUMNS)} FROM runs r LEFT JOIN registered g "
                            "USING (run_key) ORDER BY g.rowid IS NULL, g.rowid, r.rowid").fetchall()
        out = {"runs": coerce(pd.DataFrame.from_records(rows, columns=list(RUN_COLUMNS)),
                               {"seed": "INTEGER", "seconds": "REAL"})}
        out["runs"]["config"] = out["runs"]["config"].map(current_config)
        position = {key: i for i, key in enumerate(out["runs"]["run_key"])}
        for name in TABLES:
            frame = read_table(conn, name)
            order = frame["run_key"].map(position).fillna(len(position)).to_numpy()
            out[name] = frame.iloc[order.argsort(kind="stable")].reset_index(drop=True)
    except sqlite3.DatabaseError as exc:
        raise unusable(path, exc, "read") from None
    finally:
        conn.close()
    return out
