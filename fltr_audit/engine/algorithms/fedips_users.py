"""FedIPS's simulated users: a persistent position bias per user and each round's local click log.

Users (FedIPS §4): user u examines rank i with probability (1 / i)^gamma_u and clicks by Eq. 11
(``clicks.PositionBasedModel``); gamma_u is drawn once per client id from N(gamma, 0.1)
left-truncated at 0 and kept for the whole run (``UserPopulation``: deterministic in the client
id and the population seed). A client's log for one round (``simulate_log``, ``ClickLog``):
sessions over its B lists in turn until it has clicked m documents or has run
``max_sessions`` sessions (see ``fltr_audit.engine.algorithms.fedips``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from fltr_audit.errors import FltrError
from fltr_audit.engine.kernels import kernel_array
from fltr_audit.engine.kernels.fedips import session_logs
from fltr_audit.engine.randomness import stream


class UserPopulation:
    """Persistent per-client position-bias factors gamma_u.

    Client ids are grouped in blocks of ``block``; block b draws its factors with
    ``click_model.draw_gammas`` from ``stream(seed, "fedips-users", b)``, so a client's
    gamma_u depends only on its id and the seed.
    """

    def __init__(self, click_model: Any, seed: int, block: int = 1024) -> None:
        self.click_model = click_model
        self.seed = int(seed)
        self.block = int(block)
        self._blocks: dict[int, np.ndarray] = {}

    def gammas(self, client_ids: np.ndarray) -> np.ndarray:
        """gamma_u of each client id, shape client_ids.shape, float64."""
        ids = np.asarray(client_ids, dtype=np.int64)
        if ids.size and ids.min() < 0:
            raise FltrError("client ids must be non-negative")
        blocks = ids // self.block
        for b in np.unique(blocks):
            if int(b) not in self._blocks:
                rng = stream(self.seed, "fedips-users", int(b))
                self._blocks[int(b)] = np.asarray(self.click_model.draw_gammas(self.block, rng), dtype=np.float64)
        out = np.empty(ids.shape, dtype=np.float64)
        for b in np.unique(blocks):
            sel = blocks == b
            out[sel] = self._blocks[int(b)][ids[sel] % self.block]
        return out


@dataclass(frozen=True)
class ClickLog:
    """A cohort's local click logs for one round (n clients, B queries, K positions, m clicks).

    Attributes
    ----------
    shown : int64 (n, B, K)
        Rows of the f_0 list of each query slot; -1 marks an empty slot.
    gammas : float64 (n,)
        Each client's position-bias factor.
    click_slot, click_pos : int64 (n, m)
        Query slot b and position i (0-based) of each of the first m clicks, in session
        order; -1 past a client's last click.
    n_clicks : int64 (n,)
    clicked : bool (n, B, K)
        Slots clicked at least once among the first m clicks (the ground truth).
    sessions : int64 (n, B)
        Sessions of each query slot up to the one holding the m-th click (whole sessions;
        what the propensity EM counts).
    session_clicks : int64 (n, B, K)
        Clicks of each slot over those sessions.
    """

    shown: np.ndarray
    gammas: np.ndarray
    click_slot: np.ndarray
    click_pos: np.ndarray
    n_clicks: np.ndarray
    clicked: np.ndarray
    sessions: np.ndarray
    session_clicks: np.ndarray


def simulate_log(
    click_prob: np.ndarray, m: int, max_sessions: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Sessions over a client's B lists in turn until m clicks (see the module docstring): the
    uniforms of every possible session drawn at once, the sessions then run client by client by
    the compiled ``kernels.fedips.session_logs``.

    Parameters
    ----------
    click_prob : float (n, B, K)
        Click probability of every shown slot (0 on empty slots).
    m : int
        Clicks per client.
    max_sessions : int
        Session cap per client (rounded up to a multiple of B).

    Returns
    -------
    click_slot, click_pos : int64 (n, m); n_clicks : (n,); sessions : (n, B); session_clicks : (n, B, K)
    """
    n, b, k = click_prob.shape
    rounds = -(-max_sessions // b)
    uniforms = rng.random((n, rounds, b, k))  # session s = r * B + slot
    click_prob = kernel_array(click_prob, np.float64)
    click_slot, click_pos = np.empty((n, m), dtype=np.int64), np.empty((n, m), dtype=np.int64)
    n_clicks, sessions = np.empty(n, dtype=np.int64), np.empty((n, b), dtype=np.int64)
    session_clicks = np.zeros((n, b, k), dtype=np.int64)
    session_logs(uniforms, click_prob, int(m), click_slot, click_pos, n_clicks, sessions, session_clicks)
    return click_slot, click_pos, n_clicks, sessions, session_clicks


def clicked_slots(click_slot: np.ndarray, click_pos: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """bool ``shape`` (n, B, K): the slots among a log's clicks (``simulate_log``'s slot and position)."""
    clicked = np.zeros(shape, dtype=bool)
    has = click_slot >= 0
    rows = np.broadcast_to(np.arange(shape[0])[:, None], click_slot.shape)
    clicked[rows[has], click_slot[has], click_pos[has]] = True
    return clicked
